"""The desktop's routes wired into the running app (GUI thread).

At start-up: probe the session (app.desktop), choose the routes (app.routes), give the injector
the Wayland inserter where the session is Wayland (its routes prepared at once, so a portal's
consent dialog shows at start-up, not in the middle of a dictation), start the hotkey route
(the GlobalShortcuts portal, or advice with the compositor lines to paste), and on sway ask the
compositor to keep the caption window floating on every workspace and never focus it.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from app.checked_inject import CheckedInjector
from app.desktop import WLROOTS, Desktop, detect
from app.hotkeys import PortalHotkey
from app.ibus_route import IBusRoute, route_line, start_route
from app.routes import (
    COMPOSITOR,
    PORTAL,
    SWAY_CAPTION_RULES,
    WTYPE,
    YDOTOOL,
    Routes,
    choose,
    command_name,
    compositor_lines,
    summary,
)
from app.settings import Settings
from app.wayland_inject import KeyRoute, PortalKeys, WaylandInserter, WlClipboard, Wtype, Ydotool
from app.wayland_inject import notify as desktop_notify
from engine.paths import config_dir
from ui.main_window import MainWindow
from ui.qt_compat import forwarder

log = logging.getLogger(__name__)

TOKEN_FILE = "portal-restore-token"


def key_routes(names: tuple[str, ...]) -> list[KeyRoute]:
    from app.portal import RemoteKeyboard

    made: dict[str, KeyRoute] = {WTYPE: Wtype(), YDOTOOL: Ydotool()}
    routes: list[KeyRoute] = []
    for name in names:
        if name == PORTAL:
            routes.append(PortalKeys(RemoteKeyboard(config_dir() / TOKEN_FILE)))
        elif name in made:
            routes.append(made[name])
    return routes


def pin_captions_on_sway(env: dict[str, str] | None = None) -> bool:
    """sway's own rules for the caption window: floating and sticky (above the tiled windows,
    on every workspace) and never focused when it appears. Whether sway took them."""
    env = dict(os.environ if env is None else env)
    ok = True
    for command in SWAY_CAPTION_RULES:
        try:
            done = subprocess.run(["swaymsg", command], env=env, capture_output=True,
                                  text=True, timeout=5, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("swaymsg: %s", exc)
            return False
        # for_window also tries the command on the current window: ignore that part's answer.
        ok = ok and '"success": true' in done.stdout.split("}")[0]
    return ok


class DesktopRoutes(QObject):
    _action = Signal(str)  # from the portal hotkey's thread
    _bound = Signal(str)
    _failed = Signal(str)
    _notice = Signal(str)

    def __init__(self, settings: Callable[[], Settings], window: MainWindow,
                 injector: CheckedInjector, on_ptt: Callable[[str], None],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._settings, self.window, self.injector = settings, window, injector
        self.desktop: Desktop | None = None
        self.routes: Routes | None = None
        self.portal_hotkey: PortalHotkey | None = None
        self.captions_pinned = False
        self.ibus: IBusRoute | None = None
        self.ibus_why = ""
        self._action.connect(on_ptt)
        self._bound.connect(self._on_bound)
        self._failed.connect(self._on_failed)
        self._notice.connect(lambda text: window.show_message(f"Shortcut portal: {text}",
                                                                   20000))

    def start(self) -> Routes:
        """Probe and set up insertion; returns the routes chosen."""
        self.desktop = detect()
        self.routes = choose(self.desktop, self._settings().allow_ydotool)
        # The input method goes first where the session's is IBus (app.ibus_route).
        self.ibus, self.ibus_why = start_route()
        hotkey_line, insert_line = self.status_lines()
        log.info("desktop: %s", self.desktop.describe())
        log.info("hotkey route: %s", hotkey_line)
        log.info("insertion route: %s", insert_line)
        if self.desktop.wayland:
            first: list[KeyRoute] = [self.ibus] if self.ibus is not None else []
            inserter = WaylandInserter(first + key_routes(self.routes.insert),
                                       WlClipboard() if self.routes.clipboard else None,
                                       desktop_notify)
            inserter.start()
            self.injector.use_wayland(inserter)
            if self.desktop.family == WLROOTS and "swaymsg" in self.desktop.tools:
                self.captions_pinned = pin_captions_on_sway()
        elif self.ibus is not None:
            self.injector.use_ibus(self.ibus)
        return self.routes

    def status_lines(self) -> tuple[str, str]:
        if self.desktop is None or self.routes is None:
            return ("not set up yet", "not set up yet")
        hotkey, insert = summary(self.routes, self.desktop)
        return hotkey, route_line(insert, self.ibus is not None, self.ibus_why)

    def advice(self) -> list[str]:
        """The compositor lines to paste where the hotkey is the compositor's job."""
        if self.desktop is None or self.routes is None or self.routes.hotkey != COMPOSITOR:
            return []
        return compositor_lines(self.desktop.family, self._settings().hotkey, command_name())

    def start_hotkey(self) -> bool:
        """Start the Wayland hotkey route; False where the X11 key grab is the route."""
        if self.desktop is None or not self.desktop.wayland or self.routes is None:
            return False
        if self.routes.hotkey == PORTAL:
            s = self._settings()
            self.portal_hotkey = PortalHotkey(s.hotkey, s.hotkey_mode,
                                              forwarder(self._action, 1),
                                              forwarder(self._bound, 1),
                                              forwarder(self._failed, 1),
                                              forwarder(self._notice, 1))
            self.portal_hotkey.start()
        else:
            lines = self.advice()
            for line in lines:
                log.info("compositor binding: %s", line)
            self.window.show_message(
                "Wayland: bind the hotkey in your compositor (see Settings or `sottovoce "
                "doctor`): " + lines[0], 30000)
        return True

    def stop(self) -> None:
        if self.portal_hotkey is not None:
            self.portal_hotkey.stop()
            self.portal_hotkey = None
        self.injector.use_wayland(None)
        self.injector.use_ibus(None)

    def _on_bound(self, trigger: str) -> None:
        keys = trigger or "not set yet: choose keys in your desktop's shortcut settings"
        self.window.show_message(f"Push-to-talk shortcut (desktop portal): {keys}", 15000)

    def _on_failed(self, message: str) -> None:
        self.portal_hotkey = None
        lines = compositor_lines(self.desktop.family if self.desktop else "",
                                 self._settings().hotkey, command_name())
        log.warning("portal shortcut unavailable (%s); bind instead: %s", message, lines[0])
        self.window.show_message(f"Shortcut portal: {message}; bind instead: {lines[0]}",
                                      30000)
