"""Settings dialog: edits a copy of the settings; the caller saves what `result_settings()`
returns. The API key field is never filled from, or written to, the settings file: the caller
stores it in the OS keyring.

The UI does not import the app (layers app > ui > engine): the app passes in its settings (any
object with the `ShownSettings` fields), the choices for each list, and `apply`, which builds
new settings from the edited fields and raises ValueError when they are invalid."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeAlias, TypeVar

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ui.polish_page import PolishPage, PolishSettings
from ui.settings_pages import DictationPage, DictationSettings, FieldValue, TextPage, VocabularyPage


class ShownSettings(DictationSettings, PolishSettings, Protocol):
    """The fields the dialog shows (read-only: the dialog never mutates the settings)."""

    @property
    def backend(self) -> str: ...
    @property
    def remote_url(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def language(self) -> str: ...
    @property
    def listen_mode(self) -> str: ...
    @property
    def hotkey(self) -> str: ...
    @property
    def hotkey_mode(self) -> str: ...
    @property
    def inject_mode(self) -> str: ...
    @property
    def paste_keys(self) -> str: ...
    @property
    def caption_lines(self) -> int: ...
    @property
    def caption_font_pt(self) -> int: ...


@dataclass(frozen=True)
class SettingsChoices:
    """The values offered by each drop-down list."""

    backends: tuple[str, ...]
    devices: tuple[str, ...]
    listen_modes: tuple[str, ...]
    hotkey_modes: tuple[str, ...]
    inject_modes: tuple[str, ...]
    paste_keys: tuple[str, ...]
    text_styles: tuple[str, ...] = ("sentence", "chat")
    polish_presets: tuple[str, ...] = ("clean",)


S = TypeVar("S", bound=ShownSettings)
FieldValues: TypeAlias = dict[str, FieldValue]  # field name -> edited value


class SettingsDialog(QDialog, Generic[S]):
    def __init__(self, settings: S, choices: SettingsChoices, apply: Callable[[FieldValues], S],
                 keyring_status: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("settingsDialog")
        self.setWindowTitle("Sottovoce settings")
        self._apply = apply
        self._result: S | None = None
        self.tabs = QTabWidget()
        general = QWidget()
        form = QFormLayout(general)
        self.backend = self._combo(choices.backends, settings.backend)
        self.remote_url = QLineEdit(settings.remote_url)
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("unchanged (kept in the system keyring)")
        self.model = QLineEdit(settings.model)
        self.device = self._combo(choices.devices, settings.device)
        self.language = QLineEdit(settings.language)
        self.language.setPlaceholderText("auto-detect")
        self.listen_mode = self._combo(choices.listen_modes, settings.listen_mode)
        self.hotkey = QLineEdit(settings.hotkey)
        self.hotkey_mode = self._combo(choices.hotkey_modes, settings.hotkey_mode)
        self.inject_mode = self._combo(choices.inject_modes, settings.inject_mode)
        self.paste_keys = self._combo(choices.paste_keys, settings.paste_keys)
        self.caption_lines = QSpinBox()
        self.caption_lines.setRange(1, 3)
        self.caption_lines.setValue(settings.caption_lines)
        self.caption_font = QSpinBox()
        self.caption_font.setRange(8, 96)
        self.caption_font.setValue(settings.caption_font_pt)
        rows = (("Backend", self.backend), ("Server URL", self.remote_url),
                ("API key", self.api_key), ("Model", self.model), ("Device", self.device),
                ("Language", self.language), ("Listening", self.listen_mode),
                ("Hotkey", self.hotkey), ("Hotkey mode", self.hotkey_mode),
                ("Insert text by", self.inject_mode), ("Paste keys", self.paste_keys),
                ("Caption lines", self.caption_lines), ("Caption size (pt)", self.caption_font))
        for label, widget in rows:
            form.addRow(label, widget)
        self.keyring_label = QLabel(keyring_status)
        self.keyring_label.setWordWrap(True)
        form.addRow(self.keyring_label)
        self.text_page = TextPage(settings, choices.text_styles)
        self.vocabulary_page = VocabularyPage(settings)
        self.dictation_page = DictationPage(settings)
        self.polish_page = PolishPage(settings, choices.polish_presets)
        self.tabs.addTab(general, "General")
        self.tabs.addTab(self.text_page, "Text")
        self.tabs.addTab(self.vocabulary_page, "Vocabulary")
        self.tabs.addTab(self.dictation_page, "Dictation")
        self.tabs.addTab(self.polish_page, "AI polish")
        self.error_label = QLabel()
        self.error_label.setStyleSheet("color: #d0312d;")
        self.error_label.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)
        layout.addWidget(self.error_label)
        layout.addWidget(buttons)

    @staticmethod
    def _combo(items: tuple[str, ...], current: str) -> QComboBox:
        box = QComboBox()
        box.addItems(list(items))
        box.setCurrentText(current)
        return box

    def edited_settings(self) -> S:
        """The settings as edited; raises ValueError (with the reason) when invalid."""
        pages = {**self.text_page.values(), **self.vocabulary_page.values(),
                 **self.dictation_page.values(), **self.polish_page.values()}
        return self._apply(dict(
            **pages, backend=self.backend.currentText(),
            remote_url=self.remote_url.text().strip(), model=self.model.text().strip(),
            device=self.device.currentText(), language=self.language.text().strip().lower(),
            listen_mode=self.listen_mode.currentText(), hotkey=self.hotkey.text().strip(),
            hotkey_mode=self.hotkey_mode.currentText(),
            inject_mode=self.inject_mode.currentText(), paste_keys=self.paste_keys.currentText(),
            caption_lines=self.caption_lines.value(), caption_font_pt=self.caption_font.value()))

    def new_api_key(self) -> str | None:
        """The key typed in, or None to leave the stored one alone."""
        return self.api_key.text() or None

    def result_settings(self) -> S | None:
        return self._result

    def accept(self) -> None:
        try:
            self._result = self.edited_settings()
        except ValueError as exc:
            self.error_label.setText(str(exc))  # stay open so the user can fix it
            return
        super().accept()
