"""Which hotkey route and which insertion routes this desktop gets, and why, in words.

Pure functions on an app.desktop.Desktop (what was probed), so every branch is unit-tested:

hotkey:  X11 -> the key grab (app.x11_hotkey); Wayland with the GlobalShortcuts portal -> the
         portal (KDE Plasma 5.27+, GNOME 48+, Hyprland); otherwise -> the control commands bound
         in the compositor (`sottovoce ptt press|release`, `sottovoce toggle`), with the exact
         lines.
insert:  X11 -> XTEST keys or paste (app.inject); Wayland -> key routes in this order:
         GNOME/KDE: RemoteDesktop portal, then wtype (where the compositor has the
         virtual-keyboard protocol); wlroots/Hyprland/other: wtype, then the portal;
         ydotool last, only when the user allowed it; last resort: clipboard + "press Ctrl+V".
         Paste mode needs wl-copy for the clipboard (else the text is typed).
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass

from app.desktop import (
    DATA_CONTROL,
    GNOME,
    HYPRLAND,
    KDE,
    NATIVE,
    NONE,
    VIRTUAL_KEYBOARD,
    WLROOTS,
    XWAYLAND,
    Desktop,
)
from app.portal import GLOBAL_SHORTCUTS, REMOTE_DESKTOP

PYNPUT, PORTAL, COMPOSITOR = "pynput", "portal", "compositor"
WTYPE, YDOTOOL = "wtype", "ydotool"
CAPTIONS = '[title="^Sottovoce captions$"]'
# Two rules, not one "floating enable, sticky enable": sway 1.7 drops the sticky flag of a
# window that the same rule made floating while it maps.
SWAY_CAPTION_RULES = (f"no_focus {CAPTIONS}", f"for_window {CAPTIONS} floating enable",
                      f"for_window {CAPTIONS} sticky enable")


@dataclass(frozen=True)
class Routes:
    hotkey: str  # pynput | portal | compositor
    hotkey_why: str
    insert: tuple[str, ...]  # key routes, first tried first (pynput | wtype | portal | ydotool)
    insert_why: str
    clipboard: bool  # wl-copy can set the Wayland clipboard (X11: Qt's clipboard)


def choose(desktop: Desktop, allow_ydotool: bool = False) -> Routes:
    if not desktop.wayland:
        grab = desktop.kind != NONE
        via = "pynput" if desktop.kind == NATIVE else "X11"
        return Routes(PYNPUT if grab else COMPOSITOR,
                      f"global key grab ({via})" if grab else "no graphical session",
                      (PYNPUT,) if grab else (), f"key events ({via})", grab)
    if desktop.portal(GLOBAL_SHORTCUTS):
        hotkey, hotkey_why = PORTAL, (f"GlobalShortcuts portal (version "
                                      f"{desktop.portal(GLOBAL_SHORTCUTS)})")
    else:
        hotkey, hotkey_why = COMPOSITOR, "no GlobalShortcuts portal here: bind the control " \
                                         "commands in the compositor"
    usable = {
        WTYPE: VIRTUAL_KEYBOARD in desktop.globals and "wtype" in desktop.tools,
        PORTAL: bool(desktop.portal(REMOTE_DESKTOP)) and desktop.keyboard_devices,
        YDOTOOL: allow_ydotool and "ydotool" in desktop.tools,
    }
    order = (PORTAL, WTYPE) if desktop.family in (GNOME, KDE) else (WTYPE, PORTAL)
    routes = tuple(r for r in (*order, YDOTOOL) if usable[r])
    reasons = []
    if VIRTUAL_KEYBOARD not in desktop.globals:
        reasons.append("no virtual-keyboard protocol (wtype cannot work)")
    elif "wtype" not in desktop.tools:
        reasons.append("virtual-keyboard protocol offered but wtype is not installed")
    if not usable[PORTAL]:
        reasons.append("no RemoteDesktop portal with a keyboard")
    if "ydotool" in desktop.tools and not allow_ydotool:
        reasons.append("ydotool installed but not allowed in the settings")
    clipboard = "wl-copy" in desktop.tools
    if not clipboard:
        reasons.append("wl-copy missing (paste mode types instead)")
    elif DATA_CONTROL not in desktop.globals:
        reasons.append("no data-control protocol (wl-copy briefly takes focus)")
    why = ("keys via " + " then ".join(routes) if routes
           else "no way to send keys: text goes to the clipboard with a 'press Ctrl+V' note")
    return Routes(hotkey, hotkey_why, routes, why + ("; " + "; ".join(reasons) if reasons
                                                      else ""), clipboard)


def command_name() -> str:
    """How the compositor should call us: `sottovoce` when on PATH, else its full path."""
    if shutil.which("sottovoce"):
        return "sottovoce"
    return f"{sys.executable} -m app.cli"


def _keys(hotkey: str) -> list[str]:
    return [part.strip("<>").lower() for part in hotkey.split("+") if part.strip()]


def compositor_lines(family: str, hotkey: str, command: str = "sottovoce") -> list[str]:
    """What to paste into the compositor's configuration (or do in its settings) so the hotkey
    drives the running app: hold-to-talk where the compositor reports the release."""
    keys = _keys(hotkey)
    mods, key = keys[:-1], keys[-1]
    if family == WLROOTS:
        names = {"ctrl": "Ctrl", "alt": "Mod1", "shift": "Shift", "cmd": "Mod4", "super": "Mod4"}
        chord = "+".join([*(names.get(m, m) for m in mods), key])
        return [f"bindsym {chord} exec {command} ptt press",
                f"bindsym --release {chord} exec {command} ptt release",
                *SWAY_CAPTION_RULES]
    if family == HYPRLAND:
        names = {"ctrl": "CTRL", "alt": "ALT", "shift": "SHIFT", "cmd": "SUPER", "super": "SUPER"}
        chord = f"{' '.join(names.get(m, m.upper()) for m in mods)}, {key}"
        return [f"bind = {chord}, exec, {command} ptt press",
                f"bindr = {chord}, exec, {command} ptt release",
                "windowrulev2 = float, title:^(Sottovoce captions)$",
                "windowrulev2 = pin, title:^(Sottovoce captions)$",
                "windowrulev2 = nofocus, title:^(Sottovoce captions)$"]
    shown = "+".join(k.capitalize() for k in keys)
    if family == GNOME:
        return [f"Settings > Keyboard > View and Customise Shortcuts > Custom Shortcuts > +: "
                f"command `{command} toggle`, shortcut {shown} (GNOME runs a custom shortcut on "
                "press only, so it toggles: press to talk, press again to stop)"]
    if family == KDE:
        return [f"System Settings > Keyboard > Shortcuts > Add New > Command: `{command} toggle`, "
                f"shortcut {shown} (press to talk, press again to stop); captions on top: a "
                "KWin window rule for 'Sottovoce captions' with Keep above and Accept focus: No"]
    return [f"bind {shown} to `{command} ptt press` (on press) and `{command} ptt release` "
            f"(on release), or to `{command} toggle`, in your compositor's key bindings"]


def summary(routes: Routes, desktop: Desktop) -> tuple[str, str]:
    """One line for the hotkey route and one for the insertion route (doctor, settings)."""
    hotkey = {PYNPUT: "global key grab", PORTAL: "desktop portal shortcut",
              COMPOSITOR: "compositor key binding to the control commands"}[routes.hotkey]
    if routes.insert:
        first = {PYNPUT: "key events", WTYPE: "virtual keyboard (wtype)",
                 PORTAL: "RemoteDesktop portal (asks once)", YDOTOOL: "ydotool (uinput)"}
        insert = first[routes.insert[0]]
    else:
        insert = "clipboard only: press Ctrl+V yourself"
    return (f"{hotkey}: {routes.hotkey_why} ({desktop.describe()})",
            f"{insert}: {routes.insert_why}")


def caption_note(desktop: Desktop) -> tuple[bool, str]:
    """Whether the caption window can stay on top without taking focus here, and how."""
    if not desktop.wayland:
        return True, "kept above the other windows, never focused"
    if desktop.family == WLROOTS:
        if "swaymsg" in desktop.tools:
            return True, "sway rules set at start: floating, on every workspace, never focused"
        return False, "add the compositor's rules shown under Hotkeys"
    if desktop.family == GNOME:
        if desktop.kind == XWAYLAND:
            return True, "runs through XWayland: kept above, never focused"
        return False, ("GNOME lets no Wayland window stay on top: other windows can cover it "
                       "(with XWayland installed, Sottovoce uses it for this)")
    if desktop.family == HYPRLAND:
        return False, ("Hyprland keeps it on top only with windowrulev2 float, pin and nofocus "
                       "(lines under Hotkeys)")
    if desktop.family == KDE:
        return False, ("KWin keeps it on top only with a window rule: Keep above, "
                       "Accept focus: No")
    return False, "this compositor decides; Qt asks it not to focus the window"
