"""Paste-last, per-application profiles, hands-free auto-stop and the cue/mute order, through the
real controller with the scripted engine (tests/support/ui_fake_engine.py): real widgets, the real
clipboard and real X key events under Xvfb, the real control socket."""

from __future__ import annotations

import shutil
import subprocess
import threading

import pytest

from engine.events import LevelChanged


@pytest.fixture
def make_controller(qtbot, tmp_path, monkeypatch):
    from support.ui_fake_engine import FakeLiveEngine

    from app.controller import Controller, LaunchOptions
    from app.settings import Settings, with_changes

    monkeypatch.setenv("SOTTOVOCE_CONTROL_SOCKET", str(tmp_path / "control.sock"))
    made = []

    def make(settings=None, script=("hello world",), engine_class=FakeLiveEngine):
        engines: list[FakeLiveEngine] = []

        def factory(config, sink):
            engines.append(engine_class(sink, script))
            engines[-1].config = config
            return engines[-1]

        settings = settings or with_changes(Settings(), inject_mode="off", sounds=False)
        controller = Controller(settings, LaunchOptions(enable_hotkey=False),
                                engine_factory=factory)
        qtbot.addWidget(controller.window)
        qtbot.addWidget(controller.captions)
        made.append(controller)
        return controller, engines

    yield make
    for controller in made:
        controller.dictation.shutdown()
        controller.stop_engine()


def _focused_field(qtbot):  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QApplication, QLineEdit

    target = QLineEdit()
    qtbot.addWidget(target)
    target.show()
    qtbot.waitExposed(target)
    target.activateWindow()
    target.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is target)
    return target


def _dictate(qtbot, controller, engines) -> None:  # type: ignore[no-untyped-def]
    before = len(controller.session.finals)
    controller.on_ptt("press")
    controller.on_ptt("release")
    qtbot.waitUntil(lambda: len(controller.session.finals) == before + 1, timeout=10000)


def test_paste_last_inserts_the_last_text_again_from_the_socket_and_the_tray(qtbot,
                                                                            make_controller):
    from app.control import ControlServer, send_command
    from app.gui_main import _connect_tray
    from app.settings import Settings, with_changes
    from ui.tray import Tray

    controller, engines = make_controller(with_changes(Settings(), sounds=False),
                                          script=("First words.", "Second words."))
    target = _focused_field(qtbot)
    assert controller.control_command("paste-last") == "error nothing dictated yet"
    controller.start_engine()
    _dictate(qtbot, controller, engines)
    _dictate(qtbot, controller, engines)
    qtbot.waitUntil(lambda: target.text() == "First words. Second words.", timeout=10000)
    server = ControlServer(controller.control_command)
    server.start()
    replies: list[str] = []
    client = threading.Thread(target=lambda: replies.append(send_command("paste-last")))
    client.start()
    qtbot.waitUntil(lambda: not client.is_alive(), timeout=10000)
    server.stop()
    assert replies == ["ok pasted 14 characters"]  # as it was inserted: " Second words."
    qtbot.waitUntil(lambda: target.text() == "First words. Second words. Second words.",
                    timeout=10000)
    tray = Tray(controller)
    _connect_tray(tray, controller)
    assert [a.text() for a in tray.icon.contextMenu().actions()] == [
        "Start", "Caption window", "Captions listen to", "Paste last text", "Microphone",
        "Language: English (English-only model)", "Show window", "Quit"]
    assert not tray.language_action.isEnabled()  # tiny.en has no other language
    tray.paste_last_action.trigger()
    qtbot.waitUntil(lambda: target.text().count("Second words.") == 3, timeout=10000)


def test_paste_last_chord_fires_once_every_key_is_up() -> None:
    from app.hotkeys import TAP, HotkeyMachine

    machine = HotkeyMachine(["ctrl", "alt", "v"], "tap")
    assert machine.key_down("ctrl") is None and machine.key_down("alt") is None
    assert machine.key_down("v") is None  # chord complete: wait for the keys to go up
    assert machine.key_down("v") is None  # auto-repeat
    assert machine.key_up("v") is None and machine.key_up("alt") is None
    assert machine.key_up("ctrl") == TAP
    assert machine.key_up("ctrl") is None and machine.key_down("v") is None


