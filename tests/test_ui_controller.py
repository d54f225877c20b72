"""Controller wiring with a scripted engine (tests/support/ui_fake_engine.py): engine events reach the
windows, push-to-talk drives utterances, dictated text is pasted into a real focused text field
(pynput + clipboard under Xvfb) and the user's clipboard comes back, the control socket works,
export and first-run behaviour."""

from __future__ import annotations

import json
import os
import threading

import pytest

pytestmark = pytest.mark.skipif(
    not os.environ.get("DISPLAY"),
    reason="needs an X display: run under Xvfb (source .ci/desktop.sh)")


def test_engine_events_reach_window_captions_and_meter(qtbot, make_controller):
    controller, engines = make_controller(script=("first words here", "second line"))
    controller.show()
    controller.start_engine()
    qtbot.waitUntil(lambda: controller.state == "listening")
    assert engines[0].config.mode == "ptt" and engines[0].config.model == "tiny.en"
    qtbot.waitUntil(lambda: controller.window.level.value() == 40)  # -20 dBFS, the newest
    controller.on_ptt("press")
    qtbot.waitUntil(lambda: controller.window.transcript.live_tentative == "maybe")
    assert controller.window.transcript.live_committed == "first"
    assert controller.captions.visible_lines() == ["first maybe"]
    controller.on_ptt("release")
    qtbot.waitUntil(lambda: len(controller.session.finals) == 1)
    controller.on_ptt("toggle")
    controller.on_ptt("toggle")
    qtbot.waitUntil(lambda: len(controller.session.finals) == 2)
    assert engines[0].calls == ["start", "begin", "end", "begin", "end"]
    assert controller.window.transcript.plain_text() == "first words here\nsecond line"
    assert controller.captions.visible_lines() == ["first words here", "second line"]
    summary = controller.window.latency.summary
    assert summary is not None and summary.count == 2 and summary.last_ms == 120
    assert controller.window.state_label.text() == "Listening"
    controller.stop_engine()
    qtbot.waitUntil(lambda: controller.state == "stopped")
    assert controller.window.start_button.text() == "Start"


def test_remote_metrics_show_network_and_decode(qtbot, make_controller):
    from app.settings import Settings, with_changes

    settings = with_changes(Settings(), backend="remote", remote_url="ws://127.0.0.1:9",
                            inject_mode="off")
    controller, engines = make_controller(settings, network_ms=35.0)
    controller.start_engine()
    assert engines[0].config.backend == "remote"
    qtbot.waitUntil(lambda: controller.window.model_label.text() == "remote · fake")
    controller.on_ptt("press")
    controller.on_ptt("release")
    qtbot.waitUntil(lambda: controller.window.latency.summary is not None)
    assert controller.window.latency.split_label.text() == "net 35 · decode 100 ms"


@pytest.mark.parametrize("paste_keys", ["ctrl+v", "shift+insert"])
def test_dictation_is_pasted_into_the_focused_field_and_clipboard_restored(qtbot,
                                                                           make_controller,
                                                                           paste_keys):
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication, QLineEdit

    from app.settings import Settings, with_changes

    controller, _ = make_controller(with_changes(Settings(), paste_keys=paste_keys),
                                    script=("Dictated into the field.",))
    target = QLineEdit()
    qtbot.addWidget(target)
    target.show()
    qtbot.waitExposed(target)
    target.activateWindow()
    target.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is target)
    QGuiApplication.clipboard().setText("the user's own clipboard")
    controller.start_engine()
    controller.on_ptt("press")
    controller.on_ptt("release")
    qtbot.waitUntil(lambda: target.text() == "Dictated into the field.", timeout=10000)
    # (Said once the field was checked, a moment after the text landed.)
    qtbot.waitUntil(lambda: controller.last_injection is not None, timeout=10000)
    assert controller.last_injection[0]
    # Where the time went, from the key release to the paste keys, in the meter's tooltip.
    steps = [name for name, _ in controller.window.latency.breakdown]
    assert steps[0] == "release"
    assert steps[-6:] == ["received", "dictated", "inject_start", "clipboard_set", "keys_sent",
                          "sent_not_verified"]  # (this process's field is off the a11y bus)
    assert "keys sent" in controller.window.latency.toolTip()
    assert "sent not verified" in controller.window.latency.toolTip()
    qtbot.waitUntil(
        lambda: QGuiApplication.clipboard().text() == "the user's own clipboard", timeout=5000)
    assert QApplication.focusWidget() is target  # the app never took focus


