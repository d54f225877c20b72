"""Which hotkey and insertion routes each desktop gets (app.desktop, app.routes), the portal
shortcut's press/release logic, the keysyms sent through the RemoteDesktop portal, and the
settings page's route lines. The routes themselves run for real in tests/test_e2e_wayland.py
(sway) and against the portal's D-Bus interfaces in tests/test_portal.py."""

from __future__ import annotations

import pytest

from app.desktop import (
    DATA_CONTROL,
    GNOME,
    HYPRLAND,
    KDE,
    OTHER,
    VIRTUAL_KEYBOARD,
    WLROOTS,
    Desktop,
    compositor_family,
    qt_platform,
    session_kind,
)
from app.hotkeys import PRESS, RELEASE, ShortcutMachine
from app.portal import GLOBAL_SHORTCUTS, REMOTE_DESKTOP, char_keysym, portal_trigger
from app.routes import (
    COMPOSITOR,
    PORTAL,
    PYNPUT,
    WTYPE,
    YDOTOOL,
    caption_note,
    choose,
    compositor_lines,
)

WLR_GLOBALS = frozenset({VIRTUAL_KEYBOARD, DATA_CONTROL, "zwlr_layer_shell_v1"})
PORTALS = {GLOBAL_SHORTCUTS: 1, REMOTE_DESKTOP: 2}
TOOLS = frozenset({"wtype", "wl-copy", "wl-paste"})


