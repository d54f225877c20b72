"""Checked insertion on headless sway: native Wayland Qt and GTK fields read back through the real
accessibility bus, text sent with wtype (app.wayland_inject). A wtype that exits 0 and does
nothing (a shim first on PATH) is caught: nothing arrived, so the text is left on the clipboard
and the user told; a password field gets nothing. Exact field contents are asserted.

Needs what tests/test_e2e_wayland.py needs plus the accessibility bus and /usr/bin/python3 with
Gtk 3 (see tests/test_verified_insert.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.a11y_targets import GTK_APP, SYSTEM_PYTHON, TEXT, Target, wait_on_the_bus
from support.a11y_targets import missing_prerequisite as missing_a11y
from support.desktop_driver import TARGET_APP, LoggedProcess
from support.wayland_driver import SwaySession
from support.wayland_driver import missing_prerequisite as missing_sway

from app.verify import WAIT_S, Verifier
from app.wayland_inject import WaylandInserter, WlClipboard, Wtype

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def sway() -> Iterator[SwaySession]:
    if (why := missing_sway() or missing_a11y()) is not None:
        pytest.skip(why)
    session = SwaySession()
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def target(sway: SwaySession, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    """start(toolkit, *flags): a native Wayland field with sway's keyboard focus."""
    env = sway.env(dict(os.environ))
    monkeypatch.delenv("DISPLAY", raising=False)
    for key in ("WAYLAND_DISPLAY", "SWAYSOCK", "XDG_SESSION_TYPE", "XDG_CURRENT_DESKTOP"):
        monkeypatch.setenv(key, env[key])
    env.update(QT_LINUX_ACCESSIBILITY_ALWAYS_ON="1", GDK_BACKEND="wayland")
    # A virtual keyboard for the whole test: without one the seat has no keyboard, so no
    # window is told it is active and no field reports focus (wtype's own come and go).
    keyboard = subprocess.Popen([shutil.which("wtype") or "wtype", "-s", "600000"], env=env)
    started: list[Target] = []

    def start(toolkit: str, *flags: str) -> Target:
        title = f"wverify-{toolkit}-{os.getpid()}"
        out = tmp_path / f"{title}.txt"
        script, python = (TARGET_APP, sys.executable) if toolkit == "qt" else (GTK_APP,
                                                                               SYSTEM_PYTHON)
        process = LoggedProcess([python, str(script), str(out), "--title", title, *flags], env,
                                read_stdout=True)
        started.append(Target(process, out, title))
        process.wait_for("ready", 60)
        sway.focus(title)
        wait_on_the_bus(title)
        return started[-1]

    yield start
    for each in started:
        each.process.stop()
    keyboard.kill()
    keyboard.wait(10)


def insert(qtbot, mode: str, text: str = TEXT, wait_s: float = WAIT_S):  # type: ignore[no-untyped-def]
    """`text` through a checked injector on sway; `wait_s` (the product's by default) is how
    long the check waits on a field that does not change."""
    from app.checked_inject import CheckedInjector
    from app.inject import TextInjector

    inserter = WaylandInserter([Wtype()], WlClipboard())
    inserter.start()
    injector = CheckedInjector(TextInjector(mode), Verifier(wait_s=wait_s))
    injector.use_wayland(inserter)
    try:
        started = time.monotonic()
        with qtbot.waitSignal(injector.finished, timeout=60000) as done:
            injector.insert(text, 0)
        print(f"sway {mode}: {done.args[1]!r} after {(time.monotonic() - started) * 1000:.0f} ms")
        return tuple(done.args)
    finally:
        injector.close()
        inserter.stop()


@pytest.mark.parametrize("toolkit", ["qt", "gtk"])
@pytest.mark.parametrize("mode", ["paste", "type"])
def test_text_is_seen_in_a_wayland_field(qtbot, target, toolkit, mode) -> None:  # type: ignore[no-untyped-def]
    field = target(toolkit)
    ok, message = insert(qtbot, mode)
    assert ok and message.endswith("(Wayland, wtype) · verified"), message
    assert field.text() == TEXT


def test_a_wtype_that_does_nothing_is_caught(qtbot, target, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    field = target("qt")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "wtype").write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    (shim / "wtype").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    started = time.monotonic()
    # Nothing ever arrives, so any wait gives this outcome; a short one saves each route 2 s.
    ok, message = insert(qtbot, "type", wait_s=0.25)
    assert not ok and message.startswith("Not inserted: press Ctrl+V"), message
    assert WlClipboard().text() == TEXT.strip()
    assert field.text() == ""
    print(f"caught after {time.monotonic() - started:.2f} s")  # the wait bound, twice


@pytest.mark.parametrize("toolkit", ["qt", "gtk"])
def test_a_wayland_password_field_gets_nothing(qtbot, target, toolkit) -> None:  # type: ignore[no-untyped-def]
    field = target(toolkit, "--password")
    ok, message = insert(qtbot, "type")
    assert not ok and "password" in message, message
    assert field.text() == ""