def test_copying_the_transcript_right_after_a_paste_is_not_undone(qtbot, make_controller):
    """The paste's clipboard restore comes later; whatever was copied meanwhile wins."""
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication, QLineEdit

    from app.settings import Settings

    controller, _ = make_controller(Settings(), script=("Dictated into the field.",))
    target = QLineEdit()
    qtbot.addWidget(target)
    target.show()
    qtbot.waitExposed(target)
    target.activateWindow()
    target.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is target)
    QGuiApplication.clipboard().setText("the user's own clipboard")
    controller.start_engine()
    controller.on_ptt("press")
    controller.on_ptt("release")
    qtbot.waitUntil(lambda: controller.last_injection is not None, timeout=10000)
    controller.copy_all()  # File > Copy transcript, before the restore is due
    # The delayed restore has run (an event: it clears its flag), and left the copy alone.
    qtbot.waitUntil(lambda: not controller.injector.raw._restore_pending, timeout=10000)
    assert QGuiApplication.clipboard().text() == "Dictated into the field."


def test_a_target_that_reads_the_paste_late_still_gets_the_dictation(qtbot):
    """On a busy machine the target may read the clipboard seconds after the paste keys: the
    user's clipboard comes back only once the dictation was read (it came back after a fixed
    600 ms before, and such a target pasted the user's old clipboard)."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication, QWidget

    from app.inject import TextInjector

    deaf = QWidget()  # focused, and deaf to Ctrl+V: nothing reads the clipboard but this test
    deaf.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
    qtbot.addWidget(deaf)
    deaf.show()
    qtbot.waitExposed(deaf)
    deaf.activateWindow()
    deaf.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is deaf)
    clipboard = QGuiApplication.clipboard()
    clipboard.setText("the user's own clipboard")
    injector = TextInjector("paste")
    try:
        with qtbot.waitSignal(injector.finished, timeout=10000) as done:
            injector.insert("Dictated late.", 0)
        assert done.args[0], done.args
        qtbot.wait(1500)  # the slow target, which reads now
        assert clipboard.text() == "Dictated late."
        qtbot.waitUntil(lambda: clipboard.text() == "the user's own clipboard", timeout=10000)
        assert not injector._restore_pending
    finally:
        injector.close()


def test_typing_mode_types_into_the_focused_field(qtbot, make_controller):
    from PySide6.QtWidgets import QApplication, QLineEdit

    from app.settings import Settings, with_changes

    controller, _ = make_controller(with_changes(Settings(), inject_mode="type"),
                                    script=("Typed text.",))
    target = QLineEdit()
    qtbot.addWidget(target)
    target.show()
    qtbot.waitExposed(target)
    target.activateWindow()
    target.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is target)
    controller.start_engine()
    controller.on_ptt("press")
    controller.on_ptt("release")
    qtbot.waitUntil(lambda: target.text() == "Typed text.", timeout=10000)
    # The typing thread reports after the last key; wait for it, or the report lands in the
    # next test, on this controller's deleted window.
    qtbot.waitUntil(lambda: controller.last_injection == (True, "Typed 11 characters · sent, not verified"))


def test_injection_failure_is_shown_not_hidden(qtbot, make_controller, monkeypatch):
    from app import inject

    def broken():
        raise RuntimeError("no input backend")

    monkeypatch.setattr(inject, "pynput_keyboard", broken)
    from app.settings import Settings

    controller, _ = make_controller(Settings())
    controller.start_engine()
    controller.on_ptt("press")
    controller.on_ptt("release")
    qtbot.waitUntil(lambda: controller.last_injection is not None)
    ok, message = controller.last_injection
    assert not ok and "no input backend" in message
    assert "no input backend" in controller.window.statusBar().currentMessage()


def test_control_socket_drives_push_to_talk(qtbot, make_controller):
    from app.control import ControlError, ControlServer, send_command

    controller, engines = make_controller()
    server = ControlServer(controller.control_command, controller)
    path = server.start()
    controller.start_engine()
    replies: list[str] = []

    def client(*commands):
        worker = threading.Thread(target=lambda: [replies.append(send_command(c, path))
                                                  for c in commands])
        worker.start()
        qtbot.waitUntil(lambda: not worker.is_alive(), timeout=10000)

    client("ptt press", "status", "ptt release", "toggle", "toggle", "copy")
    assert replies[0] == "ok talking=1" and replies[1].startswith("ok listening talking=1")
    assert replies[2] == "ok talking=0"
    qtbot.waitUntil(lambda: len(controller.session.finals) == 2)
    assert engines[0].calls == ["start", "begin", "end", "begin", "end"]
    with pytest.raises(ControlError, match="unknown"):
        send_command("format disk", path)
    other = ControlServer(controller.control_command, controller)
    with pytest.raises(ControlError, match="already running"):
        other.start(path)  # a second app instance must not steal the socket
    server.stop()


def test_export_copy_and_save_formats(qtbot, make_controller, tmp_path):
    from PySide6.QtGui import QGuiApplication

    from app.session import save_export

    controller, _ = make_controller(script=("One two three.", "Four five."))
    controller.start_engine()
    for _ in range(2):
        controller.on_ptt("press")
        controller.on_ptt("release")
    qtbot.waitUntil(lambda: len(controller.session.finals) == 2)
    controller.copy_all()
    assert QGuiApplication.clipboard().text() == "One two three.\nFour five."
    transcript = controller.session.transcript()
    for fmt in ("txt", "srt", "vtt", "json"):
        save_export(transcript, fmt, tmp_path / f"out.{fmt}")
    assert (tmp_path / "out.txt").read_text() == "One two three.\nFour five.\n"  # a sentence a line
    assert "-->" in (tmp_path / "out.srt").read_text()
    assert (tmp_path / "out.vtt").read_text().startswith("WEBVTT")
    data = json.loads((tmp_path / "out.json").read_text())
    assert "One two three." in json.dumps(data)


def test_first_run_shows_hint_and_saves_only_when_dismissed(qtbot, make_controller):
    from app.settings import Settings, load_settings, settings_path

    controller, _ = make_controller(Settings())
    controller.show()
    assert controller.window.hint.isVisible()
    assert "Ctrl+Alt+Space" in controller.window.hint_label.text()
    assert not settings_path().exists()
    controller.window.hint.findChildren(type(controller.window.start_button))[0].click()
    assert settings_path().exists() and not load_settings().first_run_hint


def test_dismissing_the_hint_never_destroys_a_settings_file_it_could_not_read(
        qtbot, make_controller):
    """Issue 15, item 2: the hint's save replaced a broken or newer file with defaults."""
    from app.settings import load_settings, read_settings, settings_path

    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text("version = 9\n")  # from a newer Sottovoce: left alone, the user is told
    controller, _ = make_controller(read_settings().settings)
    controller.show()
    controller.window.hint.findChildren(type(controller.window.start_button))[0].click()
    assert path.read_text() == "version = 9\n"
    assert "newer Sottovoce" in controller.window.statusBar().currentMessage()
    path.write_text("model = 5\n")  # damaged: kept as settings.toml.bad, then saved
    controller, _ = make_controller(read_settings().settings)
    controller.show()
    controller.window.hint.findChildren(type(controller.window.start_button))[0].click()
    assert (path.parent / "settings.toml.bad").read_text() == "model = 5\n"
    assert not load_settings().first_run_hint


