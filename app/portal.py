"""The xdg-desktop-portal routes, over the session bus with jeepney (pure Python, already a
dependency of the keyring): GlobalShortcuts for the push-to-talk hotkey, RemoteDesktop for key
events on GNOME and KDE, and the host registry that lets an unsandboxed app use them.

Portal calls that need the user (a consent dialog, a shortcut dialog) answer through a Request
object: the method returns its path and the result comes later as its `Response` signal
(0 = done, 1 = the user declined, 2 = failed). `PortalClient.request` hides that.

One `PortalClient` owns one D-Bus connection and is used from one thread only (jeepney's
blocking connection is not thread-safe): the hotkey listener and the inserter each have their
own. Interfaces and arguments: https://flatpak.github.io/xdg-desktop-portal/docs/ (GlobalShortcuts
v1-2, RemoteDesktop v2, org.freedesktop.host.portal.Registry).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

BUS_NAME = "org.freedesktop.portal.Desktop"
OBJECT_PATH = "/org/freedesktop/portal/desktop"
REQUEST = "org.freedesktop.portal.Request"
GLOBAL_SHORTCUTS = "org.freedesktop.portal.GlobalShortcuts"
REMOTE_DESKTOP = "org.freedesktop.portal.RemoteDesktop"
REGISTRY = "org.freedesktop.host.portal.Registry"
APP_ID = "io.github.sottovoce.Sottovoce"  # the desktop file's name (packaging/linux)
CALL_TIMEOUT_S = 5.0
CONSENT_TIMEOUT_S = 300.0  # a person reads the dialog
KEYBOARD = 1  # RemoteDesktop device type bit
PERSIST_UNTIL_REVOKED = 2
KEY_DOWN, KEY_UP = 1, 0


class PortalError(RuntimeError):
    """The portal is missing or failed; the message says which call."""


class ConsentRefused(PortalError):
    """The user declined the portal's dialog."""


def _jeepney() -> Any:
    try:
        import jeepney
        from jeepney.io import blocking
    except ImportError as exc:
        raise PortalError("the portal routes need jeepney: pip install jeepney") from exc
    return jeepney, blocking


def unwrap(results: dict[str, tuple[str, Any]]) -> dict[str, Any]:
    """a{sv} as jeepney gives it ({key: (signature, value)}) -> {key: value}."""
    return {key: value[1] for key, value in results.items()}


