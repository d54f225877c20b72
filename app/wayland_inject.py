"""Dictated text into the focused app on Wayland, where X11 key events never reach native apps.

Key routes (app.routes picks their order for the compositor; one that fails is dropped for the
rest of the session and the next one is tried at once, so no text is lost to a broken route):
- `Wtype`: the virtual-keyboard protocol (wlroots, Hyprland). Each `wtype` run makes a new
  virtual keyboard whose keymap the compositor passes to the focused app with the first key;
  sent at once, that first key is lost (`wtype "Hello"` types "ello" into a Qt field on sway),
  so every run first waits SETTLE_MS for the keymap to be in place.
- `PortalKeys`: the RemoteDesktop portal's keysyms (GNOME, KDE), consent asked once.
- `Ydotool`: uinput, only when the user opted in (it needs a root daemon and types ASCII only).
- `app.ibus_route.IBusRoute` (first, where the session's input method is IBus) commits text
  rather than keys (`commits_text`): paste mode commits too, with no clipboard step.
Paste mode puts the text on the Wayland clipboard with `wl-copy` (Qt's own clipboard is only
valid while one of our windows has focus), sends the paste keys through the first working key
route and restores the user's clipboard afterwards (unless something newer was copied).
Type mode sends the characters themselves. With no key route left the text stays on the
clipboard and a notification says "press Ctrl+V".

`WaylandInserter` runs all of this on one thread of its own (tools are processes and portal
calls block), fed by a queue, so insertions keep their order and the GUI never waits.
"""

from __future__ import annotations

import logging
import queue
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from app.portal import PortalError, RemoteKeyboard, char_keysym
from engine.core.sanitize import clean

log = logging.getLogger(__name__)

SETTLE_MS = 40  # a new virtual keyboard loses its first key without a pause (docs/evidence.md)
TOOL_TIMEOUT_S = 15.0
RESTORE_DELAY_S = 0.6
CLIPBOARD_CONFIRM_S = 2.0  # as on X11 (app.inject.RESTORE_DELAY_MS)
TEXT_TYPES = ("text/plain;charset=utf-8", "UTF8_STRING", "text/plain")
CTRL, SHIFT, INSERT, BACKSPACE, V = 0xFFE3, 0xFFE1, 0xFF63, 0xFF08, 0x76


class RouteError(RuntimeError):
    """A route could not deliver; the message says why. A transient one concerns only this
    text and window (the route stays for the next)."""

    transient = False


class KeyRoute(Protocol):
    name: str
    commits_text: bool  # takes text, not keys: paste mode needs no clipboard step

    def prepare(self) -> None: ...  # start what it needs (the portal: its consent dialog)
    def type_text(self, text: str) -> None: ...
    def paste(self, keys: str) -> None: ...
    def backspace(self, count: int) -> None: ...
    def close(self) -> None: ...


def run_tool(args: list[str], data: bytes | None = None, *, output: bool = True) -> bytes:
    """Run a helper program; RouteError when it is missing, fails or hangs. `output=False` for
    tools that leave a child serving in the background (wl-copy): waiting for its output would
    wait for that child."""
    sink = subprocess.PIPE if output else subprocess.DEVNULL
    try:
        done = subprocess.run(args, input=data, stdout=sink, stderr=sink,
                              timeout=TOOL_TIMEOUT_S, check=False)
    except FileNotFoundError as exc:
        raise RouteError(f"{args[0]} is not installed") from exc
    except subprocess.TimeoutExpired as exc:
        raise RouteError(f"{args[0]} did not finish within {TOOL_TIMEOUT_S:g} s") from exc
    if done.returncode != 0:
        why = (done.stderr or b"").decode(errors="replace").strip() or f"exit {done.returncode}"
        raise RouteError(f"{args[0]}: {why}")
    return done.stdout or b""


class Wtype:
    name = "wtype"
    commits_text = False

    def prepare(self) -> None:
        return None

    def _run(self, *commands: str) -> None:
        run_tool(["wtype", "-s", str(SETTLE_MS), *commands])

    def type_text(self, text: str) -> None:
        self._run("--", text)

    def paste(self, keys: str) -> None:
        modifier, key = ("shift", "Insert") if keys == "shift+insert" else ("ctrl", "v")
        self._run("-M", modifier, "-k", key, "-m", modifier)

    def backspace(self, count: int) -> None:
        if count > 0:
            self._run(*("-k", "BackSpace") * count)

    def close(self) -> None:
        return None