def test_changing_the_model_restarts_the_engine_with_it(qtbot, make_controller):
    from engine.events import FinalText, StateChanged

    controller, engines = make_controller()
    controller.show()
    controller.start_engine()
    qtbot.waitUntil(lambda: controller.state == "listening")
    controller.window.model_box.setCurrentText("base")
    qtbot.waitUntil(lambda: len(engines) == 2)
    assert engines[0].calls[-1] == "stop" and engines[1].config.model == "base"
    assert controller.settings.model == "base"
    qtbot.waitUntil(lambda: controller.state == "listening")
    engines[0].sink(StateChanged("stopped"))  # the old engine finishing its flush late
    engines[0].sink(FinalText(9, "late words", (), 0, 100, 50.0))
    qtbot.waitUntil(lambda: len(controller.session.finals) == 1)
    assert controller.state == "listening"  # its lifecycle no longer drives the window


def test_input_file_runs_in_captions_mode_without_injection(qtbot, make_controller, tmp_path):
    controller, engines = make_controller(input_path=tmp_path / "x.wav")
    controller.start_engine()
    assert engines[0].config.mode == "vad" and engines[0].config.input_path == tmp_path / "x.wav"


def test_history_lists_journal_sessions_and_reopens_one(qtbot, make_controller):
    from app.dialogs import DialogActions, journal_sessions
    from engine.events import FinalText
    from engine.journal import Journal
    from engine.types import Word

    journal = Journal("20261129-101500-000000")
    journal.append(FinalText(1, "An earlier session.", (Word(" An", 0, 800),), 0, 16000, 90.0,
                             language="en"))
    journal.append(FinalText(2, "Second line.", (), 32000, 48000, 90.0))
    journal.close()
    sessions = journal_sessions()
    assert len(sessions) == 1
    label, path, text = sessions[0]
    assert "5 words" in label and text == "An earlier session.\nSecond line."
    controller, _ = make_controller()
    DialogActions(controller).reopen(path)
    assert controller.window.transcript.plain_text() == "An earlier session.\nSecond line."
    assert controller.session.transcript().segments[1].start == 32000


