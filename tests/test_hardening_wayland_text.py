"""Issue 41 on a real Wayland compositor (headless sway, wtype, a native Wayland Qt field; see
tests/test_e2e_wayland.py for the setup): text with escape sequences, DEL, backspaces and a bidi
override, typed and pasted through app.wayland_inject, lands as its text alone."""

from __future__ import annotations

import pytest
from support.wayland_fields import client_env, field, insert, sway, wait_for_length  # noqa: F401

from app.wayland_inject import WaylandInserter, WlClipboard, Wtype

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]

HOSTILE = "Hello\x1b[2J\x1b]0;pwned\x07 wor\x7f\x08\x08ld\u202e, ça va\x1b]52;c;cm0=\x07."
CLEAN = "Hello world, ça va."


@pytest.mark.parametrize("mode", ["type", "paste"])
def test_hostile_text_lands_as_its_text_alone(sway, field, mode: str) -> None:  # noqa: F811
    target, out = field
    inserter = WaylandInserter([Wtype()], WlClipboard(), restore_delay_s=0.6)
    inserter.start()
    try:
        ok, message = insert(inserter, HOSTILE, mode)
        wait_for_length(target, len(CLEAN))
    finally:
        inserter.stop()
    assert ok, message
    assert out.read_text(encoding="utf-8") == CLEAN
