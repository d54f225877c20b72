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

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ui.caption_settings import CaptionSettings, CaptionsPage
from ui.hotkey_edit import HotkeyEdit
from ui.polish_page import PolishPage, PolishSettings
from ui.settings_languages import LanguagesPage
from ui.settings_microphone import MicrophonePage, MicrophoneService
from ui.settings_pages import DictationPage, DictationSettings, FieldValue, TextPage, VocabularyPage
from ui.settings_setup import ModelService, ModelsPage


class ShownSettings(DictationSettings, CaptionSettings, PolishSettings, Protocol):
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
    def allow_ydotool(self) -> bool: ...
    @property
    def input_device(self) -> str: ...
    @property
    def model_dirs(self) -> str: ...

    @property
    def compute_type(self) -> str: ...
    @property
    def languages(self) -> str: ...
    @property
    def language_hotkey(self) -> str: ...


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
    playing_apps: tuple[str, ...] = ()  # offered on the Captions page
    polish_presets: tuple[str, ...] = ("clean",)


@dataclass(frozen=True)
class SetupServices:
    """What the Microphone, Models and Languages pages need from the app.

    ``languages``: Whisper's codes and names; ``english_only(model)``: whether a model knows
    English only; ``check_hotkey(hotkey, others)``: why a hotkey cannot be used (None: it can),
    ``others`` naming the other hotkeys in use by what they do."""

    microphones: MicrophoneService
    models: ModelService
    languages: dict[str, str]
    english_only: Callable[[str], bool]
    check_hotkey: Callable[[str, dict[str, str]], str | None]


S = TypeVar("S", bound=ShownSettings)
FieldValues: TypeAlias = dict[str, FieldValue]  # field name -> edited value


