"""Every X11 key-sending route of app.inject (paste: Ctrl+V or Shift+Insert; type: XTEST) on
German, French (AZERTY) and Russian layouts, into a real focused Qt field under Xvfb: the exact
text, line breaks and tabs as the dictation commands make them, and the hotkey's Ctrl+Alt
still down when the text comes: the text waits for them to go up, then arrives as text, never
as shortcuts. (Type mode alone, with more characters and CapsLock: tests/test_x11_keys.py.)"""

from __future__ import annotations

import subprocess

import pytest
from support.x11_layout import focused_field, layout  # noqa: F401 - the fixture

TEXT = "Zürich yz ß é € Ж"
DICTATED = f"{TEXT}\nzweite Zeile\tTab"
TIMEOUT_MS = 20000


@pytest.mark.parametrize("route", ["paste ctrl+v", "paste shift+insert", "type"])
@pytest.mark.parametrize("name", ["de", "fr", "ru"])
def test_exact_text_on_every_layout_after_held_keys(qtbot, layout, name: str,  # noqa: F811
                                                    route: str, monkeypatch) -> None:
    from app import inject
    from app.inject import TextInjector

    # The field is in this process, so the paste keys come back through the same event loop as
    # the clipboard's restore timer: on a busy machine the restore could run first. What is on
    # the clipboard afterwards has tests of its own; here the restore waits past the check.
    monkeypatch.setattr(inject, "RESTORE_DELAY_MS", 60_000)

    layout(name)
    field = focused_field(qtbot)
    field.setTabChangesFocus(False)
    mode, _, keys = route.partition(" ")
    injector = TextInjector(mode=mode, paste_keys=keys or "ctrl+v")
    results: list[tuple[bool, str]] = []
    injector.finished.connect(lambda ok, message: results.append((ok, message)))
    subprocess.run(["xdotool", "keydown", "ctrl", "alt"], check=True, timeout=10)
    try:
        injector.insert(DICTATED)
        qtbot.waitUntil(lambda: injector.waiting == 1, timeout=TIMEOUT_MS)
    finally:
        subprocess.run(["xdotool", "keyup", "ctrl", "alt"], check=True, timeout=10)
    try:
        qtbot.waitUntil(lambda: bool(results) and field.toPlainText() == DICTATED,
                        timeout=TIMEOUT_MS)
    except Exception:  # noqa: BLE001 - the assertions below show what did arrive
        pass
    finally:
        injector.close()
    assert field.toPlainText() == DICTATED
    assert results and results[0][0], results
