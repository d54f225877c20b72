"""The test desktop's keyboard left as each test found it.

A key a test (or an app it killed mid-chord) left pressed, a modifier left latched or locked,
or a popup left open on the shared X display spoils every later test there: a held or locked
Shift or Super turns the Ctrl+Alt+Space hotkey into a chord its grab does not match, and the
injector waits up to `app.inject.HELD_WAIT_S` for modifiers to be let go; an open Qt popup (a
menu, a combo box's list) holds the X keyboard grab, so no key reaches the focused field and no
hotkey grab fires. After every test the conftest asks the X server which keys are down and which
modifiers are in effect, puts both back as they were at the first test, closes the popups and
keyboard grabs of this process's Qt (`restore`) and names the test in a warning, so a leak is
reported where it happened instead of failing a test that follows. `describe` is for failure
messages.
"""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

XKB_USE_CORE_KBD = 0x0100
MODIFIER_NAMES = ("Shift", "Lock", "Control", "Mod1", "Mod2", "Mod3", "Mod4", "Mod5")


@dataclass
class _Display:
    xlib: Any  # python-xlib connection: queries and XTEST
    libx11: Any  # libX11 connection (ctypes): XKB's latch and lock requests, which python-xlib lacks
    modifiers: int  # the modifiers in effect at the first look (NumLock may be on)


_displays: dict[str, _Display | None] = {}


@functools.cache
def _libx11() -> Any:
    lib = ctypes.CDLL("libX11.so.6")
    lib.XOpenDisplay.restype = ctypes.c_void_p
    lib.XOpenDisplay.argtypes = [ctypes.c_char_p]
    for name in ("XkbLockModifiers", "XkbLatchModifiers"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint,
                                       ctypes.c_uint]
    lib.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def _display() -> _Display | None:
    name = os.environ.get("DISPLAY")
    if not name:
        return None
    if name not in _displays:
        try:
            from Xlib import display
            from Xlib.ext import xtest  # noqa: F401 - registers the extension's requests

            connection = display.Display(name)
            native = _libx11().XOpenDisplay(name.encode())
            ok = connection.has_extension("XTEST") and native
            _displays[name] = _Display(connection, native, _modifiers(connection)) if ok else None
        except Exception:  # noqa: BLE001 - no X server (a Wayland-only run): nothing to guard
            _displays[name] = None
    return _displays[name]


def _modifiers(connection: Any) -> int:
    """The core modifiers in effect now: held, latched and locked."""
    return int(connection.screen().root.query_pointer().mask) & 0xFF


@functools.cache
def _keysym_names() -> dict[int, str]:
    from Xlib import XK

    return {value: name[3:] for name, value in vars(XK).items()
            if name.startswith("XK_") and isinstance(value, int)}


def _names(mask: int) -> str:
    return "+".join(n for bit, n in enumerate(MODIFIER_NAMES) if mask & (1 << bit)) or "none"


def _keys_down(connection: Any) -> list[int]:
    keymap = connection.query_keymap()
    return [byte * 8 + bit for byte, bits in enumerate(keymap) for bit in range(8)
            if bits & (1 << bit)]


def restore() -> list[str]:
    """Let go every key the X server reports down and put latched or locked modifiers back as
    they were at the first look; return what was changed (empty: nothing was)."""
    state = _display()
    if state is None:
        return []
    from Xlib import X
    from Xlib.ext import xtest

    connection = state.xlib
    changed = []
    try:
        for keycode in _keys_down(connection):
            keysym = connection.keycode_to_keysym(keycode, 0)
            changed.append(f"{_keysym_names().get(keysym, f'keycode {keycode}')} down")
            xtest.fake_input(connection, X.KeyRelease, keycode)
        connection.sync()
        now = _modifiers(connection)
        if now != state.modifiers:
            changed.append(f"modifiers {_names(now)} in effect (were {_names(state.modifiers)})")
            lib = _libx11()
            lib.XkbLatchModifiers(state.libx11, XKB_USE_CORE_KBD, 0xFF, 0)
            lib.XkbLockModifiers(state.libx11, XKB_USE_CORE_KBD, 0xFF, state.modifiers)
            lib.XSync(state.libx11, 0)
    except Exception:  # noqa: BLE001 - the server went away (a test stopped its desktop)
        _displays[os.environ.get("DISPLAY", "")] = None
        return []
    return changed + [f"{grab} open: closed" for grab in _close_own_grabs()]


def _own_grabs() -> list[Any]:
    """This process's Qt popups and keyboard grabber (each holds the X keyboard grab)."""
    widgets = sys.modules.get("PySide6.QtWidgets")
    if widgets is None or widgets.QApplication.instance() is None:
        return []
    grabs = [widgets.QApplication.activePopupWidget(), widgets.QWidget.keyboardGrabber()]
    return [w for w in grabs if w is not None]


def _close_own_grabs() -> list[str]:
    closed: list[str] = []
    for _ in range(10):  # popups stack (a submenu over its menu)
        grabs = _own_grabs()
        if not grabs:
            break
        for widget in grabs:
            closed.append(f"{type(widget).__name__} {widget.objectName()!r}".strip())
            widget.releaseKeyboard()
            widget.close()
        sys.modules["PySide6.QtWidgets"].QApplication.processEvents()
    return closed


def _keyboard_grabbed(connection: Any) -> bool:
    """Whether some client holds the X keyboard grab (trying to take it is the only way to
    ask; used for failure messages only: taking it sends the focused window focus events)."""
    from Xlib import X

    status = connection.screen().root.grab_keyboard(False, X.GrabModeAsync, X.GrabModeAsync,
                                                    X.CurrentTime)
    if status == X.GrabSuccess:
        connection.ungrab_keyboard(X.CurrentTime)
        connection.sync()
    return bool(status == X.AlreadyGrabbed)


def describe() -> str:
    """The keyboard as the X server sees it now: the focused window, keys down, modifiers,
    whether a client holds the keyboard grab, and the clients with windows."""
    state = _display()
    if state is None:
        return "no X display"
    connection = state.xlib
    try:
        focus = connection.get_input_focus()
        window = focus.focus if isinstance(focus.focus, int) else focus.focus.id
        keys = _keys_down(connection)
        grabbed = _keyboard_grabbed(connection)
        own = ", ".join(f"{type(w).__name__} {w.objectName()!r}" for w in _own_grabs())
        return (f"X focus {window:#x} (revert {focus.revert_to}), keys down {keys}, "
                f"modifiers {_names(_modifiers(connection))}, keyboard grabbed by a client: "
                f"{'yes' if grabbed else 'no'}; this process's popups and grabs: {own or 'none'}"
                f"; clients with windows: {_clients()}")
    except Exception as error:  # noqa: BLE001 - a failure message must not fail itself
        return f"X keyboard state unavailable: {error}"


def _clients() -> str:
    """The X clients that have windows (xlsclients: one line each, the command that made it)."""
    try:
        listed = subprocess.run(["xlsclients", "-l"], capture_output=True, text=True,
                                timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError) as error:
        return f"unknown ({error})"
    return " | ".join(" ".join(line.split()) for line in listed.splitlines()
                      if line.strip().startswith("Command:")) or "none"
