"""The X11 keyboard layout of the test display, switched with setxkbmap and put back, and a
focused plain-text field to type into (tests of typing and insertion on any layout)."""

from __future__ import annotations

import subprocess

import pytest

from support.controller import focused_field as focused


def focused_field(qtbot):
    from PySide6.QtWidgets import QPlainTextEdit

    return focused(qtbot, QPlainTextEdit)


def xkb_query() -> dict[str, str]:
    out = subprocess.run(["setxkbmap", "-query"], capture_output=True, text=True, check=True,
                         timeout=10).stdout
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines())}


@pytest.fixture
def layout():
    """Switches the display's keyboard layout; the one before comes back afterwards."""
    before = xkb_query()

    def switch(*args: str) -> None:
        subprocess.run(["setxkbmap", *args], check=True, timeout=10)

    yield switch
    command = ["setxkbmap", "-layout", before.get("layout", "us"), "-variant",
               before.get("variant", ""), "-option", ""]
    if before.get("options"):
        command += ["-option", before["options"]]
    subprocess.run(command, check=True, timeout=10)
