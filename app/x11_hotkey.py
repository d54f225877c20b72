"""A hotkey chord grabbed on X11 with XGrabKey (python-xlib): the focused app never sees it.

A listener (pynput's) only observes: the focused app got every Ctrl+Alt+Space, auto-repeats
included (a terminal printed NUL bytes). `GrabbedChord` grabs the chord's key with its modifiers
on the root window, once per combination of the lock modifiers (CapsLock, NumLock, ScrollLock:
the grab must match the exact modifier state), and reports the chord's parts going down and up
from a thread of its own. XKB's detectable auto-repeat makes a held key repeat as presses only,
so a held chord is one press and one release; where XKB is missing, a release followed by a
press of the same key at the same server time is dropped as a repeat. A new keyboard layout
(setxkbmap, a layout switcher) can move the chord's key: the grab moves with it.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import select
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

MODIFIER_KEYSYMS = {  # pynput's modifier names -> keysyms whose modifier bit they mean
    "<alt>": ("Alt_L", "Alt_R", "Meta_L", "Meta_R"),
    "<cmd>": ("Super_L", "Super_R", "Hyper_L", "Hyper_R"),
}
# pynput key names whose X keysym is spelled differently.
KEY_ALIASES = {"enter": "Return", "esc": "Escape", "page_up": "Prior", "page_down": "Next",
               "backspace": "BackSpace", "caps_lock": "Caps_Lock", "num_lock": "Num_Lock",
               "scroll_lock": "Scroll_Lock", "print_screen": "Print", "media_play_pause":
               "XF86AudioPlay", "media_next": "XF86AudioNext", "media_previous": "XF86AudioPrev",
               "media_volume_up": "XF86AudioRaiseVolume", "media_volume_down":
               "XF86AudioLowerVolume", "media_volume_mute": "XF86AudioMute", "menu": "Menu"}
CHANGE_HINT = "choose another one in Settings"
# Without XKB a held key repeats as release/press pairs with one timestamp, sent together; a
# release read alone waits this long for its press before it counts as the key let go.
PAIR_WAIT_S = 0.1
XKB_DETECTABLE_AUTOREPEAT = 1  # XkbPCF_DetectableAutoRepeatMask
XKB_USE_CORE_KEYBOARD = 0x100


class GrabError(RuntimeError):
    """The chord cannot be grabbed; the message names it and says what to do."""


def pretty(hotkey: str) -> str:
    """'<ctrl>+<alt>+<space>' -> 'Ctrl+Alt+Space', as the user reads it."""
    return "+".join(p.strip().strip("<>").title() for p in hotkey.split("+") if p.strip())


def key_keysym(name: str) -> int:
    """The keysym of a chord's one non-modifier key, in pynput's syntax ("<space>", "v")."""
    from Xlib import XK

    for group in ("xkb", "xf86"):  # beyond python-xlib's default Latin-1 and miscellany
        XK.load_keysym_group(group)
    if len(name) == 1:
        code = ord(name.lower())
        return code if code < 0x100 else code | 0x01000000
    bare = name.strip("<>")
    if bare.isdigit():  # pynput's "<65>": a virtual key code, the keysym on X11
        return int(bare)
    for candidate in (KEY_ALIASES.get(bare, bare), bare.capitalize(), bare.upper(),
                      "_".join(w.capitalize() for w in bare.split("_"))):
        keysym = XK.string_to_keysym(candidate)
        if keysym:
            return int(keysym)
    raise GrabError(f"unknown key {name!r} in the hotkey")


def modifier_masks(display: Any) -> dict[str, int]:
    """The modifier bit of each named key on this server's modifier map ("<alt>" is Mod1 on
    most, not all, keymaps)."""
    from Xlib import XK, X

    by_keycode = {}
    for bit, keycodes in enumerate(display.get_modifier_mapping()):
        for keycode in keycodes:
            if keycode:
                by_keycode[keycode] = 1 << bit

    def mask_of(*names: str) -> int:
        for name in names:
            for keycode, _ in display.keysym_to_keycodes(XK.string_to_keysym(name)):
                if keycode in by_keycode:
                    return by_keycode[keycode]
        return 0

    masks = {"<ctrl>": X.ControlMask, "<shift>": X.ShiftMask,
             "<alt>": mask_of(*MODIFIER_KEYSYMS["<alt>"]) or X.Mod1Mask,
             "<cmd>": mask_of(*MODIFIER_KEYSYMS["<cmd>"]) or X.Mod4Mask,
             "caps": X.LockMask, "num": mask_of("Num_Lock"), "scroll": mask_of("Scroll_Lock")}
    return masks


def enable_detectable_autorepeat(display: Any) -> bool:
    """XkbSetDetectableAutoRepeat for this connection: a held key then repeats as presses only,
    with no release in between. False where the server has no XKB."""
    from Xlib.protocol import rq

    info = display.query_extension("XKEYBOARD")
    if info is None or not info.present:
        return False

    class UseExtension(rq.ReplyRequest):  # type: ignore[misc]
        _request = rq.Struct(rq.Card8("opcode"), rq.Opcode(0), rq.RequestLength(),
                             rq.Card16("major"), rq.Card16("minor"))
        _reply = rq.Struct(rq.ReplyCode(), rq.Bool("supported"), rq.Card16("sequence_number"),
                           rq.ReplyLength(), rq.Card16("server_major"),
                           rq.Card16("server_minor"), rq.Pad(20))

    class PerClientFlags(rq.ReplyRequest):  # type: ignore[misc]
        _request = rq.Struct(rq.Card8("opcode"), rq.Opcode(21), rq.RequestLength(),
                             rq.Card16("device"), rq.Pad(2), rq.Card32("change"),
                             rq.Card32("value"), rq.Card32("ctrls"), rq.Card32("auto_ctrls"),
                             rq.Card32("auto_values"))
        _reply = rq.Struct(rq.ReplyCode(), rq.Card8("device_id"), rq.Card16("sequence_number"),
                           rq.ReplyLength(), rq.Card32("supported"), rq.Card32("value"),
                           rq.Card32("auto_ctrls"), rq.Card32("auto_values"), rq.Pad(8))

    opcode = info.major_opcode
    if not UseExtension(display=display.display, opcode=opcode, major=1, minor=0).supported:
        return False
    reply = PerClientFlags(display=display.display, opcode=opcode, device=XKB_USE_CORE_KEYBOARD,
                           change=XKB_DETECTABLE_AUTOREPEAT, value=XKB_DETECTABLE_AUTOREPEAT,
                           ctrls=0, auto_ctrls=0, auto_values=0)
    return bool(reply.value & XKB_DETECTABLE_AUTOREPEAT)


class GrabbedChord:
    """Grabs ``hotkey`` (pynput syntax, "<ctrl>+<alt>+<space>") on the X root window and calls
    ``feed(part, down)`` from its thread for the chord's parts ("<ctrl>", "<space>", ...):
    all of them down when the grabbed key goes down, a modifier up when it is let go during the
    grab, and every part up when the key is let go."""

    def __init__(self, hotkey: str, feed: Callable[[str, bool], None]) -> None:
        self.hotkey = hotkey
        self.parts = [p.strip().lower() for p in hotkey.split("+") if p.strip()]
        self._feed = feed
        self._display: Any = None
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = -1, -1
        self._grabs: list[tuple[int, int]] = []  # (keycode, modifiers)
        self.keycode, self.modifiers = 0, 0
        self._locks: list[int] = []
        self._modifier_keycodes: dict[int, str] = {}
        self._watch: Any = None  # a second connection, for MappingNotify
        self.detectable_autorepeat = False
        self.repeats = 0  # auto-repeats of the held key, dropped
        self._held = False  # the grabbed key is down
        self._pending: Any = None  # a release of the key, maybe half of a repeat's pair

    def start(self) -> None:
        """Grab the chord; GrabError (naming the keys) when it cannot be."""
        from Xlib import display, error

        try:
            self._display = display.Display()
            # A client using XKB gets no core MappingNotify: a second, plain connection hears
            # of layout changes.
            self._watch = display.Display()
        except (error.DisplayError, error.ConnectionClosedError, OSError) as exc:
            if self._display is not None:
                self._display.close()
            raise GrabError(f"cannot open the X display: {exc}") from exc
        try:
            self._grab()
        except BaseException:
            self._display.close()
            self._watch.close()
            self._display = self._watch = None
            raise
        self.detectable_autorepeat = enable_detectable_autorepeat(self._display)
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="sottovoce-x11-hotkey",
                                        daemon=True)
        self._thread.start()

    def _grab(self) -> None:
        from Xlib import X, error

        keycode, modifiers, locks = self._wanted()
        self.keycode, self.modifiers, self._locks = keycode, modifiers, locks
        root = self._display.screen().root
        catch = error.CatchError(error.BadAccess)
        for n in range(len(locks) + 1):
            for combo in itertools.combinations(locks, n):
                extra = sum(combo)
                root.grab_key(keycode, modifiers | extra, False, X.GrabModeAsync,
                              X.GrabModeAsync, onerror=catch)
                self._grabs.append((keycode, modifiers | extra))
        self._display.sync()
        if catch.get_error() is not None:
            self._ungrab()
            raise GrabError(f"{pretty(self.hotkey)} is already taken by another application "
                            f"(its global shortcut); {CHANGE_HINT}")

    def _wanted(self) -> tuple[int, int, list[int]]:
        """The chord's keycode and modifier mask on the keymap now, and the lock modifiers'
        masks (CapsLock, NumLock, ScrollLock: each grabbed on and off)."""
        d = self._display
        masks = modifier_masks(d)
        modifiers, keys = 0, []
        for part in self.parts:
            if part in ("<ctrl>", "<shift>", "<alt>", "<cmd>"):
                modifiers |= masks[part]
            else:
                keys.append(part)
        if len(keys) != 1:
            raise GrabError(f"invalid hotkey {self.hotkey!r}: modifiers (Ctrl, Alt, Shift, "
                            "Super) and one other key")
        keycode = d.keysym_to_keycode(key_keysym(keys[0]))
        if not keycode:
            raise GrabError(f"the key {pretty(keys[0])} of {pretty(self.hotkey)} is not on "
                            f"this keyboard layout; {CHANGE_HINT}")
        self._modifier_keycodes = self._modifier_keycode_parts(masks)
        return keycode, modifiers, sorted({masks[m] for m in ("caps", "num", "scroll")} - {0})

    def _keymap_changed(self, event: Any) -> None:
        """A new layout may put the chord's key on another keycode (Z and Y swap on German),
        or the modifiers on other bits: grab it where it is now."""
        self._display.refresh_keyboard_mapping(event)
        try:
            if self._wanted() == (self.keycode, self.modifiers, self._locks):
                return  # (our own typing borrowing a spare keycode, most often)
            self._ungrab()
            self._grab()
        except GrabError as exc:
            log.warning("the hotkey is off after the keyboard layout changed: %s", exc)

    def _modifier_keycode_parts(self, masks: dict[str, int]) -> dict[int, str]:
        """Keycode -> chord part, for the chord's modifier keys."""
        result = {}
        for bit, keycodes in enumerate(self._display.get_modifier_mapping()):
            for part in self.parts:
                if masks.get(part) == 1 << bit:
                    result.update({kc: part for kc in keycodes if kc})
        return result

    def _ungrab(self) -> None:
        root = self._display.screen().root
        for keycode, modifiers in self._grabs:
            root.ungrab_key(keycode, modifiers)
        self._grabs.clear()
        self._display.sync()

    def stop(self) -> None:
        """Let the chord go (ungrab) and end the thread."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        with contextlib.suppress(OSError):  # the thread has ended already (X went away)
            os.write(self._wake_w, b"x")
        thread.join(2.0)
        os.close(self._wake_w)

    def _run(self) -> None:
        d = self._display
        try:
            while True:
                # A release that may be half of an auto-repeat's pair waits for its press.
                timeout = PAIR_WAIT_S if self._pending is not None else None
                ready, _, _ = select.select([d.fileno(), self._watch.fileno(), self._wake_r],
                                            [], [], timeout)
                if self._wake_r in ready:
                    return
                self._read_keymap_changes()
                self._handle([d.next_event() for _ in range(d.pending_events())],
                             final=not ready)
        except Exception:  # noqa: BLE001 - top of the thread: the hotkey stops, the app goes on
            log.exception("the X11 hotkey thread failed")
        finally:
            try:
                self._watch.close()
                self._ungrab()
                d.close()
            except Exception as exc:  # noqa: BLE001 - a dead connection holds no grab
                log.debug("closing the X connection: %s", exc)
            os.close(self._wake_r)

    def _read_keymap_changes(self) -> None:
        from Xlib import X

        for _ in range(self._watch.pending_events()):
            event = self._watch.next_event()
            if event.type == X.MappingNotify:
                self._keymap_changed(event)

    def _handle(self, events: list[Any], final: bool = False) -> None:
        """Feed the chord's parts from these events. ``final``: no more events came within
        PAIR_WAIT_S, so a release held back is a real one."""
        from Xlib import X

        if self._pending is not None:
            events, self._pending = [self._pending, *events], None
        skip = set()
        for i, event in enumerate(events):
            if i in skip or event.type not in (X.KeyPress, X.KeyRelease):
                continue
            ours = event.detail == self.keycode
            if event.type == X.KeyPress and ours and self._held:
                self.repeats += 1
            elif event.type == X.KeyPress and ours:
                self._held = True
                for part in self.parts:
                    self._feed(part, True)
            elif event.type == X.KeyRelease and ours and self._held:
                following = events[i + 1] if i + 1 < len(events) else None
                if following is None and not self.detectable_autorepeat and not final:
                    self._pending = event  # the press of its pair may come in the next read
                    return
                if (following is not None and following.type == X.KeyPress
                        and following.detail == self.keycode and following.time == event.time):
                    skip.add(i + 1)  # an auto-repeat's release/press pair (no XKB)
                    self.repeats += 1
                    continue
                self._held = False
                for part in reversed(self.parts):
                    self._feed(part, False)
            elif event.type == X.KeyRelease and event.detail in self._modifier_keycodes:
                self._feed(self._modifier_keycodes[event.detail], False)