def test_applying_settings_restarts_the_engine_and_saves(qtbot, make_controller):
    from app.settings import Settings, load_settings, with_changes

    controller, engines = make_controller()
    controller.start_engine()
    qtbot.waitUntil(lambda: controller.state == "listening")
    new = with_changes(controller.settings, listen_mode="captions", caption_lines=3,
                       language="de", model="base")
    controller.apply_settings(new)
    assert len(engines) == 2 and engines[1].config.mode == "vad"
    assert engines[1].config.language == "de"
    assert controller.window.choice().language == "de"
    assert load_settings() == new != Settings()
    controller.apply_settings(with_changes(new, caption_font_pt=40))
    assert len(engines) == 2  # a caption font change doesn't touch the engine


def test_dropped_audio_is_shown_to_the_user(qtbot, make_controller):
    from engine.events import Metrics

    controller, engines = make_controller()
    controller.start_engine()
    engines[0].sink(Metrics(chunk_rtt_ms=90.0, decode_ms=90.0, network_ms=None, lag_ms=4000.0,
                            rtf=1.5, dropped_frames=4410))
    qtbot.waitUntil(lambda: "too busy" in controller.window.statusBar().currentMessage())
    assert controller.window.latency.lag_color == "#d0312d"  # red: far behind


def test_a_new_vocabulary_reaches_the_running_engine_without_a_restart(qtbot, make_controller):
    from app.settings import Settings, load_settings, with_changes

    settings = with_changes(Settings(), inject_mode="off", vocabulary="Concord\n[work]\nHelm")
    controller, engines = make_controller(settings)
    controller.start_engine()
    qtbot.waitUntil(lambda: controller.state == "listening")
    assert engines[0].config.vocabulary == ("Concord",)  # the default set
    new = with_changes(controller.settings, vocabulary="# names\nConcord\nAbigail Claflin\n")
    controller.apply_settings(new)
    assert len(engines) == 1 and engines[0].calls[-1] == "vocabulary: Concord, Abigail Claflin"
    assert controller.live.vocabulary_terms(("work",)) == ("Concord", "Abigail Claflin")
    assert load_settings().vocabulary == new.vocabulary
