"""Caption sessions in History and their export (the dialog and `sottovoce export`), the tray's
"Captions listen to" menu, the Captions settings page, and the control socket's scroll keys."""

from __future__ import annotations

import json
from pathlib import Path

from engine.events import FinalText
from engine.journal import Journal, caption_session_id, journal_dir
from engine.types import SAMPLE_RATE


def saved_session() -> Path:
    """A caption session of two sources with a translation, in the user's journal."""
    journal = Journal(caption_session_id())
    for n, (source, text, start, end, lang) in enumerate((
            ("Them", "Bonjour à tous.", 1.0, 2.0, "fr"), ("You", "Hello!", 2.5, 3.0, "en"),
            ("Them", "On commence.", 4.0, 5.0, "fr")), 1):
        journal.append(FinalText(n, text, (), int(start * SAMPLE_RATE), int(end * SAMPLE_RATE),
                                 0.0, language=lang, source=source))
        if lang == "fr":
            journal.append_translation(n, source, {1: "Hello everyone.", 3: "Let's start."}[n])
    journal.close()
    return journal.path


def test_export_command_every_option(capsys, tmp_path):
    from app.cli import main

    path = saved_session()
    assert main(["export", "last"]) == 0
    assert capsys.readouterr().out == (
        "[00:00:01] Them: Bonjour à tous.\n    Hello everyone.\n"
        "[00:00:02] You: Hello!\n"
        "[00:00:04] Them: On commence.\n    Let's start.\n")
    assert main(["export", path.stem, "--no-labels", "--no-timestamps", "--no-translations",
                 "--from", "2.2", "--to", "3.5"]) == 0
    assert capsys.readouterr().out == "Hello!\n"
    out = tmp_path / "s.json"
    assert main(["export", str(path), "--format", "json", "-o", str(out)]) == 0
    assert [line["source"] for line in json.loads(out.read_text())["lines"]] == [
        "Them", "You", "Them"]
    assert main(["export", str(path), "--format", "srt"]) == 0
    assert "00:00:01,000 --> 00:00:02,000\nThem: Bonjour à tous. / Hello everyone.\n" in (
        capsys.readouterr().out)
    assert main(["export", "no-such-session"]) == 1
    assert "no session 'no-such-session'" in capsys.readouterr().err
    assert main(["export", "last", "--from", "5", "--to", "1"]) == 2


def test_history_lists_caption_sessions_and_exports_a_range(qtbot, monkeypatch, tmp_path):
    from PySide6.QtWidgets import QDialog, QFileDialog

    from app.dialogs import journal_sessions
    from ui.caption_export_dialog import CaptionExportDialog
    from ui.history_dialog import HistoryDialog

    path = saved_session()
    Journal("20261201-090000-000000", journal_dir()).append(
        FinalText(1, "Dictated text.", (), 0, SAMPLE_RATE, 0.0))
    sessions = journal_sessions()
    assert [label.startswith("Captions · ") for label, _, _ in sessions] == [True, False]
    assert sessions[0][2].splitlines() == ["Them: Bonjour à tous.", "You: Hello!",
                                           "Them: On commence."]
    dialog = HistoryDialog(sessions)
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.export_requested) as asked:
        dialog.export_button.click()
    assert asked.args == [path]

    options = CaptionExportDialog(5.0)
    qtbot.addWidget(options)
    options.format.setCurrentText("VTT")
    options.labels.setChecked(False)
    options.start.setValue(3.5)
    choice = options.choice()
    assert (choice.fmt, choice.labels, choice.timestamps, choice.start, choice.end) == (
        "vtt", False, True, 3.5, None)

    from app.controller import Controller
    from app.dialogs import DialogActions
    from app.settings import Settings

    controller = Controller(Settings())
    qtbot.addWidget(controller.window)
    qtbot.addWidget(controller.captions)
    target = tmp_path / "out.vtt"
    monkeypatch.setattr(CaptionExportDialog, "exec", lambda self: QDialog.DialogCode.Accepted)
    monkeypatch.setattr(CaptionExportDialog, "choice", lambda self: choice)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    DialogActions(controller).export_session(path, controller.window)
    assert target.read_text() == ("WEBVTT\n\n00:00:04.000 --> 00:00:05.000\n"
                                  "On commence. / Let's start.\n")


def test_tray_offers_the_sources_and_the_apps_playing(qtbot):
    from ui.tray import Tray

    tray = Tray(playing_apps=lambda: ["Firefox", "mpv"])
    tray.set_caption_source("system")
    tray.fill_source_menu()
    names = [a.text() for a in tray.source_menu.actions()]
    assert names == ["Microphone", "What the computer plays", "App: Firefox", "App: mpv",
                     "You and them (microphone + computer)"]
    assert [a.text() for a in tray.source_menu.actions() if a.isChecked()] == [
        "What the computer plays"]
    with qtbot.waitSignal(tray.caption_source_chosen) as chosen:
        tray.source_menu.actions()[3].trigger()
    assert chosen.args == ["app", "mpv"]
    Tray(playing_apps=list).fill_source_menu()  # nothing playing: still a menu


def test_captions_settings_page_and_scroll_keys(qtbot):
    from app.controller import Controller
    from app.dialogs import settings_dialog
    from app.settings import Settings

    dialog = settings_dialog(Settings(), "keyring: test")
    qtbot.addWidget(dialog)
    page = dialog.captions_page
    page.source.setCurrentIndex(page.source.findData("both"))
    page.them.setText("Alice")
    page.translate.setCurrentIndex(page.translate.findData("below"))
    page.background.setCurrentIndex(page.background.findData("outline"))
    page.dock.setCurrentIndex(page.dock.findData("top"))
    page.lines.setValue(5)
    page.click_through.setChecked(True)
    edited = dialog.edited_settings()
    assert (edited.caption_source, edited.caption_them, edited.caption_translate,
            edited.caption_background, edited.caption_dock, edited.caption_lines,
            edited.caption_click_through, edited.caption_font_family) == (
        "both", "Alice", "below", "outline", "top", 5, True, "")
    page.source.setCurrentIndex(page.source.findData("app"))
    page.app.setCurrentText("")
    try:
        dialog.edited_settings()
        raise AssertionError("an app source without an app was accepted")
    except ValueError as exc:
        assert "caption_app" in str(exc)

    controller = Controller(edited)
    qtbot.addWidget(controller.window)
    qtbot.addWidget(controller.captions)
    assert controller.captions.style_.dock == "top" and controller.captions.style_.languages
    for n in range(8):
        controller.captions.add_final(f"Line {n}.")
    assert controller.control_command("captions older") == "ok captions 1 back"
    assert controller.captions.visible_lines()[-1] == "Line 6."
    assert controller.control_command("captions live") == "ok captions 0 back"