def _window_class(widget) -> tuple[str, ...]:  # type: ignore[no-untyped-def]
    out = subprocess.run(["xprop", "-id", str(int(widget.winId())), "WM_CLASS"],
                         capture_output=True, text=True, check=True, timeout=10).stdout
    return tuple(p.strip().strip('"') for p in out.split("=", 1)[1].split(","))


@pytest.mark.skipif(shutil.which("xprop") is None or shutil.which("xdotool") is None,
                    reason="needs xprop and xdotool (x11-utils, xdotool)")
def test_the_focused_apps_profile_chooses_insert_mode_and_style(qtbot, make_controller):
    from app.settings import Settings, with_changes

    settings = with_changes(Settings(), sounds=False, inject_mode="paste")
    controller, engines = make_controller(settings, script=("Sounds good.", "See you."))
    target = _focused_field(qtbot)
    subprocess.run(["xdotool", "windowfocus", "--sync", str(int(target.winId()))], check=True,
                   timeout=10)
    names = _window_class(target)
    assert controller.dictation.target().window_class == names[-1]  # read from the X server
    controller.apply_settings(with_changes(
        controller.settings, app_profiles=f"other: insert=off\n{names[-1]}: insert=type, "
                                          "style=chat, commands=off"))
    target_now = controller.dictation.target()
    assert (target_now.insert, target_now.style, target_now.commands) == ("type", "chat", False)
    controller.start_engine()
    _dictate(qtbot, controller, engines)
    qtbot.waitUntil(lambda: target.text() == "sounds good", timeout=10000)
    qtbot.waitUntil(lambda: controller.last_injection == (True, "Typed 11 characters · sent, not verified"))
    controller.apply_settings(with_changes(controller.settings,
                                           app_profiles=f"{names[0]}: insert=off"))
    _dictate(qtbot, controller, engines)  # "See you." is not inserted here
    qtbot.wait(300)
    assert target.text() == "sounds good"
    assert controller.dictation.last_text == "sounds good"


def test_without_a_window_class_the_global_settings_apply(qtbot, make_controller):
    controller, _ = make_controller()
    controller.dictation.read_window_class = lambda: None  # Wayland: can't be read
    target = controller.dictation.target()
    assert (target.window_class, target.insert, target.style, target.commands,
            target.vocabulary) == (None, "off", "sentence", True, None)


class MutingEngine:
    """The scripted engine plus the parts of LocalLiveEngine this feature calls."""

    def __new__(cls, sink, script):  # type: ignore[no-untyped-def]
        from support.ui_fake_engine import FakeLiveEngine

        class Engine(FakeLiveEngine):
            can_mute_input = True

            def mute_input(self, seconds: float, at: int | None = None) -> int:
                self.calls.append(f"mute {seconds:.2f} at {at}")
                return 777 if at is None else at

            def set_vocabulary(self, terms: tuple[str, ...]) -> None:
                self.calls.append(f"vocabulary {', '.join(terms)}")

        return Engine(sink, script)


