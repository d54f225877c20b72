"""Settings > Languages: the languages spoken (auto-detection chooses among them), the current
one and the chord that cycles through them."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ui.hotkey_edit import HotkeyEdit
from ui.settings_pages import FieldValue

# -- Languages -----------------------------------------------------------------------------------

class LanguagesPage(QWidget):
    """Whisper's languages by name; the user ticks the ones they speak (auto-detect then
    chooses among them only), picks the language now, and the hotkey that cycles them. An
    English-only model greys the list out and says so."""

    def __init__(self, languages: dict[str, str], spoken: tuple[str, ...], current: str,
                 hotkey: HotkeyEdit, english_only: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._names = languages
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Find a language…")
        self.filter.textChanged.connect(self._filter)
        self.list = QListWidget()
        self.list.setObjectName("languageList")
        ordered = [c for c in spoken if c in languages] + [c for c in languages if c not in spoken]
        for code in ordered:
            item = QListWidgetItem(f"{languages[code]} ({code})")
            item.setData(Qt.ItemDataRole.UserRole, code)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if code in spoken
                               else Qt.CheckState.Unchecked)
            self.list.addItem(item)
        self.list.itemChanged.connect(lambda _item: self._fill_current(self.current()))
        self.current_box = QComboBox()
        self.current_box.setObjectName("currentLanguage")
        self.hotkey = hotkey
        self.english_note = QLabel()
        self.english_note.setWordWrap(True)
        self.english_note.setObjectName("englishOnlyNote")
        self.help = QLabel("Tick the languages you speak. Auto-detect then chooses among them "
                           "only, so a short phrase is not taken for a language you never use. "
                           "None ticked: any of Whisper's languages.")
        self.help.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Language now", self.current_box)
        form.addRow("Hotkey to switch to the next language", self.hotkey)
        layout = QVBoxLayout(self)
        layout.addWidget(self.english_note)
        layout.addWidget(self.help)
        layout.addWidget(self.filter)
        layout.addWidget(self.list, 1)
        layout.addLayout(form)
        self._fill_current(current)
        self.set_english_only(english_only)

    def spoken(self) -> tuple[str, ...]:
        return tuple(str(self.list.item(i).data(Qt.ItemDataRole.UserRole))
                     for i in range(self.list.count())
                     if self.list.item(i).checkState() == Qt.CheckState.Checked)

    def tick(self, code: str, on: bool = True) -> None:
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(Qt.ItemDataRole.UserRole) == code:
                item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
                return
        raise ValueError(f"unknown language {code!r}")

    def current(self) -> str:
        return str(self.current_box.currentData() or "")

    def set_current(self, code: str) -> None:
        index = self.current_box.findData(code)
        if index < 0:
            raise ValueError(f"{code!r} is not one of the languages ticked")
        self.current_box.setCurrentIndex(index)

    def _fill_current(self, current: str) -> None:
        spoken = self.spoken()
        self.current_box.clear()
        self.current_box.addItem("Auto-detect" + (f" among {len(spoken)}" if spoken else ""), "")
        for code in spoken or tuple(self._names):
            self.current_box.addItem(self._names[code], code)
        index = self.current_box.findData(current)
        self.current_box.setCurrentIndex(max(index, 0))

    def set_english_only(self, english_only: bool, model: str = "") -> None:
        """An English-only model: the list is greyed out and the page says why."""
        for widget in (self.list, self.filter, self.current_box, self.hotkey):
            widget.setEnabled(not english_only)
        self.english_note.setVisible(english_only)
        self.english_note.setText(
            f"{model or 'This model'} is English-only: it transcribes English whatever is "
            "ticked here. Choose a multilingual model (without “.en”) on the Models page to use "
            "other languages.")

    def _filter(self, text: str) -> None:
        for i in range(self.list.count()):
            item = self.list.item(i)
            item.setHidden(text.lower() not in item.text().lower())

    def values(self) -> dict[str, FieldValue]:
        return {"languages": ", ".join(self.spoken()), "language": self.current(),
                "language_hotkey": self.hotkey.hotkey()}
