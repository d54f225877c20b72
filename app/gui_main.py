"""`sottovoce` with no subcommand: the desktop app.

On a machine without a display it says so and points to `sottovoce transcribe` (exit code 2).
First run: no settings file means defaults (bundled tiny.en on the best device) and a short hint;
the settings file is created on the first save only.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

from app.stop_signals import StopSignals

log = logging.getLogger(__name__)

_signal_wakeup: list[object] = []
TRAY_PASTE_DELAY_MS = 250

NO_DISPLAY_MESSAGE = (
    "sottovoce: no display found (DISPLAY and WAYLAND_DISPLAY are unset), so the desktop app "
    "cannot start.\nTo transcribe files without a desktop, run: sottovoce transcribe FILE...\n"
    "For live text in a terminal: sottovoce listen"
)


def has_display() -> bool:
    if os.environ.get("QT_QPA_PLATFORM", "").startswith(("offscreen", "minimal", "vnc")):
        return True
    if sys.platform.startswith(("win", "darwin")):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def settings_problem_message(problems: tuple[str, ...]) -> str:
    """One status-bar line for the problems found in the settings file (each is also logged)."""
    for problem in problems:
        log.warning("settings: %s", problem)
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"Settings problem: {problems[0]}{more}; the log has each"


def run_gui(args: argparse.Namespace) -> int:
    if not has_display():
        print(NO_DISPLAY_MESSAGE, file=sys.stderr)
        return 2
    input_path = Path(args.input) if getattr(args, "input", None) else None
    if input_path is not None and not input_path.is_file():
        print(f"sottovoce: --input file not found: {input_path}", file=sys.stderr)
        return 2
    from app.desktop import qt_platform

    platform = qt_platform(os.environ)
    if platform:  # before Qt starts (app.desktop says why)
        os.environ["QT_QPA_PLATFORM"] = platform
    try:
        from PySide6.QtWidgets import QApplication
    except ImportError:
        print("sottovoce: the desktop app needs PySide6: pip install 'sottovoce[gui]'",
              file=sys.stderr)
        return 2
    from app.control import ControlError, ControlServer
    from app.controller import Controller, LaunchOptions
    from app.dialogs import DialogActions, app_names
    from app.settings import read_settings, set_aside
    from engine.atomic import OutputWriteError
    from ui.qt_compat import keep_none_alive
    from ui.tray import Tray, apply_stylesheet, load_icon

    qt_app = QApplication.instance() or QApplication(sys.argv[:1])
    keep_none_alive()  # PySide6 6.12's void calls drop references to None (ui.qt_compat)
    assert isinstance(qt_app, QApplication)
    qt_app.setApplicationName("Sottovoce")
    qt_app.setDesktopFileName("sottovoce")
    qt_app.setWindowIcon(load_icon())
    apply_stylesheet(qt_app)

    options = LaunchOptions(input_path=input_path,
                            exit_after_input=bool(getattr(args, "exit_after_input", False)),
                            model=getattr(args, "model", None))
    loaded = read_settings()
    problems = loaded.problems
    try:
        kept = set_aside(loaded)
    except OutputWriteError as exc:
        problems = (*problems, f"could not set the file aside: {exc}")
    else:
        if kept is not None:
            problems = (*problems, f"the file was kept as {kept.name}; the settings in use "
                                   "were saved in its place")
    controller = Controller(loaded.settings, options)
    signals = _quit_on_signals(controller)  # from here on a signal quits through the controller
    DialogActions(controller).connect_window()
    control = ControlServer(controller.control_command, controller)
    try:
        control.start()
    except ControlError as exc:
        if input_path is None:
            print(f"sottovoce: {exc}", file=sys.stderr)
            return 1
        # A file run (smoke test, demo) needs no remote control; let it run beside the app.
        log.warning("control socket unavailable: %s", exc)
    tray = Tray(controller, playing_apps=app_names)
    _connect_tray(tray, controller)
    tray.show()
    controller.desktop.start()  # before any window maps: sway's rules for the caption window
    controller.show()
    if problems:  # after show(): visible in the status bar, not only in a log
        controller.window.show_message(settings_problem_message(problems), 30000)
    controller.start_engine()
    controller.start_hotkey()
    try:
        code = int(qt_app.exec())
    finally:
        control.stop()
    # Quitting on a signal is the app's normal end; a second one cut the quit short.
    return 128 + signals.received[-1] if len(signals.received) >= 2 else code


def _quit_on_signals(controller: object) -> StopSignals:
    """Ctrl+C in the terminal, SIGTERM from a session manager or SIGHUP from a closed terminal
    quits like File > Quit (the utterance in flight is flushed); a second one while quitting
    stops the engines at once, keeping what was heard. Python only runs signal handlers when it
    gets control, which Qt's event loop doesn't give it, so the signal wakes the loop through a
    socket pair. The handler only schedules: run inside whatever slot was running, quit() would
    tear the app down under it."""
    import socket

    from PySide6.QtCore import QSocketNotifier, QTimer

    from app.controller import Controller

    assert isinstance(controller, Controller)
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno())
    notifier = QSocketNotifier(reader.fileno(), QSocketNotifier.Type.Read, controller)

    def on_wakeup() -> None:
        with contextlib.suppress(BlockingIOError):
            reader.recv(64)

    def on_signal(count: int) -> None:
        if count == 1:
            QTimer.singleShot(0, controller.quit)
        elif count == 2:
            controller.abort_engines()

    notifier.activated.connect(on_wakeup)
    signals = StopSignals(on_signal).__enter__()  # for the app's life: never restored
    _signal_wakeup[:] = [reader, writer, notifier, signals]  # alive as long as the app runs
    return signals


def _connect_tray(tray: object, controller: object) -> None:
    from app.controller import Controller
    from ui.tray import Tray

    assert isinstance(tray, Tray) and isinstance(controller, Controller)
    window = controller.window
    tray.start_stop_requested.connect(
        lambda: controller.stop_engine() if controller.engine else controller.start_engine())
    tray.captions_toggled.connect(window.captions_action.setChecked)
    window.captions_toggled.connect(tray.set_captions_checked)
    settings = controller.settings
    tray.set_caption_source(settings.caption_source,
                            settings.caption_app if settings.caption_source == "app" else "")
    tray.caption_source_chosen.connect(controller.set_caption_source)
    def show_window() -> None:
        window.showNormal()
        window.raise_()

    tray.show_window_requested.connect(show_window)
    from PySide6.QtCore import QTimer

    # After the menu has closed and let go of the keyboard: the paste keys must reach the app
    # that had focus, not the closing menu.
    tray.paste_last_requested.connect(
        lambda: QTimer.singleShot(TRAY_PASTE_DELAY_MS, controller.dictation.paste_last))
    tray.quit_requested.connect(controller.quit)
    from engine.audio.devices import list_inputs
    from engine.errors import EngineError

    def offer_microphones() -> None:
        try:
            names = [d.name for d in list_inputs()]
        except EngineError:
            names = []
        tray.set_microphones(names, controller.settings.input_device)

    tray.microphones_wanted.connect(offer_microphones)
    tray.microphone_chosen.connect(controller.live.set_input_device)
    tray.language_cycle_requested.connect(controller.live.cycle_language)
    controller.language_shown.connect(tray.set_language_text)
    tray.set_language_text(controller.live.language_label(), not controller.live.english_only())
    controller.bridge.state_changed.connect(
        lambda state, _d: tray.set_running(state not in ("stopped", "failed"), controller.talking))
    controller.talking_changed.connect(
        lambda talking: tray.set_running(controller.engine is not None, talking))