class PortalClient:
    """Calls on the portal object, each bounded in time."""

    def __init__(self, bus: str = "SESSION") -> None:
        jeepney, blocking = _jeepney()
        self._jeepney = jeepney
        try:
            self.conn = blocking.open_dbus_connection(bus=bus)
        except (OSError, KeyError, jeepney.AuthenticationError) as exc:
            raise PortalError(f"no D-Bus session bus: {exc}") from exc
        self._tokens = itertools.count(1)
        self._filters: dict[str, deque[Any]] = {}
        self.listen(REQUEST, "Response", path=None)

    @property
    def unique_name(self) -> str:
        return str(self.conn.unique_name)

    def close(self) -> None:
        self.conn.close()

    def listen(self, interface: str, member: str = "",
               path: str | None = OBJECT_PATH) -> deque[Any]:
        """Queue this interface's signals (those named `member` only, when given) from now on;
        `wait` takes them from the queue."""
        jeepney = self._jeepney
        keywords = {"type": "signal", "interface": interface}
        if member:
            keywords["member"] = member
        if path:
            keywords["path"] = path
        rule = jeepney.MatchRule(**keywords)
        handle = self.conn.filter(rule, bufsize=256)
        self._call(jeepney.message_bus.AddMatch(rule))
        self._filters[member or interface] = handle.queue
        return handle.queue  # type: ignore[no-any-return]

    def header(self, message: Any, name: str) -> str:
        """A header field of a message ("path", "member", ...) as text."""
        return str(message.header.fields.get(getattr(self._jeepney.HeaderFields, name), ""))

    def wait(self, queue: deque[Any], timeout: float) -> Any | None:
        """The next message of a listened-to queue, or None after `timeout` seconds."""
        if queue:
            return queue.popleft()
        try:
            return self.conn.recv_until_filtered(queue, timeout=max(timeout, 0.0))
        except TimeoutError:
            return None

    def _call(self, message: Any, timeout: float = CALL_TIMEOUT_S) -> tuple[Any, ...]:
        from jeepney.wrappers import unwrap_msg

        try:
            reply = self.conn.send_and_get_reply(message, timeout=timeout)
            return tuple(unwrap_msg(reply))
        except self._jeepney.DBusErrorResponse as exc:
            raise PortalError(f"{exc.name}: {' '.join(map(str, exc.data))}") from exc
        except TimeoutError as exc:
            raise PortalError(f"no answer within {timeout:g} s") from exc

    def call(self, interface: str, method: str, signature: str = "", *args: Any,
             timeout: float = CALL_TIMEOUT_S) -> tuple[Any, ...]:
        address = self._jeepney.DBusAddress(OBJECT_PATH, bus_name=BUS_NAME, interface=interface)
        message = self._jeepney.new_method_call(address, method, signature, args)
        try:
            return self._call(message, timeout)
        except PortalError as exc:
            raise PortalError(f"{interface.rsplit('.', 1)[-1]}.{method}: {exc}") from exc

    def property(self, interface: str, name: str) -> Any:
        address = self._jeepney.DBusAddress(OBJECT_PATH, bus_name=BUS_NAME, interface=interface)
        return self._call(self._jeepney.Properties(address).get(name))[0][1]

    def register(self, app_id: str = APP_ID) -> None:
        """Tell the portal which app this is (xdg-desktop-portal 1.19.1+); older portals don't
        have the registry and guess from the process, which is fine."""
        try:
            self.call(REGISTRY, "Register", "sa{sv}", app_id, {})
        except PortalError as exc:
            log.debug("portal host registry: %s", exc)

    def token(self) -> str:
        return f"sottovoce{next(self._tokens)}"

    def request(self, interface: str, method: str, signature: str, *args: Any,
                timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
        """Call a method whose last argument is an options a{sv} (given without its
        handle_token), then wait for its Request's Response; returns the results."""
        *leading, options = args
        options = {**options, "handle_token": ("s", self.token())}
        handle = str(self.call(interface, method, signature, *leading, options)[0])
        deadline = time.monotonic() + timeout
        responses = self._filters["Response"]
        while (message := self.wait(responses, deadline - time.monotonic())) is not None:
            if self.header(message, "path") != handle:
                continue  # another request's answer
            code, results = message.body
            if code == 1:
                raise ConsentRefused(f"{method}: declined in the portal's dialog")
            if code != 0:
                raise PortalError(f"{method}: the portal failed (response {code})")
            return unwrap(results)
        raise PortalError(f"{method}: no response within {timeout:g} s")


def probe_portals(timeout: float = CALL_TIMEOUT_S) -> tuple[dict[str, int], bool]:
    """{interface: version} of the portals this session offers, and whether RemoteDesktop can
    give keyboard devices. Raises PortalError without a session bus."""
    client = PortalClient()
    try:
        versions = {}
        for interface in (GLOBAL_SHORTCUTS, REMOTE_DESKTOP):
            try:
                versions[interface] = int(client.property(interface, "version"))
            except PortalError as exc:
                log.debug("portal %s: %s", interface, exc)
        keyboard = False
        if versions.get(REMOTE_DESKTOP):
            with suppress(PortalError):
                types = int(client.property(REMOTE_DESKTOP, "AvailableDeviceTypes"))
                keyboard = bool(types & KEYBOARD)
        return versions, keyboard
    finally:
        client.close()


# -- GlobalShortcuts ---------------------------------------------------------------------------

def portal_trigger(hotkey: str) -> str:
    """pynput's "<ctrl>+<alt>+<space>" as the shortcuts spec writes it: "CTRL+ALT+space"."""
    names = {"ctrl": "CTRL", "alt": "ALT", "shift": "SHIFT", "cmd": "LOGO", "super": "LOGO"}
    keys = [part.strip("<>").lower() for part in hotkey.split("+") if part.strip()]
    return "+".join(names.get(k, k) for k in keys)


class ShortcutSession:
    """One GlobalShortcuts session with one shortcut (push-to-talk)."""

    SHORTCUT = "push-to-talk"

    def __init__(self, client: PortalClient) -> None:
        self.client = client
        self.handle = ""
        self.signals = client.listen(GLOBAL_SHORTCUTS)  # Activated and Deactivated

    def bind(self, hotkey: str, description: str = "Push to talk (Sottovoce)") -> str:
        """Create the session and bind the shortcut; returns the trigger the desktop chose
        (it may differ from the preferred one, or be "" when the user has not set one)."""
        results = self.client.request(GLOBAL_SHORTCUTS, "CreateSession", "a{sv}",
                                      {"session_handle_token": ("s", self.client.token())})
        self.handle = str(results["session_handle"])
        shortcut = (self.SHORTCUT, {"description": ("s", description),
                                    "preferred_trigger": ("s", portal_trigger(hotkey))})
        bound = self.client.request(GLOBAL_SHORTCUTS, "BindShortcuts", "oa(sa{sv})sa{sv}",
                                    self.handle, [shortcut], "", {},
                                    timeout=CONSENT_TIMEOUT_S)
        for name, props in bound.get("shortcuts", []):
            if name == self.SHORTCUT:
                return str(unwrap(props).get("trigger_description", ""))
        return ""

    def configure(self) -> None:
        """Open the desktop's dialog to change the shortcut (GlobalShortcuts version 2)."""
        self.client.call(GLOBAL_SHORTCUTS, "ConfigureShortcuts", "osa{sv}", self.handle, "", {})

    def next_event(self, timeout: float) -> str | None:
        """"activated" / "deactivated" for our shortcut, or None when nothing came in time."""
        deadline = time.monotonic() + timeout
        while (message := self.client.wait(self.signals, deadline - time.monotonic())):
            member = self.client.header(message, "member")
            if member not in ("Activated", "Deactivated"):
                continue
            session, shortcut, *_ = message.body
            if str(session) == self.handle and shortcut == self.SHORTCUT:
                return member.lower()
        return None


# -- RemoteDesktop -----------------------------------------------------------------------------

class RemoteKeyboard:
    """A RemoteDesktop session with a keyboard, kept open while the app runs. The first start
    shows the desktop's consent dialog; the restore token it returns (one use each) is kept in
    ``token_file``, so later starts are not asked again until the user revokes it."""

    def __init__(self, token_file: Path,
                 client_factory: Callable[[], PortalClient] = PortalClient) -> None:
        self.token_file = token_file
        self._client_factory = client_factory
        self.client: PortalClient | None = None
        self.handle = ""

    def start(self) -> None:
        client = self._client_factory()
        try:
            client.register()
            version = int(client.property(REMOTE_DESKTOP, "version"))
            session = client.request(REMOTE_DESKTOP, "CreateSession", "a{sv}",
                                     {"session_handle_token": ("s", client.token())})
            handle = str(session["session_handle"])
            select: dict[str, tuple[str, Any]] = {"types": ("u", KEYBOARD)}
            token = self._read_token()
            if version >= 2:
                select["persist_mode"] = ("u", PERSIST_UNTIL_REVOKED)
                if token:
                    select["restore_token"] = ("s", token)
            client.request(REMOTE_DESKTOP, "SelectDevices", "oa{sv}", handle, select)
            started = client.request(REMOTE_DESKTOP, "Start", "osa{sv}", handle, "", {},
                                     timeout=CONSENT_TIMEOUT_S)
            if not int(started.get("devices", 0)) & KEYBOARD:
                raise ConsentRefused("the keyboard was not granted in the portal's dialog")
        except BaseException:
            client.close()
            raise
        self._save_token(str(started.get("restore_token", "")))
        self.client, self.handle = client, handle
        log.info("RemoteDesktop portal session started (keyboard)")

    def key(self, keysym: int, down: bool) -> None:
        if self.client is None:
            self.start()
        assert self.client is not None
        self.client.call(REMOTE_DESKTOP, "NotifyKeyboardKeysym", "oa{sv}iu", self.handle, {},
                         keysym, KEY_DOWN if down else KEY_UP)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def _read_token(self) -> str:
        try:
            return self.token_file.read_text(encoding="utf-8").strip()
        except OSError:
            return ""

    def _save_token(self, token: str) -> None:
        if not token:
            return
        from engine.atomic import OutputWriteError, atomic_write_text, private_dir

        try:
            private_dir(self.token_file.parent)
            atomic_write_text(self.token_file, token, private=True)
        except (OSError, OutputWriteError) as exc:
            log.warning("could not keep the portal's restore token: %s", exc)


def char_keysym(char: str) -> int:
    """The X keysym for a character (what NotifyKeyboardKeysym takes): Latin-1 as itself,
    newline/tab as Return/Tab, anything else as a Unicode keysym (0x1000000 + code point)."""
    special = {"\n": 0xFF0D, "\t": 0xFF09, "\b": 0xFF08}
    if char in special:
        return special[char]
    code = ord(char)
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code
    return 0x1000000 + code
