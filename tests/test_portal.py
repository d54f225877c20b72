"""The portal routes (app.portal, app.hotkeys.PortalHotkey, the RemoteDesktop key route) against
the portal's documented D-Bus interfaces, served by python-dbusmock (tests/support/portal_mock.py) on a
private session bus: no portal backend runs headless with a consent a test could give.

Covered: the host registry call; GlobalShortcuts binding with the preferred trigger and
press/release from Activated/Deactivated (and toggle where no release is reported); the
RemoteDesktop consent asked once, its restore token kept and offered next time; a refused
consent, which drops the route and leaves the text on the clipboard path; keysyms for accents
and emoji; the portal seen by the session probe and preferred on GNOME.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.desktop import GNOME, Desktop
from app.hotkeys import PortalHotkey
from app.portal import (
    APP_ID,
    BUS_NAME,
    OBJECT_PATH,
    REMOTE_DESKTOP,
    ConsentRefused,
    PortalClient,
    RemoteKeyboard,
    probe_portals,
)
from app.routes import PORTAL, WTYPE, choose
from app.wayland_inject import Insertion, PortalKeys, WaylandInserter

SYSTEM_PYTHON = "/usr/bin/python3"
TEMPLATE = Path(__file__).parent / "support" / "portal_mock.py"
MOCK = "org.freedesktop.DBus.Mock"


def mock_missing() -> str | None:
    if shutil.which("dbus-daemon") is None:
        return "needs dbus-daemon"
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import dbusmock"], capture_output=True,
                           timeout=30) if Path(SYSTEM_PYTHON).exists() else None
    if probe is None or probe.returncode != 0:
        return "needs python3-dbusmock for the system Python (apt: python3-dbusmock)"
    return None


@pytest.fixture
def portal_bus(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A private session bus with the mock portal on it; this process uses it."""
    reason = mock_missing()
    if reason:
        pytest.skip(reason)
    daemon = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                              stdout=subprocess.PIPE, text=True)
    assert daemon.stdout is not None
    address = daemon.stdout.readline().strip()
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
    mock = subprocess.Popen([SYSTEM_PYTHON, "-m", "dbusmock", "--template", str(TEMPLATE)],
                            env=dict(os.environ, DBUS_SESSION_BUS_ADDRESS=address),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_name(BUS_NAME)
        yield address
    finally:
        for process in (mock, daemon):
            process.terminate()
            process.wait(10)


def wait_for_name(name: str, timeout: float = 30.0) -> None:
    from jeepney import DBus
    from jeepney.io.blocking import open_dbus_connection

    with open_dbus_connection(bus="SESSION") as conn:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if conn.send_and_get_reply(DBus().NameHasOwner(name), timeout=5).body[0]:
                return
            time.sleep(0.05)  # the mock claims its name once its template is loaded
    raise AssertionError(f"{name} did not appear on the bus")


def mock_call(method: str, signature: str = "", *args: Any, interface: str = MOCK) -> Any:
    from jeepney import DBusAddress, new_method_call
    from jeepney.io.blocking import open_dbus_connection
    from jeepney.wrappers import unwrap_msg

    address = DBusAddress(OBJECT_PATH, bus_name=BUS_NAME, interface=interface)
    with open_dbus_connection(bus="SESSION") as conn:
        reply = conn.send_and_get_reply(new_method_call(address, method, signature, args),
                                        timeout=10)
    return unwrap_msg(reply)


def calls(method: str) -> list[tuple[Any, ...]]:
    """The arguments of each call the mock received of `method` (variants unwrapped, and the
    values of a{sv} options too)."""
    def plain(value: Any) -> Any:
        value = value[1]
        return {k: v[1] for k, v in value.items()} if isinstance(value, dict) else value

    return [tuple(plain(a) for a in args)
            for _stamp, args in mock_call("GetMethodCalls", "s", method)[0]]


def emit(member: str, session: str) -> None:
    args = [("o", session), ("s", "push-to-talk"), ("t", 1234), ("a{sv}", {})]
    mock_call("EmitSignal", "sssav", "org.freedesktop.portal.GlobalShortcuts", member,
              "osta{sv}", args)


def test_the_probe_sees_the_portals_and_gnome_prefers_them(portal_bus: str) -> None:
    versions, keyboard = probe_portals()
    assert versions == {"org.freedesktop.portal.GlobalShortcuts": 2, REMOTE_DESKTOP: 2}
    assert keyboard
    desktop = Desktop("wayland", GNOME, frozenset({"zwp_virtual_keyboard_manager_v1"}),
                      versions, frozenset({"wtype", "wl-copy"}), keyboard)
    routes = choose(desktop)
    assert routes.hotkey == PORTAL and routes.insert == (PORTAL, WTYPE)


@pytest.mark.parametrize("release_reported", [True, False])
def test_shortcut_press_and_release_from_the_portal(portal_bus: str,
                                                    release_reported: bool) -> None:
    actions: queue.Queue[str] = queue.Queue()
    bound: queue.Queue[str] = queue.Queue()
    errors: queue.Queue[str] = queue.Queue()
    hotkey = PortalHotkey("<ctrl>+<alt>+<space>", "hold", actions.put, bound.put, errors.put)
    hotkey.start()
    try:
        assert bound.get(timeout=10) == "CTRL+ALT+space"  # the preferred trigger, bound
        handle = hotkey.session.handle
        emit("Activated", handle)
        assert actions.get(timeout=10) == "press"
        if release_reported:  # hold to talk
            emit("Deactivated", handle)
            assert actions.get(timeout=10) == "release"
        else:  # this desktop reports no release: a second press stops (toggle)
            emit("Activated", handle)
            assert actions.get(timeout=10) == "release"
        emit("Activated", "/org/freedesktop/portal/desktop/session/someone/else")
        with pytest.raises(queue.Empty):
            actions.get(timeout=0.5)  # another app's shortcut is not ours
        hotkey.configure()  # Settings changed the keys: the desktop's dialog is asked for
        deadline = time.monotonic() + 10
        while not calls("ConfigureShortcuts") and time.monotonic() < deadline:
            time.sleep(0.05)  # the request goes out from the hotkey's thread
        assert [c[0] for c in calls("ConfigureShortcuts")] == [handle]
    finally:
        hotkey.stop()
    assert errors.empty()
    assert calls("Register") == [(APP_ID, {})]  # the host registry: an unsandboxed app is known
    (session, shortcuts, _parent, _options), = calls("BindShortcuts")
    assert shortcuts[0][0] == "push-to-talk" and session == handle


def keysyms() -> list[tuple[int, int]]:
    return [(int(args[2]), int(args[3])) for args in calls("NotifyKeyboardKeysym")]


def test_consent_is_asked_once_and_the_restore_token_is_kept(portal_bus: str,
                                                             tmp_path: Path) -> None:
    token = tmp_path / "config" / "portal-restore-token"
    first = RemoteKeyboard(token)
    first.start()
    assert mock_call("Dialogs", interface="org.sottovoce.Test") == (1,)
    assert token.read_text() == "restore-token-1"
    keys = PortalKeys(first)
    keys.type_text("Hé🎉")
    keys.paste("ctrl+v")
    first.close()
    assert keysyms() == [(0x48, 1), (0x48, 0), (0xE9, 1), (0xE9, 0),
                         (0x101F389, 1), (0x101F389, 0),  # U+1F389 as a Unicode keysym
                         (0xFFE3, 1), (0x76, 1), (0x76, 0), (0xFFE3, 0)]

    again = RemoteKeyboard(token)  # the next start of the app
    again.start()
    again.close()
    selected = calls("SelectDevices")[-1][1]
    assert selected["restore_token"] == "restore-token-1" and selected["persist_mode"] == 2
    assert mock_call("Dialogs", interface="org.sottovoce.Test") == (1,)  # not asked again
    assert token.read_text() == "restore-token-2"  # tokens are single use: the new one kept


def test_a_refused_consent_drops_the_route_and_says_why(portal_bus: str, tmp_path: Path) -> None:
    mock_call("SetConsent", "b", False, interface="org.sottovoce.Test")
    with pytest.raises(ConsentRefused):
        RemoteKeyboard(tmp_path / "token").start()
    assert not (tmp_path / "token").exists()

    answers: queue.Queue[tuple[bool, str]] = queue.Queue()
    inserter = WaylandInserter([PortalKeys(RemoteKeyboard(tmp_path / "token"))], None)
    inserter.start()
    try:
        inserter.submit(Insertion("Hello.", 0, "type", "ctrl+v",
                                  lambda ok, message: answers.put((ok, message))))
        ok, message = answers.get(timeout=30)
    finally:
        inserter.stop()
    assert not ok and "declined" in message, message
    assert inserter.route_names == [] and keysyms() == []


def test_no_portal_on_the_bus_is_a_clear_error(portal_bus: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    client = PortalClient()
    try:
        with pytest.raises(Exception, match="UnknownMethod|UnknownInterface|NotSupported"):
            client.call("org.freedesktop.portal.NoSuchPortal", "Nothing")
    finally:
        client.close()