class SettingsDialog(QDialog, Generic[S]):
    def __init__(self, settings: S, choices: SettingsChoices, apply: Callable[[FieldValues], S],
                 keyring_status: str, setup: SetupServices,
                 parent: QWidget | None = None, desktop_status: str = "") -> None:
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
        self.device = self._combo(choices.devices, settings.device)
        self.listen_mode = self._combo(choices.listen_modes, settings.listen_mode)
        self._check_hotkey = setup.check_hotkey
        self.hotkey = HotkeyEdit(settings.hotkey, check=lambda h: self._hotkey_problem(h, "hotkey"))
        self.hotkey_mode = self._combo(choices.hotkey_modes, settings.hotkey_mode)
        self.inject_mode = self._combo(choices.inject_modes, settings.inject_mode)
        self.paste_keys = self._combo(choices.paste_keys, settings.paste_keys)
        rows = (("Backend", self.backend), ("Server URL", self.remote_url),
                ("API key", self.api_key), ("Device", self.device),
                ("Listening", self.listen_mode),
                ("Push-to-talk hotkey", self.hotkey), ("Hotkey mode", self.hotkey_mode),
                ("Insert text by", self.inject_mode), ("Paste keys", self.paste_keys))
        for label, widget in rows:
            form.addRow(label, widget)
        self.allow_ydotool = QCheckBox("Wayland: allow ydotool when nothing else can send keys "
                                       "(from the next start)")
        self.allow_ydotool.setChecked(settings.allow_ydotool)
        form.addRow(self.allow_ydotool)
        self.keyring_label = QLabel(keyring_status)
        self.keyring_label.setWordWrap(True)
        form.addRow(self.keyring_label)
        # Which hotkey and insertion routes this desktop uses and why (app.routes), and the
        # compositor lines to paste where the hotkey is the compositor's job.
        self.desktop_label = QLabel(desktop_status)
        self.desktop_label.setObjectName("desktopStatus")
        self.desktop_label.setWordWrap(True)
        self.desktop_label.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse)
        form.addRow(self.desktop_label)
        self.applies_label = QLabel(
            "Everything applies when you press Save, without restarting Sottovoce. Backend, "
            "server, device and listening mode rebuild the engine (the model reloads in a few "
            "seconds; dictation waits for it); microphone, language and vocabulary switch "
            "without a reload.")
        self.applies_label.setWordWrap(True)
        self.applies_label.setObjectName("appliesNote")
        form.addRow(self.applies_label)
        self.text_page = TextPage(settings, choices.text_styles)
        self.vocabulary_page = VocabularyPage(settings)
        self.dictation_page = DictationPage(settings)
        self.dictation_page.paste_last_hotkey.set_check(
            lambda h: self._hotkey_problem(h, "paste-last"))
        self.microphone_page = MicrophonePage(settings.input_device, setup.microphones)
        self.models_page = ModelsPage(settings.model, settings.model_dirs, setup.models,
                                      compute_type=settings.compute_type)
        self.languages_page = LanguagesPage(
            setup.languages, _codes(settings.languages), settings.language,
            HotkeyEdit(settings.language_hotkey, allow_empty=True,
                       check=lambda h: self._hotkey_problem(h, "language")),
            setup.english_only(settings.model))
        self.languages_page.set_english_only(setup.english_only(settings.model), settings.model)
        self.models_page.model_chosen.connect(
            lambda name: self.languages_page.set_english_only(setup.english_only(name), name))
        for edit in (self.hotkey, self.dictation_page.paste_last_hotkey,
                     self.languages_page.hotkey):
            edit.refused.connect(self.error_label_text)
        self.polish_page = PolishPage(settings, choices.polish_presets)
        self.tabs.addTab(general, "General")
        self.tabs.addTab(self.microphone_page, "Microphone")
        self.tabs.addTab(self.models_page, "Models")
        self.tabs.addTab(self.languages_page, "Languages")
        self.tabs.addTab(self.text_page, "Text")
        self.tabs.addTab(self.vocabulary_page, "Vocabulary")
        self.tabs.addTab(self.dictation_page, "Dictation")
        self.captions_page = CaptionsPage(settings, list(choices.playing_apps))
        self.tabs.addTab(self.captions_page, "Captions")
        self.tabs.addTab(self.polish_page, "AI polish")
        self.error_label = QLabel()
        self.error_label.setObjectName("settingsError")
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

    def error_label_text(self, text: str) -> None:
        self.error_label.setText(text)

    def _hotkey_problem(self, hotkey: str, role: str) -> str | None:
        """Why ``hotkey`` cannot be the ``role`` hotkey: the app's check, against the others."""
        others = {"push-to-talk": self.hotkey.hotkey(),
                  "paste-last": self.dictation_page.paste_last_hotkey.hotkey(),
                  "language": self.languages_page.hotkey.hotkey()
                  if hasattr(self, "languages_page") else ""}
        others.pop({"hotkey": "push-to-talk"}.get(role, role))
        return self._check_hotkey(hotkey, others)

    @staticmethod
    def _combo(items: tuple[str, ...], current: str) -> QComboBox:
        box = QComboBox()
        box.addItems(list(items))
        box.setCurrentText(current)
        return box

    def edited_settings(self) -> S:
        """The settings as edited; raises ValueError (with the reason) when invalid."""
        pages = {**self.text_page.values(), **self.vocabulary_page.values(),
                 **self.dictation_page.values(), **self.microphone_page.values(),
                 **self.models_page.values(), **self.languages_page.values(),
                 **self.captions_page.values(),
                 **self.polish_page.values()}
        return self._apply(dict(
            **pages, backend=self.backend.currentText(),
            remote_url=self.remote_url.text().strip(),
            device=self.device.currentText(),
            listen_mode=self.listen_mode.currentText(), hotkey=self.hotkey.hotkey(),
            hotkey_mode=self.hotkey_mode.currentText(),
            inject_mode=self.inject_mode.currentText(), paste_keys=self.paste_keys.currentText(),
            allow_ydotool=self.allow_ydotool.isChecked()))

    def new_api_key(self) -> str | None:
        """The key typed in, or None to leave the stored one alone."""
        return self.api_key.text() or None

    def result_settings(self) -> S | None:
        return self._result

    def done(self, result: int) -> None:
        self.microphone_page.hideEvent(None)  # the level meter's stream closes with the dialog
        super().done(result)

    def accept(self) -> None:
        try:
            self._result = self.edited_settings()
        except ValueError as exc:
            self.error_label.setText(str(exc))  # stay open so the user can fix it
            return
        super().accept()


def _codes(text: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in text.split(",") if c.strip())
