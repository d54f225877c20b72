"""The focused text field, read through the accessibility bus (AT-SPI over D-Bus, with jeepney).

AT-SPI is what screen readers use: each app that has accessibility on (GTK always, Qt when the
desktop's org.a11y.Status says so or QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1) exports its widgets on
a separate bus whose address the session bus's org.a11y.Bus gives. The protocol has no "which
object has focus" call, so `focused()` walks from the registry's desktop through each app's
active window to the object whose state has FOCUSED, visiting at most MAX_NODES objects and only
showing ones (on X11, of the app whose window has the X input focus). `Field` is what was found: its role, whether it is a password field, and (when it
implements org.a11y.atspi.Text) its caret and the text around it.

No Qt here: app.verify uses this from a worker thread.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

from jeepney import DBusAddress, MessageType, Properties, new_method_call
from jeepney.io.blocking import DBusConnection, open_dbus_connection

log = logging.getLogger(__name__)

REGISTRY = "org.a11y.atspi.Registry"
ROOT = "/org/a11y/atspi/accessible/root"
ACCESSIBLE = "org.a11y.atspi.Accessible"
TEXT = "org.a11y.atspi.Text"
CALL_TIMEOUT_S = 1.0  # a hung app must not hold dictation up
MAX_NODES = 600  # a walk through a huge document's tree is cut short: the field is "unknown"
# AT-SPI enums (at-spi2-core atspi-constants.h).
ROLE_PASSWORD_TEXT = 40
ROLE_TERMINAL = 59
STATE_ACTIVE, STATE_EDITABLE, STATE_FOCUSED = 1, 7, 12
STATE_SHOWING, STATE_MANAGES_DESCENDANTS = 25, 17


class AccessibilityError(RuntimeError):
    """The accessibility bus is missing or an app did not answer."""


@dataclass(frozen=True)
class Field:
    """The focused object: where it lives, what it is, and its text if it exposes any."""

    bus_name: str
    path: str
    role: int
    states: frozenset[int]
    has_text: bool

    @property
    def password(self) -> bool:
        return self.role == ROLE_PASSWORD_TEXT

    @property
    def readable(self) -> bool:
        """Its text can be read back (a terminal's can, but it is not a field: prompts echo)."""
        return self.has_text and not self.password and self.role != ROLE_TERMINAL


def has_state(states: list[int], state: int) -> bool:
    """AT-SPI states come as two 32-bit words of a bit set."""
    word, bit = divmod(state, 32)
    return word < len(states) and bool(states[word] >> bit & 1)


def state_set(states: list[int]) -> frozenset[int]:
    return frozenset(s for s in range(32 * len(states)) if has_state(states, s))


def bus_address() -> str:
    """The accessibility bus's address, from org.a11y.Bus on the session bus."""
    bus = DBusAddress("/org/a11y/bus", bus_name="org.a11y.Bus", interface="org.a11y.Bus")
    try:
        with open_dbus_connection(bus="SESSION") as session:
            reply = session.send_and_get_reply(new_method_call(bus, "GetAddress"),
                                               timeout=CALL_TIMEOUT_S * 5)
    except Exception as exc:  # noqa: BLE001 - no session bus or no at-spi: nothing to read
        raise AccessibilityError(f"no accessibility bus: {exc}") from exc
    if reply.header.message_type == MessageType.error or not reply.body[0]:
        raise AccessibilityError(f"no accessibility bus: {reply.body}")
    return str(reply.body[0])


class AccessibilityBus:
    """One connection to the accessibility bus; blocking calls (use it off the GUI thread)."""

    def __init__(self, address: str | None = None) -> None:
        try:
            self.conn: DBusConnection = open_dbus_connection(address or bus_address())
        except AccessibilityError:
            raise
        except Exception as exc:  # noqa: BLE001 - any connect failure means "cannot verify"
            raise AccessibilityError(f"cannot connect to the accessibility bus: {exc}") from exc

    def close(self) -> None:
        self.conn.close()

    def call(self, name: str, path: str, interface: str, method: str,
             signature: str | None = None, body: tuple[Any, ...] = ()) -> Any:
        address = DBusAddress(path, bus_name=name, interface=interface)
        return self._send(new_method_call(address, method, signature, body))

    def prop(self, name: str, path: str, interface: str, prop: str) -> Any:
        address = DBusAddress(path, bus_name=name, interface=interface)
        return self._send(Properties(address).get(prop))[1]

    def _send(self, message: Any) -> Any:
        try:
            reply = self.conn.send_and_get_reply(message, timeout=CALL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a timeout or a closed connection
            raise AccessibilityError(f"accessibility call failed: {exc}") from exc
        if reply.header.message_type == MessageType.error:
            raise AccessibilityError(f"accessibility call failed: {reply.body}")
        body = reply.body
        return body[0] if len(body) == 1 else body

    def children(self, name: str, path: str) -> list[tuple[str, str]]:
        return [(str(n), str(p)) for n, p in self.call(name, path, ACCESSIBLE, "GetChildren")]

    def states(self, name: str, path: str) -> list[int]:
        return list(self.call(name, path, ACCESSIBLE, "GetState"))

    def field(self, name: str, path: str, states: list[int]) -> Field:
        role = int(self.call(name, path, ACCESSIBLE, "GetRole"))
        interfaces = self.call(name, path, ACCESSIBLE, "GetInterfaces")
        return Field(name, path, role, state_set(states), TEXT in interfaces)

    def focused(self, pid: int | None = None) -> Field | None:
        """The focused object of the active window. With `pid` (X11: the focused window's
        process) only that app's windows count, active or not; without it (Wayland) only
        windows that say they are active: a field focused in a window behind is never it."""
        windows: list[tuple[str, str]] = []
        active: list[tuple[str, str]] = []
        for app in self.children(REGISTRY, ROOT):
            try:
                if pid is not None and self.pid(app[0]) != pid:
                    continue
                for window in self.children(*app):
                    windows.append(window)
                    if has_state(self.states(*window), STATE_ACTIVE):
                        active.append(window)
            except AccessibilityError as exc:  # one hung or dying app must not hide the rest
                log.debug("skipping an accessible app: %s", exc)
        if pid is None:
            return self._search(active)
        return self._search(active) or (None if active else self._search(windows))

    def pid(self, bus_name: str) -> int:
        """The process behind a connection to the accessibility bus."""
        return int(self.call("org.freedesktop.DBus", "/org/freedesktop/DBus",
                             "org.freedesktop.DBus", "GetConnectionUnixProcessID", "s",
                             (bus_name,)))

    def _search(self, roots: list[tuple[str, str]]) -> Field | None:
        """Breadth first under `roots` for a FOCUSED object, showing subtrees only."""
        todo = deque(roots)
        visited = 0
        while todo and visited < MAX_NODES:
            node = todo.popleft()
            visited += 1
            try:
                states = self.states(*node)
                if has_state(states, STATE_FOCUSED):
                    return self.field(*node, states)
                showing = node in roots or has_state(states, STATE_SHOWING)
                if showing and not has_state(states, STATE_MANAGES_DESCENDANTS):
                    todo.extend(self.children(*node))
            except AccessibilityError as exc:
                log.debug("skipping an accessible object: %s", exc)
        return None

    def caret(self, field: Field) -> int:
        return int(self.prop(field.bus_name, field.path, TEXT, "CaretOffset"))

    def count(self, field: Field) -> int:
        return int(self.prop(field.bus_name, field.path, TEXT, "CharacterCount"))

    def text(self, field: Field, start: int, end: int) -> str:
        """Characters start..end (end -1: to the end)."""
        return str(self.call(field.bus_name, field.path, TEXT, "GetText", "ii", (start, end)))