@pytest.mark.parametrize("env,kind", [
    ({"WAYLAND_DISPLAY": "wayland-0"}, "wayland"),
    ({"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}, "xwayland"),
    ({"XDG_SESSION_TYPE": "wayland"}, "wayland"),
    ({"DISPLAY": ":0"}, "x11"),
    ({}, "none"),
])
def test_session_kind(env: dict[str, str], kind: str) -> None:
    assert session_kind(env) == kind


@pytest.mark.parametrize("env,family", [
    ({"XDG_CURRENT_DESKTOP": "ubuntu:GNOME"}, GNOME),
    ({"XDG_CURRENT_DESKTOP": "KDE"}, KDE),
    ({"SWAYSOCK": "/run/user/1000/sway-ipc.sock"}, WLROOTS),
    ({"XDG_CURRENT_DESKTOP": "sway"}, WLROOTS),
    ({"HYPRLAND_INSTANCE_SIGNATURE": "abc", "XDG_CURRENT_DESKTOP": "Hyprland"}, HYPRLAND),
    ({"XDG_CURRENT_DESKTOP": "Weston"}, OTHER),
])
def test_compositor_family(env: dict[str, str], family: str) -> None:
    assert compositor_family(env) == family


def test_gnome_with_xwayland_runs_qt_through_it_for_the_caption_window() -> None:
    gnome = {"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0", "XDG_CURRENT_DESKTOP": "GNOME"}
    assert qt_platform(gnome) == "xcb"
    assert qt_platform({**gnome, "QT_QPA_PLATFORM": "wayland"}) is None  # the user's choice
    assert qt_platform({**gnome, "XDG_CURRENT_DESKTOP": "KDE"}) is None
    assert qt_platform({"WAYLAND_DISPLAY": "wayland-0", "XDG_CURRENT_DESKTOP": "GNOME"}) is None
    assert caption_note(Desktop("xwayland", GNOME))[0]
    assert not caption_note(Desktop("wayland", GNOME))[0]
    assert not caption_note(Desktop("wayland", KDE))[0]
    assert caption_note(Desktop("wayland", WLROOTS, tools=frozenset({"swaymsg"})))[0]


def test_gnome_gets_the_portals_and_never_wtype_without_the_protocol() -> None:
    # wtype is installed, but mutter has no virtual-keyboard protocol: it is not chosen.
    gnome = Desktop("wayland", GNOME, frozenset(), PORTALS, TOOLS, keyboard_devices=True)
    routes = choose(gnome)
    assert (routes.hotkey, routes.insert) == (PORTAL, (PORTAL,))
    assert "no virtual-keyboard protocol" in routes.insert_why
    assert "no data-control protocol" in routes.insert_why


def test_sway_gets_wtype_and_the_compositor_binding() -> None:
    sway = Desktop("wayland", WLROOTS, WLR_GLOBALS, {}, TOOLS)
    routes = choose(sway)
    assert (routes.hotkey, routes.insert, routes.clipboard) == (COMPOSITOR, (WTYPE,), True)


def test_hyprland_with_the_shortcuts_portal_types_with_wtype_first() -> None:
    hyprland = Desktop("wayland", HYPRLAND, WLR_GLOBALS, PORTALS, TOOLS, keyboard_devices=True)
    assert choose(hyprland).insert == (WTYPE, PORTAL)
    assert choose(hyprland).hotkey == PORTAL


def test_ydotool_only_when_allowed_and_nothing_left_means_clipboard() -> None:
    bare = Desktop("wayland", KDE, frozenset(), {}, frozenset({"ydotool", "wl-copy"}))
    refused = choose(bare)
    assert refused.insert == () and "press Ctrl+V" in refused.insert_why
    assert "not allowed in the settings" in refused.insert_why
    assert choose(bare, allow_ydotool=True).insert == (YDOTOOL,)


def test_x11_keeps_pynput() -> None:
    routes = choose(Desktop("x11"))
    assert (routes.hotkey, routes.insert) == (PYNPUT, (PYNPUT,))


def test_compositor_lines_to_paste() -> None:
    hotkey = "<ctrl>+<alt>+<space>"
    assert compositor_lines(WLROOTS, hotkey)[:2] == [
        "bindsym Ctrl+Mod1+space exec sottovoce ptt press",
        "bindsym --release Ctrl+Mod1+space exec sottovoce ptt release"]
    assert compositor_lines(HYPRLAND, hotkey)[:2] == [
        "bind = CTRL ALT, space, exec, sottovoce ptt press",
        "bindr = CTRL ALT, space, exec, sottovoce ptt release"]
    assert "`sottovoce toggle`, shortcut Ctrl+Alt+Space" in compositor_lines(GNOME, hotkey)[0]
    assert "`sottovoce toggle`" in compositor_lines(KDE, hotkey)[0]
    assert portal_trigger(hotkey) == "CTRL+ALT+space"


def test_portal_shortcut_hold_release_and_toggle() -> None:
    hold = ShortcutMachine("hold")
    assert [hold.activated(), hold.deactivated(), hold.activated(), hold.deactivated()] == [
        PRESS, RELEASE, PRESS, RELEASE]
    silent = ShortcutMachine("hold")  # a desktop that never reports the release
    assert [silent.activated(), silent.activated(), silent.activated()] == [
        PRESS, RELEASE, PRESS]
    toggle = ShortcutMachine("toggle")
    assert [toggle.activated(), toggle.deactivated(), toggle.activated()] == [
        PRESS, None, RELEASE]


@pytest.mark.parametrize("char,keysym", [
    ("a", 0x61), ("A", 0x41), ("é", 0xE9), ("\n", 0xFF0D), ("東", 0x1006771),
    ("🎉", 0x101F389), ("€", 0x10020AC),
])
def test_keysyms(char: str, keysym: int) -> None:
    assert char_keysym(char) == keysym


def test_settings_page_shows_the_routes_and_the_ydotool_opt_in(qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.dialogs import settings_dialog
    from app.settings import Settings

    status = "Hotkey: compositor key binding\nText insertion: virtual keyboard (wtype)"
    dialog = settings_dialog(Settings(), "keyring: test", None, desktop=status)
    qtbot.addWidget(dialog)
    assert dialog.desktop_label.text() == status
    assert not dialog.allow_ydotool.isChecked()
    dialog.allow_ydotool.setChecked(True)
    assert dialog.edited_settings().allow_ydotool
