"""Text fields on the accessibility bus for the checked-insertion tests: a Qt or GTK field in
another process, and what a machine needs to run them."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from app.atspi import AccessibilityError, bus_address
from app.verify import Verifier
from support.desktop_driver import REPO, LoggedProcess

GTK_APP = REPO / "tests" / "e2e_target_gtk.py"


SYSTEM_PYTHON = "/usr/bin/python3"


TEXT = "Zürich, 3 × 4 ok. "


def missing_prerequisite() -> str | None:
    if not os.environ.get("DISPLAY") or shutil.which("xdotool") is None:
        return "needs an X display and xdotool: source .ci/desktop.sh"
    try:
        bus_address()
    except AccessibilityError as exc:
        return f"needs the accessibility bus (apt: at-spi2-core): {exc}"
    gtk = subprocess.run([SYSTEM_PYTHON, "-c", "import gi; gi.require_version('Gtk', '3.0')"],
                         capture_output=True, timeout=30, check=False)
    if gtk.returncode != 0:
        return "needs /usr/bin/python3 with gi and Gtk 3 (apt: python3-gi gir1.2-gtk-3.0)"
    return None


class Target:
    def __init__(self, process: LoggedProcess, out: Path, title: str) -> None:
        self.process, self.out, self.title = process, out, title

    def text(self) -> str:
        return self.out.read_text(encoding="utf-8") if self.out.is_file() else ""


def wait_on_the_bus(title: str) -> None:
    """Until the focused field is on the accessibility bus (the toolkit registers it after
    the window shows); bounded, so a broken bus fails here, not as a wrong verdict."""
    verifier = Verifier()
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            if verifier.probe().field is not None:
                return
            time.sleep(0.05)
        raise AssertionError(f"the field of {title} never showed on the accessibility bus")
    finally:
        verifier.close()
