"""A headless sway for a test module, this process as its client, and a native Wayland Qt
field with the keyboard focus (the Wayland insertion tests)."""

from __future__ import annotations

import os
import queue
from pathlib import Path

import pytest

from app.wayland_inject import Insertion, WaylandInserter
from support.desktop_driver import TARGET_TITLE, LoggedProcess, start_target
from support.wayland_driver import SwaySession, missing_prerequisite


@pytest.fixture(scope="module")
def sway():  # type: ignore[no-untyped-def]
    reason = missing_prerequisite()
    if reason:
        pytest.skip(reason)
    session = SwaySession()
    yield session
    session.stop()


@pytest.fixture
def client_env(sway: SwaySession, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This process and its children as Wayland clients of the test's sway."""
    env = sway.env(dict(os.environ))
    for key in ("DISPLAY",):
        monkeypatch.delenv(key, raising=False)
    for key in ("WAYLAND_DISPLAY", "SWAYSOCK", "XDG_SESSION_TYPE", "XDG_CURRENT_DESKTOP"):
        monkeypatch.setenv(key, env[key])
    return env


@pytest.fixture
def field(sway: SwaySession, client_env: dict[str, str], tmp_path: Path):  # type: ignore[no-untyped-def]
    """A native Wayland Qt text field with the keyboard focus; yields (process, its text file)."""
    out = tmp_path / "field.txt"
    target = start_target(client_env, out)
    try:
        sway.focus(TARGET_TITLE)
        yield target, out
    finally:
        target.stop()


def wait_for_length(target: LoggedProcess, length: int, timeout: float = 30) -> None:
    """Until the field holds at least `length` characters (the target prints each change)."""
    for line in list(target.log):
        if line.startswith("text ") and int(line.split()[-1]) >= length:
            return
    while True:
        line = target.next_matching("text ", timeout)[1]
        if int(line.split()[-1]) >= length:
            return


def insert(inserter: WaylandInserter, text: str, mode: str) -> tuple[bool, str]:
    answers: queue.Queue[tuple[bool, str]] = queue.Queue()
    inserter.submit(Insertion(text, 0, mode, "ctrl+v", lambda ok, msg: answers.put((ok, msg))))
    return answers.get(timeout=60)
