"""The settings dialog's Captions page: what captions listen to (the microphone, what the
computer plays, one app, or you and them with their labels), translation, the profanity mask
and how the overlay looks (lines, font, size, box or outline, opacity, dock, click-through)."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFontComboBox,
    QFormLayout,
    QLineEdit,
    QSpinBox,
    QWidget,
)

from ui.settings_pages import FieldValue

SOURCE_NAMES = {"mic": "Microphone", "system": "What the computer plays",
                "app": "One app's sound", "both": "You and them (microphone + computer)"}
TRANSLATE_NAMES = {"off": "Off", "below": "English under each line", "alone": "English only"}


class CaptionSettings(Protocol):
    @property
    def caption_lines(self) -> int: ...
    @property
    def caption_font_pt(self) -> int: ...
    @property
    def caption_source(self) -> str: ...
    @property
    def caption_app(self) -> str: ...
    @property
    def caption_you(self) -> str: ...
    @property
    def caption_them(self) -> str: ...
    @property
    def caption_translate(self) -> str: ...
    @property
    def caption_font_family(self) -> str: ...
    @property
    def caption_background(self) -> str: ...
    @property
    def caption_opacity(self) -> int: ...
    @property
    def caption_dock(self) -> str: ...
    @property
    def caption_click_through(self) -> bool: ...
    @property
    def caption_mask_profanity(self) -> bool: ...


def _combo(names: dict[str, str], current: str) -> QComboBox:
    box = QComboBox()
    for value, name in names.items():
        box.addItem(name, value)
    box.setCurrentIndex(max(0, box.findData(current)))
    return box


class CaptionsPage(QWidget):
    """``apps``: the apps playing sound now, offered for "One app's sound" (any name may be
    typed: the app need not be playing yet)."""

    def __init__(self, settings: CaptionSettings, apps: list[str], max_lines: int = 10,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("captionsPage")
        form = QFormLayout(self)
        self.source = _combo(SOURCE_NAMES, settings.caption_source)
        self.app = QComboBox()
        self.app.setEditable(True)
        self.app.addItems(sorted(set(apps)))
        self.app.setCurrentText(settings.caption_app)
        self.you = QLineEdit(settings.caption_you)
        self.them = QLineEdit(settings.caption_them)
        self.translate = _combo(TRANSLATE_NAMES, settings.caption_translate)
        self.mask_profanity = QCheckBox("Mask profanity")
        self.mask_profanity.setChecked(settings.caption_mask_profanity)
        self.lines = QSpinBox()
        self.lines.setRange(1, max_lines)
        self.lines.setValue(settings.caption_lines)
        self.font_family = QFontComboBox()
        if settings.caption_font_family:
            self.font_family.setCurrentFont(QFont(settings.caption_font_family))
        self._default_family = "" if not settings.caption_font_family else None
        self.font_size = QSpinBox()
        self.font_size.setRange(8, 96)
        self.font_size.setValue(settings.caption_font_pt)
        self.background = _combo({"box": "Box behind the text", "outline": "Outlined text"},
                                 settings.caption_background)
        self.opacity = QSpinBox()
        self.opacity.setRange(0, 100)
        self.opacity.setSuffix(" %")
        self.opacity.setValue(settings.caption_opacity)
        self.dock = _combo({"bottom": "Bottom of the screen", "top": "Top of the screen",
                            "floating": "Floating (drag it)"}, settings.caption_dock)
        self.click_through = QCheckBox("Clicks go through to the app below")
        self.click_through.setChecked(settings.caption_click_through)
        for label, widget in (
                ("Listen to", self.source), ("App", self.app), ("Your label", self.you),
                ("Their label", self.them), ("Translate", self.translate), ("", self.mask_profanity),
                ("Lines", self.lines), ("Font", self.font_family), ("Size (pt)", self.font_size),
                ("Background", self.background), ("Box opacity", self.opacity),
                ("Position", self.dock), ("", self.click_through)):
            form.addRow(label, widget)
        self.font_family.currentFontChanged.connect(lambda _f: self._family_chosen())
        self.source.currentIndexChanged.connect(lambda _i: self._enable())
        self._enable()

    def _family_chosen(self) -> None:
        self._default_family = None

    def _enable(self) -> None:
        source = self.source.currentData()
        self.app.setEnabled(source == "app")
        self.you.setEnabled(source == "both")
        self.them.setEnabled(source == "both")

    def values(self) -> dict[str, FieldValue]:
        family = self._default_family if self._default_family is not None else (
            self.font_family.currentFont().family())
        return {
            "caption_source": str(self.source.currentData()),
            "caption_app": self.app.currentText().strip(),
            "caption_you": self.you.text().strip(), "caption_them": self.them.text().strip(),
            "caption_translate": str(self.translate.currentData()),
            "caption_mask_profanity": self.mask_profanity.isChecked(),
            "caption_lines": self.lines.value(), "caption_font_family": family,
            "caption_font_pt": self.font_size.value(),
            "caption_background": str(self.background.currentData()),
            "caption_opacity": self.opacity.value(), "caption_dock": str(self.dock.currentData()),
            "caption_click_through": self.click_through.isChecked(),
        }
