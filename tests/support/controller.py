"""The real controller with the scripted engine (tests/support/ui_fake_engine.py): the
``make_controller`` fixture builds as many as a test needs and closes them after it."""

from __future__ import annotations

import pytest


@pytest.fixture
def make_controller(qtbot, tmp_path, monkeypatch):
    from app.controller import Controller, LaunchOptions
    from app.settings import Settings, with_changes
    from support.ui_fake_engine import FakeLiveEngine

    monkeypatch.setenv("SOTTOVOCE_CONTROL_SOCKET", str(tmp_path / "control.sock"))
    made = []

    def make(settings: Settings | None = None, script=("hello world",), network_ms=None,
             **option_args):
        engines: list[FakeLiveEngine] = []

        def factory(config, sink):
            engines.append(FakeLiveEngine(sink, script, network_ms))
            engines[-1].config = config
            return engines[-1]

        # No cues: they are tests/test_cues.py's, and on the virtual sink each one takes ~2 s
        # to play out, which every controller's shutdown would wait for.
        settings = with_changes(settings or with_changes(Settings(), inject_mode="off"),
                                sounds=False)
        controller = Controller(settings, LaunchOptions(enable_hotkey=False, **option_args),
                                engine_factory=factory)
        qtbot.addWidget(controller.window)
        qtbot.addWidget(controller.captions)
        made.append(controller)
        return controller, engines

    yield make
    for controller in made:
        controller.captions.close()
        controller.window.quit_on_close = False
        controller.window.close()


def focused_field(qtbot, widget_type):
    from PySide6.QtWidgets import QApplication

    target = widget_type()
    qtbot.addWidget(target)
    target.show()
    qtbot.waitExposed(target)
    target.activateWindow()
    target.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is target)
    return target
