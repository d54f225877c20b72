"""The main window's dialogs: open a file to transcribe, save as (TXT/SRT/VTT/JSON), history
(search every past session in the autosave journal, copy from it or reopen one) and settings (API key to the OS keyring)."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from app.controller import Controller
from app.file_import import MEDIA_SUFFIXES, source_name
from app.polish import ConnectionTest, key_account
from app.session import save_export
from app.settings import (
    BACKENDS,
    DEVICES,
    HOTKEY_MODES,
    INJECT_MODES,
    LISTEN_MODES,
    PASTE_KEYS,
    TEXT_STYLES,
    Settings,
)
from engine.events import FinalText
from engine.polish.guard import PRESET_NAMES
from engine.remote.secrets import KeyringUnavailableError, keyring_status, store_api_key
from engine.types import seconds_to_samples
from ui.caption_export_dialog import CaptionExportDialog
from ui.history_dialog import HistoryDialog
from ui.settings_dialog import FieldValues, SettingsChoices, SettingsDialog, SetupServices

log = logging.getLogger(__name__)

SETTINGS_CHOICES = SettingsChoices(
    backends=BACKENDS, devices=DEVICES, listen_modes=LISTEN_MODES, hotkey_modes=HOTKEY_MODES,
    inject_modes=INJECT_MODES, paste_keys=PASTE_KEYS, text_styles=TEXT_STYLES,
    polish_presets=PRESET_NAMES)

FILTERS = {"txt": "Text (*.txt)", "srt": "SubRip subtitles (*.srt)",
           "vtt": "WebVTT subtitles (*.vtt)", "json": "JSON with word timings (*.json)"}


def settings_dialog(settings: Settings, keyring: str, parent: QWidget | None = None,
                    setup: SetupServices | None = None,
                    desktop: str = "") -> SettingsDialog[Settings]:
    """The settings dialog on these settings; Settings' own checks validate the edit."""
    from app.setup_services import setup_services

    def apply(values: FieldValues) -> Settings:
        changes: dict[str, Any] = dict(values)  # Settings.__post_init__ checks each value
        return replace(settings, **changes)

    choices = replace(SETTINGS_CHOICES, playing_apps=tuple(app_names()))
    dialog = SettingsDialog(settings, choices, apply, keyring,
                            setup or setup_services(), parent, desktop)
    tester = ConnectionTest(dialog)  # "Test connection" on the AI polish page, off the GUI thread
    page = dialog.polish_page
    page.test_requested.connect(lambda url, model, key: tester.run(url, model, key or None))
    tester.done.connect(page.show_test_result)
    return dialog


def app_names() -> list[str]:
    """The apps playing sound now ([] when the sound server can't be asked)."""
    from engine.audio.outputs import playing_apps
    from engine.errors import EngineError

    try:
        return [app.name for app in playing_apps()]
    except EngineError as exc:
        log.info("no list of playing apps: %s", exc)
        return []


def journal_sessions(raw_texts: dict[Path, list[str | None]] | None = None
                     ) -> list[tuple[str, Path, str]]:
    """(label, path, text) of each journal session, newest first. A damaged file costs only its
    damaged lines (the label says how many were skipped); one that cannot be read at all is left
    out with a warning in the log, and the other sessions are still listed. An AI-polished
    utterance's line is the polished text; ``raw_texts`` (when given) gets each session's raw
    texts, line by line (None where the line was not polished)."""
    from engine.core.captions import merge_lines
    from engine.journal import (
        caption_lines,
        is_caption_session,
        list_sessions,
        read_journal_report,
    )

    sessions = []
    for path in list_sessions():
        try:
            report = read_journal_report(path)
        except OSError as exc:
            log.warning("cannot read journal %s: %s", path, exc)
            continue
        entries = report.entries
        if not entries:
            continue
        captions = is_caption_session(path)
        if captions:  # one line per sentence: its pieces committed early joined (merge_lines)
            merged = merge_lines(caption_lines(entries))
            text = "\n".join(line.labelled().replace("\n", " ") for line in merged)
        else:
            text = "\n".join((f"{e.source}: " if e.source else "")
                             + (e.polished or e.text).strip().replace("\n", " ")
                             for e in entries)
        if raw_texts is not None:
            raw_texts[path] = ([None] * len(merged) if captions
                               else [e.raw if e.polished else None for e in entries])
        when = entries[0].written_at[:16].replace("T", " ")
        words = sum(len(e.text.split()) for e in entries)
        source = source_name(path.stem)  # imported files are named after the file
        kind = "Captions · " if captions else ""
        label = f"{kind}{when} UTC · {words} words" + (f" · {source}" if source else "")
        if report.skipped:
            label += f" · {report.skipped} damaged line{'s' if report.skipped > 1 else ''} skipped"
        sessions.append((label, path, text))
    return sessions


def journal_finals(path: Path) -> list[tuple[FinalText, tuple[str, ...]]]:
    """Each journalled utterance with the hallucination flags it was saved with."""
    from engine.journal import read_journal

    return [(FinalText(utterance_id=e.utterance_id, text=e.text, words=e.words,
                       start=seconds_to_samples(e.start_s), end=seconds_to_samples(e.end_s),
                       latency_ms=0.0, language=e.language), e.flags)
            for e in read_journal(path)]