class Ydotool:
    """Linux input event codes (ydotool key CODE:1 / CODE:0)."""

    name = "ydotool"
    commits_text = False

    def prepare(self) -> None:
        return None

    def type_text(self, text: str) -> None:
        if not text.isascii():
            raise RouteError("ydotool types ASCII only (use paste mode for accents, CJK, emoji)")
        run_tool(["ydotool", "type", "--", text])

    def paste(self, keys: str) -> None:
        modifier, key = (42, 110) if keys == "shift+insert" else (29, 47)
        run_tool(["ydotool", "key", f"{modifier}:1", f"{key}:1", f"{key}:0", f"{modifier}:0"])

    def backspace(self, count: int) -> None:
        if count > 0:
            run_tool(["ydotool", "key", *("14:1", "14:0") * count])

    def close(self) -> None:
        return None


class PortalKeys:
    name = "portal"
    commits_text = False

    def __init__(self, keyboard: RemoteKeyboard) -> None:
        self.keyboard = keyboard

    def prepare(self) -> None:
        try:
            self.keyboard.start()
        except PortalError as exc:
            raise RouteError(f"RemoteDesktop portal: {exc}") from exc

    def _tap(self, *keysyms: int) -> None:
        """Press the keysyms in order, release them in reverse."""
        try:
            for sym in keysyms:
                self.keyboard.key(sym, True)
            for sym in reversed(keysyms):
                self.keyboard.key(sym, False)
        except PortalError as exc:
            raise RouteError(f"RemoteDesktop portal: {exc}") from exc

    def type_text(self, text: str) -> None:
        for char in text:
            self._tap(char_keysym(char))

    def paste(self, keys: str) -> None:
        self._tap(*((SHIFT, INSERT) if keys == "shift+insert" else (CTRL, V)))

    def backspace(self, count: int) -> None:
        for _ in range(count):
            self._tap(BACKSPACE)

    def close(self) -> None:
        self.keyboard.close()


class WlClipboard:
    """The Wayland clipboard through wl-clipboard (data-control where the compositor has it)."""

    def read(self) -> tuple[str, bytes] | None:
        """(type, data) of what is on the clipboard now, preferring text; None when empty."""
        try:
            offered = run_tool(["wl-paste", "--list-types"]).decode(errors="replace").split()
        except RouteError:
            return None  # "Nothing is copied" is an error exit
        if not offered:
            return None
        kind = next((t for t in TEXT_TYPES if t in offered), offered[0])
        return kind, run_tool(["wl-paste", "--no-newline", "--type", kind])

    def text(self) -> str | None:
        content = self.read()
        return content[1].decode(errors="replace") if content else None

    def write_text(self, text: str) -> None:
        run_tool(["wl-copy"], text.encode(), output=False)

    def write(self, content: tuple[str, bytes] | None) -> None:
        if content is None:
            run_tool(["wl-copy", "--clear"], output=False)
        else:
            run_tool(["wl-copy", "--type", content[0]], content[1], output=False)


@dataclass
class Insertion:
    text: str
    delete_chars: int
    mode: str  # paste | type
    paste_keys: str
    done: Callable[[bool, str], None]
    timings: list[tuple[str, float]] = field(default_factory=list)


