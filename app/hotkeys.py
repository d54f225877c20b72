"""Global push-to-talk hotkey (X11 key grab; pynput on Windows, macOS), "hold" or "toggle" mode.

`HotkeyMachine` is the logic, pure and testable: feed it key downs and ups, it says when talking
starts and stops. `GlobalHotkey` feeds it from the X11 grab's thread (app.x11_hotkey) or a
pynput listener thread and calls back (the caller hops to the GUI thread). On Wayland global
key grabs don't exist; the desktop's own shortcut settings can bind `sottovoce ptt
press|release` or `sottovoce toggle` instead (app.control).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from engine.errors import missing_dependency

log = logging.getLogger(__name__)

PRESS, RELEASE, TAP = "press", "release", "tap"


class HotkeyUnavailableError(RuntimeError):
    """Global hotkeys cannot work in this session; the message says what to use instead."""


class HotkeyMachine:
    """Decides when a chord of keys starts and ends talking.

    hold: talking starts when the whole chord is down and ends when any chord key goes up.
    toggle: each full press of the chord flips talking on or off (key-up does nothing).
    tap: a one-shot action ("tap") once the whole chord was down and every chord key is up again
      (paste-last: the paste must not see the user's Ctrl+Alt still held).
    Auto-repeat (a key reported down again while down) is ignored.
    """

    def __init__(self, chord: Iterable[Hashable], mode: str = "hold") -> None:
        if mode not in ("hold", "toggle", "tap"):
            raise ValueError("mode must be 'hold', 'toggle' or 'tap'")
        self.chord = frozenset(chord)
        if not self.chord:
            raise ValueError("a hotkey needs at least one key")
        self.mode = mode
        self.talking = False
        self._down: set[Hashable] = set()
        self._chord_latched = False  # the chord has fired and not yet been let go

    def key_down(self, key: Hashable) -> str | None:
        if key in self._down:
            return None
        self._down.add(key)
        if self._chord_latched or not self.chord <= self._down:
            return None
        self._chord_latched = True
        if self.mode == "tap":
            return None
        if self.mode == "toggle" and self.talking:
            self.talking = False
            return RELEASE
        self.talking = True
        return PRESS

    def key_up(self, key: Hashable) -> str | None:
        self._down.discard(key)
        if key not in self.chord or not self._chord_latched:
            return None
        if self.mode == "tap":
            if self.chord & self._down:
                return None
            self._chord_latched = False
            return TAP
        self._chord_latched = False
        if self.mode == "hold" and self.talking:
            self.talking = False
            return RELEASE
        return None

    def reset(self) -> str | None:
        """Forget held keys (focus change, listener restart); ends talking in hold mode."""
        self._down.clear()
        self._chord_latched = False
        if self.talking and self.mode == "hold":
            self.talking = False
            return RELEASE
        return None


WAYLAND_ADVICE = ("bind `sottovoce ptt press` / `sottovoce ptt release` (or `sottovoce toggle`) "
                  "in your desktop's keyboard shortcut settings")


def session_supports_global_hotkeys(env: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """Whether a global key listener can work in this session, and a note for the user (why
    not, or its limits)."""
    env = os.environ if env is None else env
    wayland = bool(env.get("WAYLAND_DISPLAY")) or env.get("XDG_SESSION_TYPE") == "wayland"
    if wayland and not env.get("DISPLAY"):
        return False, f"Wayland session without XWayland: {WAYLAND_ADVICE}"
    if wayland:
        # XWayland only reports keys while one of its own (X11) windows has focus.
        return True, f"Wayland session: the hotkey only works in X11 apps; {WAYLAND_ADVICE}"
    if sys.platform.startswith("linux") and not env.get("DISPLAY"):
        return False, f"no X display: global hotkeys need X11; {WAYLAND_ADVICE}"
    return True, ""


def uses_x11(env: Mapping[str, str] | None = None) -> bool:
    """Whether keys go through X11 here (Linux/BSD with a DISPLAY, XWayland included)."""
    env = os.environ if env is None else env
    return sys.platform not in ("win32", "darwin") and bool(env.get("DISPLAY"))


class GlobalHotkey:
    """Listens system-wide for the chord and calls `on_action("press" | "release")` from the
    listener's thread. On X11 the chord is grabbed (app.x11_hotkey), so the focused app never
    sees it; elsewhere pynput's listener observes it. `start()` raises HotkeyUnavailableError
    with advice when it can't work."""

    def __init__(self, hotkey: str, mode: str, on_action: Callable[[str], None]) -> None:
        self._hotkey = hotkey
        self._mode = mode
        self._on_action = on_action
        self._listener: Any = None
        self._grab: Any = None  # app.x11_hotkey.GrabbedChord on X11
        self._machine: HotkeyMachine | None = None

    def start(self) -> str:
        """Install the listener (on X11: grab the chord); returns a note on its limits in this
        session ("" if none)."""
        ok, note = session_supports_global_hotkeys()
        if not ok:
            raise HotkeyUnavailableError(note)
        if uses_x11():
            self._start_x11()
        else:
            self._start_pynput()
        log.info("global hotkey %s (%s mode) active", self._hotkey, self._mode)
        return note

    def _start_x11(self) -> None:
        from app.x11_hotkey import GrabbedChord, GrabError

        try:
            import Xlib  # noqa: F401 - python-xlib, the X11 client library
        except ImportError as exc:
            raise HotkeyUnavailableError(str(missing_dependency("python-xlib", "gui"))) from exc
        grab = GrabbedChord(self._hotkey, self._feed_part)
        self._machine = HotkeyMachine(grab.parts, self._mode)
        try:
            grab.start()
        except GrabError as exc:
            raise HotkeyUnavailableError(str(exc)) from exc
        self._grab = grab

    def _start_pynput(self) -> None:
        keyboard = pynput_keyboard()
        try:
            chord = keyboard.HotKey.parse(self._hotkey)
        except ValueError as exc:
            raise HotkeyUnavailableError(f"invalid hotkey {self._hotkey!r}: {exc}") from exc
        self._machine = HotkeyMachine([_normalise(k) for k in chord], self._mode)
        listener = keyboard.Listener(on_press=self._on_press, on_release=self._on_release)
        self._listener = listener
        listener.start()
        listener.wait()  # returns once the OS hook is installed (pynput's ready event)

    def stop(self) -> None:
        if self._grab is not None:
            self._grab.stop()
            self._grab = None
        if self._listener is not None:
            self._listener.stop()
            self._listener = None

    def _on_press(self, key: Any) -> None:
        self._feed(key, down=True)

    def _on_release(self, key: Any) -> None:
        self._feed(key, down=False)

    def _feed(self, key: Any, down: bool) -> None:
        listener = self._listener
        if listener is None or key is None:
            return
        self._feed_part(_normalise(listener.canonical(key)), down)

    def _feed_part(self, part: Hashable, down: bool) -> None:
        machine = self._machine
        if machine is None:
            return
        action = machine.key_down(part) if down else machine.key_up(part)
        if action is not None:
            try:
                self._on_action(action)
            except Exception:  # noqa: BLE001 - top of the listener thread; keep listening
                log.exception("hotkey callback failed")


class ShortcutMachine:
    """Portal shortcut events -> push-to-talk actions. hold: press on Activated, release on
    Deactivated; a desktop that never reports the release (no Deactivated seen yet) gets toggle
    behaviour, so a second Activated stops talking. toggle: each Activated flips."""

    def __init__(self, mode: str = "hold") -> None:
        self.mode = mode
        self.talking = False
        self.release_reported = False

    def activated(self) -> str:
        if self.talking and (self.mode == "toggle" or not self.release_reported):
            self.talking = False
            return RELEASE
        self.talking = True
        return PRESS

    def deactivated(self) -> str | None:
        self.release_reported = True
        if self.mode == "hold" and self.talking:
            self.talking = False
            return RELEASE
        return None


class PortalHotkey:
    """The push-to-talk shortcut through the GlobalShortcuts portal, on a thread of its own:
    it registers the app, binds the shortcut (the desktop may ask the user once) and turns
    Activated/Deactivated signals into `on_action("press" | "release")`. `on_bound(trigger)`
    says which keys the desktop chose; `on_error(message)` when the portal refused or failed
    (the shortcut is off then); `on_notice(message)` when only a request failed."""

    def __init__(self, hotkey: str, mode: str, on_action: Callable[[str], None],
                 on_bound: Callable[[str], None], on_error: Callable[[str], None],
                 on_notice: Callable[[str], None] = log.warning) -> None:
        self._hotkey = hotkey
        self.machine = ShortcutMachine(mode)
        self._on_action, self._on_bound, self._on_error = on_action, on_bound, on_error
        self._on_notice = on_notice  # a failed request; the shortcut itself still works
        self._stop = threading.Event()
        self._configure = threading.Event()
        self._thread: threading.Thread | None = None
        self.session: Any = None

    def configure(self) -> None:
        """Ask the desktop to show its dialog for changing the keys (GlobalShortcuts version
        2; older desktops change them in their own shortcut settings)."""
        self._configure.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sottovoce-portal-hotkey",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
            self._thread = None

    def _run(self) -> None:
        from app.portal import PortalClient, PortalError, ShortcutSession

        try:
            client = PortalClient()
        except PortalError as exc:
            self._on_error(str(exc))
            return
        try:
            client.register()
            self.session = ShortcutSession(client)
            trigger = self.session.bind(self._hotkey)
            log.info("portal shortcut bound: %s", trigger or "(no keys set yet)")
            self._on_bound(trigger)
            while not self._stop.is_set():
                if self._configure.is_set():
                    self._configure.clear()
                    try:
                        self.session.configure()
                    except PortalError as exc:
                        self._on_notice(f"the desktop cannot change the keys here ({exc}); "
                                        "change them in its keyboard shortcut settings")
                event = self.session.next_event(0.5)
                action = (self.machine.activated() if event == "activated" else
                          self.machine.deactivated() if event == "deactivated" else None)
                if action is not None:
                    self._on_action(action)
        except Exception as exc:  # noqa: BLE001 - top of the thread: report, never crash
            log.warning("portal shortcut failed: %s", exc)
            self._on_error(str(exc))
        finally:
            client.close()


def _normalise(key: Any) -> Hashable:
    """Left/right modifier variants compare equal after pynput's canonical(); characters are
    compared case-insensitively so Shift doesn't break a chord."""
    char = getattr(key, "char", None)
    if isinstance(char, str):
        return ("char", char.lower())
    return key  # type: ignore[no-any-return]


def pynput_keyboard() -> Any:
    try:
        from pynput import keyboard
    except ImportError as exc:
        if "pynput" in str(getattr(exc, "name", "")) and "platform" not in str(exc):
            raise missing_dependency("pynput", "gui") from exc
        raise HotkeyUnavailableError(f"global hotkeys unavailable: {exc}") from exc
    return keyboard


# Combinations the desktop or the X server keeps for itself: a listener would see them, but
# pressing them also logs out, switches the virtual terminal, closes the window, ...
RESERVED = {
    frozenset({"<ctrl>", "<alt>", "<delete>"}): "it opens the log-out dialog",
    frozenset({"<ctrl>", "<alt>", "<backspace>"}): "it can kill the X server",
    frozenset({"<alt>", "<tab>"}): "it switches windows",
    frozenset({"<alt>", "<f4>"}): "it closes the window",
    frozenset({"<ctrl>", "c"}): "it is Copy in every application",
    frozenset({"<ctrl>", "v"}): "it is Paste in every application",
    **{frozenset({"<ctrl>", "<alt>", f"<f{n}>"}): "it switches to a text console"
       for n in range(1, 13)},
}
MODIFIER_NAMES = {"<ctrl>", "<alt>", "<shift>", "<cmd>"}


def chord_of(hotkey: str) -> frozenset[str]:
    return frozenset(part.strip().lower() for part in hotkey.split("+") if part.strip())


def check_hotkey(hotkey: str, others: Mapping[str, str]) -> str | None:
    """Why ``hotkey`` (pynput syntax) cannot be a global hotkey, or None when it can.
    ``others``: the other hotkeys in use, by what they do ("paste-last": "<ctrl>+<alt>+v")."""
    chord = chord_of(hotkey)
    keys = chord - MODIFIER_NAMES
    if len(keys) != 1:
        return "a hotkey is modifiers (Ctrl, Alt, Shift, Super) and one other key"
    key = next(iter(keys))
    is_function_key = key.startswith("<f") and key[2:-1].isdigit()
    if not chord & {"<ctrl>", "<alt>", "<cmd>"} and not is_function_key:
        return "without Ctrl, Alt or Super it would fire while you type"
    if chord in RESERVED:
        return f"the desktop keeps it ({RESERVED[chord]})"
    for name, other in others.items():
        if other and chord_of(other) == chord:
            return f"it is already the {name} hotkey"
    try:
        pynput_keyboard().HotKey.parse(hotkey)
    except ValueError as exc:
        return f"it cannot be listened for ({exc})"
    except HotkeyUnavailableError:
        pass  # no hotkeys in this session at all: said elsewhere, not this combination's fault
    return None
