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
from typing import Any

log = logging.getLogger(__name__)

MAX_PARENTS = 8


def focused_window_class() -> tuple[str, ...] | None:
    """(instance, class) of the focused window's WM_CLASS, or None where it can't be read."""
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
        return _window_class(conn, X)
    except Exception as exc:  # noqa: BLE001 - a window can vanish between two requests
        log.debug("cannot read the focused window's class: %s", exc)
        return None
    finally:
        conn.close()


def _window_class(conn: Any, x: Any) -> tuple[str, ...] | None:
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
        names = window.get_wm_class()
        if names:
            return tuple(str(n) for n in names if n)
        window = window.query_tree().parent
    return None