class RecordingCues:
    """Plays nothing; a start cue "takes" 0.12 s (reported at once, as the player's thread
    would once the tone is out)."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def play(self, kind: str, volume: int, on_done=None) -> None:  # type: ignore[no-untyped-def]
        self.calls.append(f"cue {kind} {volume}")
        if on_done is not None:
            on_done(0.12)

    def wait(self, timeout: float = 0) -> None:
        pass


def test_start_cue_is_muted_before_it_plays_and_stop_cue_waits_for_the_cut(qtbot,
                                                                          make_controller):
    from app.settings import Settings, with_changes

    settings = with_changes(Settings(), sounds=True, sound_volume=55, inject_mode="off",
                            vocabulary="Sottovoce\n[work]\nKubernetes\n[home]\nMeringue",
                            app_profiles="focused: vocabulary=work")
    controller, engines = make_controller(settings, engine_class=MutingEngine)
    controller.dictation.read_window_class = lambda: ("focused", "Focused")
    controller.start_engine()
    engine = engines[0]
    controller.dictation._cues = RecordingCues(engine.calls)
    controller.on_ptt("press")
    # Muted from the press on before the tone starts; cut down to the tone's time plus the
    # input's tail (0.12 + 0.15 s) once it has played.
    assert engine.calls[1:] == ["vocabulary Sottovoce, Kubernetes", "mute 1.50 at None",
                                "cue start 55",
                                "mute 0.27 at 777", "begin"]
    del engine.calls[1:]
    controller.on_ptt("release")
    # The fake engine cuts the utterance (SpeechEnded) right after "end": the stop cue follows.
    qtbot.waitUntil(lambda: "cue stop 55" in engine.calls)
    assert engine.calls[1:] == ["end", "cue stop 55"]


def hands_free(qtbot, make_controller, script: str, inject_mode: str):
    """A toggle-mode controller on a fake clock, and ``level(db, seconds, end=-1)``: readings
    ten a second (stream position ``end``), each delivered (the bridge coalesces levels)."""
    from app.settings import Settings, with_changes

    settings = with_changes(Settings(), hotkey_mode="toggle", auto_stop_s=2.0, sounds=False,
                            inject_mode=inject_mode)
    controller, engines = make_controller(settings, script=(script,))
    now = [100.0]
    controller.dictation.clock = lambda: now[0]
    controller.start_engine()

    def level(db: float, seconds: float, end: int = -1) -> None:
        for _ in range(round(seconds * 10)):
            now[0] += 0.1
            controller.bridge.sink(LevelChanged(db, db + 6, end))
            qtbot.wait(1)

    return controller, engines, level


def test_hands_free_stops_after_the_silence_and_silence_inserts_nothing(qtbot, make_controller):
    controller, engines, level = hands_free(qtbot, make_controller, "Dictated hands-free.",
                                            "paste")
    level(-60.0, 1.0)
    assert controller.control_command("toggle") == "ok talking=1"
    level(-20.0, 2.0)  # speech
    level(-60.0, 1.5)  # a pause
    assert controller.talking
    level(-20.0, 1.0)
    level(-60.0, 2.5)
    assert not controller.talking  # stopped by itself 2 s after the speech
    assert engines[0].calls[-2:] == ["begin", "end"]
    qtbot.waitUntil(lambda: len(controller.session.finals) == 1)
    # A recording that heard nothing: its empty final inserts nothing, no empty paste.
    from engine.dictation import Insertion

    target = controller.dictation.target()
    controller.dictation.insert(Insertion(text="", shown=""), target)
    controller.dictation.insert(Insertion(text="   ", shown=""), target)
    assert controller.dictation.last_text == "Dictated hands-free."


def test_hands_free_ignores_a_late_reading_of_audio_from_before_the_press(qtbot, make_controller):
    """Level readings arrive after their audio: one from before the toggle (the last
    recording's stop cue) must not count as speech of the new, silent recording."""
    controller, engines, level = hands_free(qtbot, make_controller, "Nothing.", "off")
    engines[0].position = 480_000  # 30 s into the stream

    level(-60.0, 1.0, 470_000)
    assert controller.control_command("toggle") == "ok talking=1"
    assert controller.dictation.auto_stop.since == 480_000
    level(-20.0, 0.3, 478_400)  # the stop cue of before, delivered late
    assert not controller.dictation.auto_stop.heard_speech
    level(-60.0, 4.0, 490_000)  # silence after the press: stops 2 s + the first-word grace in
    assert not controller.talking
    assert engines[0].calls[-2:] == ["begin", "end"]
