"""The settings dialog's dictation pages: Text (style, replacements, spoken commands),
Vocabulary, and Dictation (paste-last hotkey, sounds, hands-free auto-stop, per-app profiles).

Each page shows a few settings fields and returns the edited values from `values()`; the
dialog merges them into one edit that Settings validates. The list-like settings (vocabulary,
replacement rules, app profiles) are plain text, one entry per line, so what the user edits here
is exactly what Import/Export read and write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ui.hotkey_edit import HotkeyEdit

FieldValue = str | int | float | bool


class DictationSettings(Protocol):
    """The fields these pages show (read-only)."""

    @property
    def text_style(self) -> str: ...
    @property
    def vocabulary(self) -> str: ...
    @property
    def replacements(self) -> str: ...
    @property
    def spoken_commands(self) -> bool: ...
    @property
    def paste_last_hotkey(self) -> str: ...
    @property
    def sounds(self) -> bool: ...
    @property
    def sound_volume(self) -> int: ...
    @property
    def auto_stop_s(self) -> float: ...
    @property
    def app_profiles(self) -> str: ...


class ListEditor(QWidget):
    """A plain-text list (one entry per line) with Import and Export buttons."""

    def __init__(self, text: str, hint: str, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.edit = QPlainTextEdit(text)
        self.edit.setPlaceholderText(hint)
        self.import_button = QPushButton(f"Import {name}…")
        self.export_button = QPushButton(f"Export {name}…")
        self.import_button.clicked.connect(self._import)
        self.export_button.clicked.connect(self._export)
        self.message = QLabel()
        self.message.setWordWrap(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.import_button)
        buttons.addWidget(self.export_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit)
        layout.addLayout(buttons)
        layout.addWidget(self.message)

    def text(self) -> str:
        return self.edit.toPlainText().strip("\n")

    def import_from(self, path: Path) -> None:
        """Append the lines of a text file (entries already in the list are not repeated)."""
        try:
            incoming = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.message.setText(f"Could not import {path.name}: {exc}")
            return
        lines = self.text().splitlines()
        added: list[str] = []
        for line in incoming.splitlines():
            if line.strip() and line not in lines and line not in added:
                added.append(line)
        self.edit.setPlainText("\n".join([*lines, *added]))
        self.message.setText(f"Imported {len(added)} line(s) from {path.name}")

    def export_to(self, path: Path) -> None:
        try:
            path.write_text(self.text() + "\n", encoding="utf-8")
        except OSError as exc:
            self.message.setText(f"Could not export to {path}: {exc.strerror or exc}")
            return
        self.message.setText(f"Exported to {path}")

    def _import(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, f"Import {self.name}", "",
                                              "Text (*.txt);;All files (*)")
        if name:
            self.import_from(Path(name))

    def _export(self) -> None:
        name, _ = QFileDialog.getSaveFileName(self, f"Export {self.name}", f"{self.name}.txt",
                                              "Text (*.txt)")
        if name:
            self.export_to(Path(name))


class TextPage(QWidget):
    def __init__(self, settings: DictationSettings, styles: tuple[str, ...],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.text_style = QComboBox()
        self.text_style.addItems(list(styles))
        self.text_style.setCurrentText(settings.text_style)
        self.spoken_commands = QCheckBox("Act on spoken commands (\"new line\", \"comma\", "
                                         "\"scratch that\", …)")
        self.spoken_commands.setChecked(settings.spoken_commands)
        self.replacements = ListEditor(
            settings.replacements, "one rule per line, e.g.\n"
            "gonna => going to\nK8s | kates => Kubernetes\n/colou?r/i => colour",
            "replacements")
        form = QFormLayout(self)
        form.addRow("Text style", self.text_style)
        form.addRow(self.spoken_commands)
        form.addRow(QLabel("Replacement rules (applied to every final text):"))
        form.addRow(self.replacements)

    def values(self) -> dict[str, FieldValue]:
        return {"text_style": self.text_style.currentText(),
                "spoken_commands": self.spoken_commands.isChecked(),
                "replacements": self.replacements.text()}


class VocabularyPage(QWidget):
    def __init__(self, settings: DictationSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.vocabulary = ListEditor(
            settings.vocabulary, "names and jargon, one per line, e.g.\nConcord\nKubernetes\n"
            "[medical]\ntachycardia", "vocabulary")
        layout = QVBoxLayout(self)
        note = QLabel("Words and phrases Whisper should expect. A [name] line starts a named "
                      "set that per-application profiles can switch on.")
        note.setWordWrap(True)
        layout.addWidget(note)
        layout.addWidget(self.vocabulary)

    def values(self) -> dict[str, FieldValue]:
        return {"vocabulary": self.vocabulary.text()}


class DictationPage(QWidget):
    def __init__(self, settings: DictationSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.paste_last_hotkey = HotkeyEdit(settings.paste_last_hotkey, allow_empty=True)
        self.sounds = QCheckBox("Play a short sound when recording starts and stops")
        self.sounds.setChecked(settings.sounds)
        self.sound_volume = QSpinBox()
        self.sound_volume.setRange(0, 100)
        self.sound_volume.setSuffix(" %")
        self.sound_volume.setValue(settings.sound_volume)
        self.auto_stop_s = QDoubleSpinBox()
        self.auto_stop_s.setRange(0.0, 60.0)
        self.auto_stop_s.setSingleStep(0.5)
        self.auto_stop_s.setSuffix(" s")
        self.auto_stop_s.setSpecialValueText("never")
        self.auto_stop_s.setValue(settings.auto_stop_s)
        self.app_profiles = ListEditor(
            settings.app_profiles, "one application per line (its window class), e.g.\n"
            "slack: style=chat\nxterm: insert=type, commands=off\ncode: vocabulary=work",
            "profiles")
        form = QFormLayout(self)
        form.addRow("Paste last text hotkey", self.paste_last_hotkey)
        form.addRow(self.sounds)
        form.addRow("Sound volume", self.sound_volume)
        form.addRow("Hands-free (toggle mode): stop after a silence of", self.auto_stop_s)
        form.addRow(QLabel("Per-application behaviour:"))
        form.addRow(self.app_profiles)

    def values(self) -> dict[str, FieldValue]:
        return {"paste_last_hotkey": self.paste_last_hotkey.hotkey(),
                "sounds": self.sounds.isChecked(), "sound_volume": self.sound_volume.value(),
                "auto_stop_s": round(self.auto_stop_s.value(), 2),
                "app_profiles": self.app_profiles.text()}
