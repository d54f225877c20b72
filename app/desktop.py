"""What kind of desktop session this is and what in it actually works, found at run time.

The session: X11, Wayland with XWayland beside it, Wayland alone, or none; on Wayland the
compositor family (GNOME, KDE, wlroots, Hyprland, other), read from the environment the session
manager sets. What works is probed, not guessed from what is installed (apps that pick `wtype`
because it is installed silently type nothing on GNOME and KDE):

- the compositor's own Wayland globals, asked over its socket (`wayland_globals`: a tiny client
  of the Wayland wire protocol, no library): `zwp_virtual_keyboard_manager_v1` is what `wtype`
  needs, `zwlr_data_control_manager_v1` lets `wl-copy` set the clipboard without focus,
  `zwlr_layer_shell_v1` is what keeps a panel on top;
- the xdg-desktop-portal interfaces and their versions (app.portal: GlobalShortcuts for the
  hotkey, RemoteDesktop for keys);
- the tools on PATH (`wtype`, `wl-copy`, `ydotool`).

`Desktop` holds the answers; app.routes turns them into the hotkey and insertion routes.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import struct
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

X11, XWAYLAND, WAYLAND, NONE = "x11", "xwayland", "wayland", "none"
NATIVE = "native"  # Windows, macOS: pynput's own hooks
GNOME, KDE, WLROOTS, HYPRLAND, OTHER = "gnome", "kde", "wlroots", "hyprland", "other"
VIRTUAL_KEYBOARD = "zwp_virtual_keyboard_manager_v1"
DATA_CONTROL = "zwlr_data_control_manager_v1"
LAYER_SHELL = "zwlr_layer_shell_v1"
PROBE_TIMEOUT_S = 2.0
TOOLS = ("wtype", "wl-copy", "wl-paste", "ydotool", "swaymsg", "hyprctl")


@dataclass(frozen=True)
class Desktop:
    """The session and what was found to work in it.

    kind: x11 | xwayland (a Wayland session whose apps may also use X11) | wayland | none |
      native (Windows, macOS).
    family: the compositor on Wayland (gnome | kde | wlroots | hyprland | other), "" elsewhere.
    globals: the Wayland globals the compositor offers (empty when not asked or not Wayland).
    portals: portal interface name -> version, for those the session bus offers.
    tools: the helper programs found on PATH.
    """

    kind: str
    family: str = ""
    globals: frozenset[str] = frozenset()
    portals: Mapping[str, int] = field(default_factory=dict)
    tools: frozenset[str] = frozenset()
    keyboard_devices: bool = False  # RemoteDesktop offers keyboard devices

    @property
    def wayland(self) -> bool:
        return self.kind in (WAYLAND, XWAYLAND)

    def portal(self, name: str) -> int:
        """The version of portal interface ``name`` (0: not offered)."""
        return self.portals.get(name, 0)

    def describe(self) -> str:
        if not self.wayland:
            return {X11: "X11 session", NONE: "no graphical session",
                    NATIVE: f"{sys.platform} desktop"}[self.kind]
        name = {GNOME: "GNOME", KDE: "KDE Plasma", WLROOTS: "wlroots (sway, ...)",
                HYPRLAND: "Hyprland", OTHER: "an unknown compositor"}[self.family]
        return f"Wayland session on {name}" + (" with XWayland" if self.kind == XWAYLAND else "")


def session_kind(env: Mapping[str, str]) -> str:
    wayland = bool(env.get("WAYLAND_DISPLAY")) or env.get("XDG_SESSION_TYPE") == "wayland"
    if wayland:
        return XWAYLAND if env.get("DISPLAY") else WAYLAND
    if env.get("DISPLAY") or env.get("XDG_SESSION_TYPE") == "x11":
        return X11
    return NONE


def compositor_family(env: Mapping[str, str]) -> str:
    """From what the compositor and the session manager set (XDG_CURRENT_DESKTOP is a
    colon-separated list, e.g. "ubuntu:GNOME")."""
    desktops = {d.strip().lower() for d in env.get("XDG_CURRENT_DESKTOP", "").split(":")}
    if env.get("HYPRLAND_INSTANCE_SIGNATURE") or "hyprland" in desktops:
        return HYPRLAND
    if env.get("SWAYSOCK") or desktops & {"sway", "wlroots", "river", "labwc", "wayfire"}:
        return WLROOTS
    if desktops & {"gnome", "unity", "pantheon", "budgie"}:
        return GNOME
    if "kde" in desktops or env.get("KDE_FULL_SESSION"):
        return KDE
    return OTHER


def qt_platform(env: Mapping[str, str]) -> str | None:
    """The Qt platform plugin to ask for, None for Qt's own choice. GNOME's Wayland session
    with XWayland gets "xcb": mutter keeps an X11 window above the others and unfocused when
    asked (the caption window), while it gives a Wayland app no way to ask. Hotkey and text
    routes follow the session, not the plugin. The user's own QT_QPA_PLATFORM always wins."""
    if env.get("QT_QPA_PLATFORM") or not sys.platform.startswith("linux"):
        return None
    if session_kind(env) == XWAYLAND and compositor_family(env) == GNOME:
        return "xcb"
    return None


