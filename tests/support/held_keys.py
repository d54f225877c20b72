"""Keys left down on the test desktop, found and let go after each test.

A key a test (or an app it killed mid-chord) left pressed on the shared X display spoils every
later test there: a held Shift turns the Ctrl+Alt+Space hotkey into another chord, and the
injector waits up to `app.inject.HELD_WAIT_S` for modifiers to be let go. The conftest asks the
X server which keys are down after every test, releases them through XTEST and names the test
in a warning, so the leak is reported where it happened instead of failing a test that follows.
"""

from __future__ import annotations

import functools
import os
from typing import Any

_connections: dict[str, Any] = {}  # DISPLAY -> Xlib display (None: no X server there)


def _display() -> Any:
    name = os.environ.get("DISPLAY")
    if not name:
        return None
    if name not in _connections:
        try:
            from Xlib import display
            from Xlib.ext import xtest  # noqa: F401 - registers the extension's requests

            connection = display.Display(name)
            _connections[name] = connection if connection.has_extension("XTEST") else None
        except Exception:  # noqa: BLE001 - no X server (a Wayland-only run): nothing to guard
            _connections[name] = None
    return _connections[name]


@functools.cache
def _keysym_names() -> dict[int, str]:
    from Xlib import XK

    return {value: name[3:] for name, value in vars(XK).items()
            if name.startswith("XK_") and isinstance(value, int)}


def release_held_keys() -> list[str]:
    """Let go every key the X server reports down; return their names (empty: none was)."""
    connection = _display()
    if connection is None:
        return []
    from Xlib import X
    from Xlib.ext import xtest

    try:
        keymap = connection.query_keymap()
        down = [byte * 8 + bit for byte, bits in enumerate(keymap) for bit in range(8)
                if bits & (1 << bit)]
        names = []
        for keycode in down:
            keysym = connection.keycode_to_keysym(keycode, 0)
            names.append(_keysym_names().get(keysym, f"keycode {keycode}"))
            xtest.fake_input(connection, X.KeyRelease, keycode)
        connection.sync()
    except Exception:  # noqa: BLE001 - the server went away (a test stopped its desktop)
        _connections[os.environ.get("DISPLAY", "")] = None
        return []
    return names
