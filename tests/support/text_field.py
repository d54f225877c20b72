"""A multi-line text field in its own process (tests/im_target_app.py) and waiting for its exact
text: for the input-method route (X11, ibus-daemon) and the keyboard-layout tests on sway."""

from __future__ import annotations

import json
import sys
import time

from support.desktop_driver import REPO, LoggedProcess

TIMEOUT_S = 30.0


def start_text_field(env: dict[str, str], title: str, toolkit: str = "qt") -> LoggedProcess:
    """A Qt field (this venv's PySide6), or ``toolkit="gtk"``: a GTK 3 one (the system python3)."""
    command = ([sys.executable, str(REPO / "tests" / "im_target_app.py")] if toolkit == "qt"
               else ["/usr/bin/python3", str(REPO / "tests" / "im_target_gtk.py")])
    target = LoggedProcess([*command, title], env, read_stdout=True)
    try:
        target.wait_for("ready", TIMEOUT_S * 2)
    except AssertionError:
        target.stop()
        raise
    return target


def wait_for_text(target: LoggedProcess, expected: str, timeout: float = TIMEOUT_S) -> str:
    """The field's text once it equals ``expected``, or the last text seen when it does not
    within ``timeout`` (for the assertion's message)."""
    seen = ""
    deadline = time.monotonic() + timeout
    while True:
        for line in list(target.log):
            if line.startswith("text "):
                seen = json.loads(line[5:])
        if seen == expected or time.monotonic() >= deadline:
            return seen
        try:
            target.next_matching("text ", max(0.1, deadline - time.monotonic()))
        except AssertionError:
            return seen