def wayland_socket(env: Mapping[str, str]) -> str | None:
    """The compositor's socket path (WAYLAND_DISPLAY may be a name in XDG_RUNTIME_DIR or a
    full path)."""
    name = env.get("WAYLAND_DISPLAY") or "wayland-0"
    if os.path.isabs(name):
        return name
    runtime = env.get("XDG_RUNTIME_DIR")
    return os.path.join(runtime, name) if runtime else None


def wayland_globals(path: str, timeout: float = PROBE_TIMEOUT_S) -> frozenset[str]:
    """The interface names the compositor at ``path`` advertises: wl_display.get_registry, then
    wl_display.sync; the registry's `global` events come before the sync callback's `done`.
    Raises OSError when the compositor cannot be reached."""
    registry, callback = 2, 3
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        # Each request: object id, then (message size << 16 | opcode), then the arguments.
        sock.sendall(struct.pack("<III", 1, 12 << 16 | 1, registry)
                     + struct.pack("<III", 1, 12 << 16 | 0, callback))
        names: set[str] = set()
        buffer = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                raise OSError("the compositor closed the connection")
            buffer += chunk
            while len(buffer) >= 8:
                sender, size_opcode = struct.unpack_from("<II", buffer)
                size, opcode = size_opcode >> 16, size_opcode & 0xFFFF
                if size < 8 or len(buffer) < size:
                    break
                body, buffer = buffer[8:size], buffer[size:]
                if sender == callback:
                    return frozenset(names)
                if sender == registry and opcode == 0:  # global(name, interface, version)
                    length = struct.unpack_from("<I", body, 4)[0]
                    names.add(body[8:8 + length - 1].decode(errors="replace"))
                elif sender == 1 and opcode == 0:  # wl_display.error
                    raise OSError("the compositor reported a protocol error")


def detect(env: Mapping[str, str] | None = None,
           portal_probe: Callable[[], tuple[dict[str, int], bool]] | None = None) -> Desktop:
    """The session and what works in it. Probes run here (a second or two at most when
    something hangs); call once at start-up and when the user asks (doctor, settings)."""
    env = os.environ if env is None else env
    if not sys.platform.startswith("linux"):
        return Desktop(NATIVE)
    kind = session_kind(env)
    tools = frozenset(t for t in TOOLS if shutil.which(t, path=env.get("PATH")))
    if kind not in (WAYLAND, XWAYLAND):
        return Desktop(kind, tools=tools)
    names: frozenset[str] = frozenset()
    path = wayland_socket(env)
    if path:
        try:
            names = wayland_globals(path)
        except OSError as exc:
            log.warning("cannot ask the Wayland compositor at %s what it offers: %s", path, exc)
    if portal_probe is None:
        from app.portal import probe_portals

        portal_probe = probe_portals
    try:
        portals, keyboard = portal_probe()
    except Exception as exc:  # noqa: BLE001 - no session bus, a hung portal: none offered
        log.info("no xdg-desktop-portal: %s", exc)
        portals, keyboard = {}, False
    return Desktop(kind, compositor_family(env), names, portals, tools, keyboard)