class DialogActions(QObject):
    """A child of the controller, so it lives as long as the controller does: the signals
    connected to its methods would not keep a plain object alive, and gui_main does not keep
    a reference (Save as, History, Settings once did nothing in the app for this reason)."""

    def __init__(self, controller: Controller) -> None:
        super().__init__(controller)
        self.controller = controller
        self.window = controller.window

    def connect_window(self) -> None:
        self.window.open_file_requested.connect(self.open_file)
        self.window.export_requested.connect(self.save_as)
        self.window.history_requested.connect(self.show_history)
        self.window.settings_requested.connect(self.show_settings)

    def open_file(self) -> None:
        """Pick an audio/video file and import it (app.import_flow says what happens then)."""
        media = " ".join(f"*.{suffix}" for suffix in MEDIA_SUFFIXES)
        path_text, _ = QFileDialog.getOpenFileName(
            self.window, "Transcribe a file", "",
            f"Audio and video ({media});;All files (*)")
        if path_text:
            self.controller.imports.open_file(Path(path_text))

    def save_as(self, fmt: str) -> None:
        stem = Path(self.controller.session.source or "transcript").stem
        path_text, _ = QFileDialog.getSaveFileName(
            self.window, f"Save transcript as {fmt.upper()}", f"{stem}.{fmt}", FILTERS[fmt])
        if not path_text:
            return
        try:
            path = save_export(self.controller.session.transcript(), fmt, Path(path_text))
        except Exception as exc:  # noqa: BLE001 - any write failure is shown to the user
            QMessageBox.warning(self.window, "Save failed", str(exc))
            return
        self.window.show_message(f"Saved {path}", 5000)

    def show_history(self) -> None:
        try:
            raw_texts: dict[Path, list[str | None]] = {}
            sessions = journal_sessions(raw_texts)
        except (ImportError, OSError) as exc:
            QMessageBox.warning(self.window, "History unavailable", str(exc))
            return
        dialog = HistoryDialog(sessions, self.window, raw_texts)
        dialog.reinsert_requested.connect(self.reinsert)
        dialog.reopen_requested.connect(self.reopen)
        dialog.export_requested.connect(lambda path: self.export_session(path, dialog))
        dialog.copied.connect(lambda text: self.window.show_message(
            f"Copied {len(text.split())} words from the history", 3000))
        dialog.exec()

    def export_session(self, path: Path, parent: QWidget) -> None:
        """History > Export…: a session (or a time range of it) with or without labels and
        timestamps, in the format chosen."""
        from app.commands.export import export_session
        from engine.atomic import atomic_write_text
        from engine.journal import read_journal

        try:
            entries = read_journal(path)
        except OSError as exc:
            QMessageBox.warning(parent, "Session unavailable", str(exc))
            return
        options = CaptionExportDialog(max((e.end_s for e in entries), default=0.0), parent)
        if not options.exec():
            return
        choice = options.choice()
        target, _ = QFileDialog.getSaveFileName(
            parent, f"Export session as {choice.fmt.upper()}", f"{path.stem}.{choice.fmt}",
            FILTERS[choice.fmt])
        if not target:
            return
        try:
            atomic_write_text(target, export_session(
                path, choice.fmt, labels=choice.labels, timestamps=choice.timestamps,
                start=choice.start, end=choice.end))
        except Exception as exc:  # noqa: BLE001 - any read or write failure is shown
            QMessageBox.warning(parent, "Export failed", str(exc))
            return
        self.window.show_message(f"Saved {target}", 5000)

    def reinsert(self, text: str) -> None:
        """A past text (polished or raw) becomes what paste-last inserts next."""
        self.controller.dictation.last_text = text
        chord = self.controller.settings.paste_last_hotkey or "the tray's Paste last text"
        self.window.show_message(f"Press {chord} in the application to insert it", 10000)

    def reopen(self, path: Path) -> None:
        """Show a past session in the main window, where it can be copied and exported."""
        try:
            finals = journal_finals(path)
        except OSError as exc:  # removed or unreadable since the list was made
            QMessageBox.warning(self.window, "Session unavailable", str(exc))
            return
        session = self.controller.session
        session.clear()
        session.source = source_name(path.stem)  # an imported file: "Save as" offers its name
        self.window.transcript.clear_transcript()
        for final, flags in finals:
            session.add(final, flags)
            self.window.transcript.add_final(final.start, final.text, flags)
        self.window.show_message(f"Reopened {path.name} ({len(finals)} utterances)", 5000)

    def show_settings(self) -> None:
        routes = self.controller.desktop
        status = "\n".join([f"Hotkey: {routes.status_lines()[0]}",
                            f"Text insertion: {routes.status_lines()[1]}", *routes.advice()])
        dialog = settings_dialog(self.controller.settings, keyring_status(), self.window,
                                 desktop=status)
        if not dialog.exec() or dialog.result_settings() is None:
            return
        new = dialog.result_settings()
        assert new is not None
        key = dialog.new_api_key()
        if key:
            try:
                store_api_key(new.remote_url, key)
            except KeyringUnavailableError as exc:
                QMessageBox.warning(self.window, "API key not saved", str(exc))
        llm_key = dialog.polish_page.new_api_key()
        if llm_key:
            try:
                store_api_key(key_account(new.polish_url), llm_key)
            except KeyringUnavailableError as exc:
                QMessageBox.warning(self.window, "LLM API key not saved", str(exc))
        self.controller.apply_settings(new)
        self.window.show_message("Settings saved", 3000)
