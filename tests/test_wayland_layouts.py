"""Any keyboard layout on a real Wayland compositor (headless sway, see tests/test_e2e_wayland.py):
with German, French (AZERTY) and Russian set as the seat's layout (`input * xkb_layout`), type
mode and paste mode through app.wayland_inject's key routes put the exact text into a native
Wayland multi-line Qt field: `Zürich yz ß é € Ж` (y/z swap on German, letters on other keys on
AZERTY, no Latin letters at all on Russian), line breaks and tabs as the dictation commands make
them, and a correction's backspaces; while another keyboard holds the hotkey's Ctrl+Alt, none
of it becomes a shortcut (Ctrl+Z, Ctrl+A, Alt+letter).

wtype is the key route sway offers (the portal's keysyms are the compositor's job: GNOME/KDE,
tests/test_portal.py; ydotool needs /dev/uinput, absent here).
"""

from __future__ import annotations

import subprocess

import pytest
from support.text_field import start_text_field, wait_for_text
from support.wayland_fields import client_env, insert, sway  # noqa: F401 - fixtures and helper

from app.wayland_inject import Insertion, WaylandInserter, WlClipboard, Wtype

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]

TEXT = "Zürich yz ß é € Ж"
TITLE = "Sottovoce layout target"
# What "new line" and "tab" dictation commands insert (engine.dictation), between words.
DICTATED = f"{TEXT}\nzweite Zeile\tTab"


@pytest.fixture
def text_field(sway, client_env):  # type: ignore[no-untyped-def]  # noqa: F811
    target = start_text_field(client_env, TITLE)
    try:
        sway.focus(TITLE)
        yield target
    finally:
        target.stop()


@pytest.fixture
def held_ctrl_alt(client_env):  # type: ignore[no-untyped-def]  # noqa: F811
    """The hotkey's Ctrl+Alt still down on another keyboard while the text goes in."""
    holder = subprocess.Popen(["wtype", "-M", "ctrl", "-M", "alt", "-s", "60000"],
                              env=client_env)
    yield
    holder.kill()
    holder.wait(10)


@pytest.mark.parametrize("mode", ["type", "paste"])
@pytest.mark.parametrize("layout", ["de", "fr", "ru"])
def test_exact_text_on_every_layout_with_ctrl_alt_held(sway, text_field, held_ctrl_alt,  # noqa: F811
                                                       layout: str, mode: str) -> None:
    sway.msg("input", "*", "xkb_layout", layout)
    inserter = WaylandInserter([Wtype()], WlClipboard(), restore_delay_s=0.6)
    inserter.start()
    try:
        ok, message = insert(inserter, DICTATED, mode)
        assert ok, message
        assert wait_for_text(text_field, DICTATED) == DICTATED
        # A correction ("scratch that" of the last word) then more text, same layout.
        done: list[tuple[bool, str]] = []
        inserter.submit(Insertion(" Ж€", len("Tab"), mode, "ctrl+v",
                                  lambda ok, msg: done.append((ok, msg))))
        expected = DICTATED[:-len("Tab")] + " Ж€"
        assert wait_for_text(text_field, expected) == expected
    finally:
        inserter.stop()
    assert done and done[0][0], done
    assert sway.focused_title() == TITLE