class WaylandInserter:
    """One thread that inserts in order; `routes` are tried first to last."""

    def __init__(self, routes: list[KeyRoute], clipboard: WlClipboard | None,
                 notify: Callable[[str], None] = lambda _message: None,
                 restore_delay_s: float = RESTORE_DELAY_S) -> None:
        self.routes = list(routes)
        self.clipboard = clipboard
        self.notify = notify
        self.restore_delay_s = restore_delay_s
        self.failures: dict[str, str] = {}  # route name -> why it was dropped
        self._jobs: queue.Queue[Insertion | None] = queue.Queue()
        self._saved: tuple[str, bytes] | None = None
        self._pasted: str | None = None  # our text on the clipboard, until restored
        self._restore_at: float | None = None
        self._thread: threading.Thread | None = None

    @property
    def route_names(self) -> list[str]:
        return [r.name for r in self.routes]

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sottovoce-wayland-insert",
                                        daemon=True)
        self._thread.start()

    def submit(self, job: Insertion) -> None:
        # Also cleaned here: a caller other than app.inject must not type escape sequences.
        self._jobs.put(replace(job, text=clean(job.text, newlines=True, tabs=True)))

    def stop(self, timeout: float = 5.0) -> None:
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join(timeout)
            self._thread = None
        for route in self.routes:
            route.close()

    def _prepare(self) -> None:
        """Routes that need a session (the portal: its consent dialog) start it now."""
        for route in list(self.routes):
            try:
                route.prepare()
            except RouteError as exc:
                log.warning("insertion route %s unavailable: %s", route.name, exc)
                self.failures[route.name] = str(exc)
                self.routes.remove(route)

    def _run(self) -> None:
        self._prepare()
        while True:
            wait = None if self._restore_at is None else max(0.0, self._restore_at - time.monotonic())
            try:
                job = self._jobs.get(timeout=wait)
            except queue.Empty:
                self._restore()
                continue
            if job is None:
                self._restore()
                return
            try:
                ok, message = self.insert(job)
            except Exception as exc:  # noqa: BLE001 - top of the thread: report, keep serving
                log.exception("insertion failed")
                ok, message = False, f"Could not insert text: {exc}"
            job.done(ok, message)

    def insert(self, job: Insertion) -> tuple[bool, str]:
        commits = bool(self.routes) and self.routes[0].commits_text
        paste = (job.mode == "paste" and self.clipboard is not None and bool(job.text)
                 and not commits)
        if paste:
            try:
                self._put_on_clipboard(job.text)
                job.timings.append(("clipboard_set", time.monotonic()))
            except RouteError as exc:
                log.warning("clipboard unavailable (%s): typing instead", exc)
                paste = False
        deleted = job.delete_chars <= 0
        for route in list(self.routes):
            try:
                if not deleted:
                    route.backspace(job.delete_chars)
                    deleted = True
                if paste:
                    route.paste(job.paste_keys)
                    job.timings.append(("keys_sent", time.monotonic()))
                    self._restore_at = time.monotonic() + self.restore_delay_s
                elif job.text:
                    route.type_text(job.text)
                    job.timings.append(("typed", time.monotonic()))
            except RouteError as exc:
                log.warning("insertion route %s failed: %s", route.name, exc)
                if not exc.transient:  # else: only this text, this window
                    self.failures[route.name] = str(exc)
                    self.routes.remove(route)
                continue
            return True, done_message(job, paste, route.name)
        return self._last_resort(job)

    def _put_on_clipboard(self, text: str) -> None:
        """Put the text on the clipboard and make sure it is there before the paste keys go:
        wl-copy hands the selection to a child it forks, and a paste that comes first gets
        the old clipboard (seen on a busy machine)."""
        assert self.clipboard is not None
        if self._pasted is None:  # back-to-back pastes: the clipboard holds our own text
            self._saved = self.clipboard.read()
        self.clipboard.write_text(text)
        self._pasted = text
        deadline = time.monotonic() + CLIPBOARD_CONFIRM_S
        while self.clipboard.text() != text:  # each read is a wl-paste run: no busy loop
            if time.monotonic() > deadline:
                raise RouteError(f"the clipboard did not take the text within "
                                 f"{CLIPBOARD_CONFIRM_S:g} s")

    def _restore(self) -> None:
        self._restore_at = None
        pasted, self._pasted = self._pasted, None
        saved, self._saved = self._saved, None
        if pasted is None or self.clipboard is None:
            return
        try:
            if self.clipboard.text() != pasted:
                return  # something newer was copied: it wins
            self.clipboard.write(saved)
        except RouteError as exc:
            log.warning("could not restore the clipboard: %s", exc)

    def _last_resort(self, job: Insertion) -> tuple[bool, str]:
        why = "; ".join(f"{name}: {reason}" for name, reason in self.failures.items())
        why = why or "no way to send keys on this desktop"
        if self.clipboard is None or not job.text.strip():
            return False, f"Could not insert text ({why})"
        try:
            self._restore_at, self._pasted, self._saved = None, None, None
            self.clipboard.write_text(job.text.strip())
        except RouteError as exc:
            return False, f"Could not insert text ({why}) nor copy it ({exc})"
        self.notify("Dictated text is on the clipboard: press Ctrl+V")
        return False, f"Could not send keys ({why}); the text is on the clipboard: press Ctrl+V"


def done_message(job: Insertion, pasted: bool, route: str) -> str:
    count = len(job.text.strip())
    done = (f"Pasted {count} characters" if pasted else f"Typed {count} characters") \
        if job.text else ""
    if job.delete_chars:
        done = f"Deleted {job.delete_chars} characters" + (f"; {done.lower()}" if done else "")
    return f"{done} (Wayland, {route})"


def notify(message: str) -> None:
    """A desktop notification (org.freedesktop.Notifications); silent where there is none."""
    try:
        from jeepney import DBusAddress, new_method_call
        from jeepney.io.blocking import open_dbus_connection
    except ImportError:
        return
    address = DBusAddress("/org/freedesktop/Notifications", bus_name="org.freedesktop.Notifications",
                          interface="org.freedesktop.Notifications")
    try:
        with open_dbus_connection(bus="SESSION") as conn:
            conn.send_and_get_reply(new_method_call(
                address, "Notify", "susssasa{sv}i",
                ("Sottovoce", 0, "", "Sottovoce", message, [], {}, 10000)), timeout=2.0)
    except Exception as exc:  # noqa: BLE001 - a notification is a courtesy
        log.info("no notification (%s): %s", exc, message)
