"""The focused window's class (X11 WM_CLASS), for per-application behaviour (app.profiles).

Read with python-xlib (installed with pynput on Linux): the window the window manager calls
active (_NET_ACTIVE_WINDOW), else the X input focus, walking up to the first window that carries
a WM_CLASS (toolkits focus a child window). Wherever it can't be read (Wayland without XWayland,
no X display, no python-xlib, an X error) the answer is None and the global settings apply:
a graceful no-op, never an error for the user.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

MAX_PARENTS = 8
T = TypeVar("T")


def focused_window_class() -> tuple[str, ...] | None:
    """(instance, class) of the focused window's WM_CLASS, or None where it can't be read."""
    def names(window: Any, _conn: Any, _x: Any) -> tuple[str, ...] | None:
        found = window.get_wm_class()
        return tuple(str(n) for n in found if n) if found else None
    return _read_focused(names)


def focused_window_pid() -> int | None:
    """The process id (_NET_WM_PID) of the focused window's app, or None where it can't be
    read: app.atspi picks that app's focused field, not a stale one of a window behind."""
    def pid(window: Any, conn: Any, x: Any) -> int | None:
        found = window.get_full_property(conn.intern_atom("_NET_WM_PID"), x.AnyPropertyType)
        return int(found.value[0]) if found is not None and len(found.value) else None
    return _read_focused(pid)


def _read_focused(read: Callable[[Any, Any, Any], T | None]) -> T | None:
    """`read(window, conn, Xlib.X)` on the focused window and its parents, the first answer."""
    if not sys.platform.startswith("linux") or not os.environ.get("DISPLAY"):
        return None
    try:
        from Xlib import X
        from Xlib import display as xdisplay
    except ImportError:
        log.debug("python-xlib missing: per-application profiles are off")
        return None
    try:
        conn = xdisplay.Display()
    except Exception as exc:  # noqa: BLE001 - Xlib raises many kinds; all mean "can't tell"
        log.debug("cannot open the X display: %s", exc)
        return None
    try:
        return _walk_up(conn, X, read)
    except Exception as exc:  # noqa: BLE001 - a window can vanish between two requests
        log.debug("cannot read the focused window: %s", exc)
        return None
    finally:
        conn.close()


def _walk_up(conn: Any, x: Any, read: Callable[[Any, Any, Any], T | None]) -> T | None:
    root = conn.screen().root
    window = None
    active = root.get_full_property(conn.intern_atom("_NET_ACTIVE_WINDOW"), x.AnyPropertyType)
    if active is not None and len(active.value) and active.value[0]:
        window = conn.create_resource_object("window", int(active.value[0]))
    else:
        focus = conn.get_input_focus().focus
        if not isinstance(focus, int):  # X.NONE / PointerRoot come back as ints
            window = focus
    for _ in range(MAX_PARENTS):
        if window is None or window == root:
            return None
        found = read(window, conn, x)
        if found is not None:
            return found
        window = window.query_tree().parent
    return None
