"""Type any text on X11 through XTEST (python-xlib), whatever the keyboard layout.

Each character is looked up in the current keymap (the active group, with Shift where its
level needs it; CapsLock off meanwhile). A character the layout lacks (€ on us, Ж on de, 東,
emoji) gets a spare keycode, one with no keysym, remapped to its keysym as xdotool does; the
borrowed keycodes go back to empty RESTORE_AFTER_S after the last text, not at once: the target
re-reads the keymap only when it gets to the MappingNotify, and a restore before that would
make the key type nothing. Newlines and tabs are Return and Tab.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any

from engine.errors import missing_dependency

log = logging.getLogger(__name__)

RESTORE_AFTER_S = 2.0
# A borrowed keycode is remapped again (more distinct missing characters than spare keycodes)
# only this long after its last key, so the target has read the old mapping.
REBORROW_AFTER_S = 0.5
SPECIAL_KEYSYMS = {"\n": 0xFF0D, "\r": 0xFF0D, "\t": 0xFF09, "\b": 0xFF08}  # Return, Tab, BackSpace
SHIFT_L, CAPS_LOCK = 0xFFE1, 0xFFE5
GROUP_COLUMNS = {0: (0, 1), 1: (2, 3)}  # the core keymap's columns of each group's levels 1-2


class TypingError(RuntimeError):
    """The text could not be typed (no X display, no XTEST, no spare keycode)."""


@functools.lru_cache(maxsize=1)
def _legacy_keysyms() -> dict[str, tuple[int, ...]]:
    """Character -> its named (pre-Unicode) keysyms, e.g. "€" -> EuroSign, "ж" -> Cyrillic_zhe:
    what keymaps use for most characters. pynput ships the table (X11's keysymdef.h)."""
    try:
        from pynput._util.xorg_keysyms import SYMBOLS
    except ImportError:  # only Latin-1 and Unicode keysyms then; others are remapped
        return {}
    table: dict[str, list[int]] = {}
    for value in SYMBOLS.values():
        if isinstance(value, tuple) and value[1]:
            table.setdefault(value[1], []).append(value[0])
    return {char: tuple(keysyms) for char, keysyms in table.items()}


def char_keysyms(char: str) -> tuple[int, ...]:
    """The keysyms that type ``char``, the named one first (a borrowed keycode gets that)."""
    if char in SPECIAL_KEYSYMS:
        return (SPECIAL_KEYSYMS[char],)
    code = ord(char)
    unicode_keysym = code if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF else code | 0x01000000
    named = tuple(k for k in _legacy_keysyms().get(char, ()) if k != unicode_keysym)
    return (*named, unicode_keysym) if code > 0xFF else (unicode_keysym, *named)


class X11Typer:
    """Types text into the focused X11 window. Thread-safe; one X connection, opened lazily."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._display: Any = None
        self._borrowed: dict[int, int] = {}  # keycode -> the keysym it was given
        self._used: dict[int, float] = {}  # borrowed keycode -> when its key was last typed
        self._restore: threading.Timer | None = None

    def type_text(self, text: str, backspaces: int = 0) -> None:
        """Press BackSpace ``backspaces`` times, then type ``text``. TypingError on failure."""
        with self._lock:
            if self._restore is not None:
                self._restore.cancel()
            try:
                self._type(text, backspaces)
            except TypingError:
                raise
            except Exception as exc:  # the X connection broke, XTEST refused, ...
                self._close_display()
                raise TypingError(str(exc) or type(exc).__name__) from exc
            finally:
                if self._borrowed:
                    self._restore = threading.Timer(RESTORE_AFTER_S, self.restore)
                    self._restore.daemon = True
                    self._restore.start()

    def restore(self) -> None:
        """Give the borrowed keycodes their empty mapping back."""
        with self._lock:
            if self._display is None or not self._borrowed:
                return
            try:
                keymap = Keymap(self._display, self._borrowed)
                for keycode in keymap.borrowed:  # not those a new layout has since given keys
                    self._display.change_keyboard_mapping(keycode, [(0,) * keymap.width])
                self._display.sync()
            except Exception as exc:  # noqa: BLE001 - a closed display has nothing left to undo
                log.warning("could not restore the keyboard mapping: %s", exc)
            self._borrowed.clear()
            self._used.clear()

    def close(self) -> None:
        if self._restore is not None:
            self._restore.cancel()
        self.restore()
        with self._lock:
            self._close_display()

    # -- inside the lock ------------------------------------------------------------------------
    def _open(self) -> Any:
        if self._display is None:
            try:
                from Xlib import display, error
            except ImportError as exc:
                raise TypingError(str(missing_dependency("python-xlib", "gui"))) from exc

            try:
                d = display.Display()
            except (error.DisplayError, error.ConnectionClosedError, OSError) as exc:
                raise TypingError(f"cannot open the X display: {exc}") from exc
            if not d.query_extension("XTEST").present:
                d.close()
                raise TypingError("the X server has no XTEST extension to type with")
            self._display = d
        return self._display

    def _close_display(self) -> None:
        if self._display is not None:
            try:
                self._display.close()
            finally:
                self._display = None
                self._borrowed.clear()
                self._used.clear()

    def _type(self, text: str, backspaces: int) -> None:
        d = self._open()
        keymap = Keymap(d, self._borrowed)
        self._borrowed = {kc: self._borrowed[kc] for kc in keymap.borrowed}
        # CapsLock would capitalise letters (and turn ß into ẞ): off while typing, as xdotool
        # does, and on again after.
        caps = d.keysym_to_keycode(CAPS_LOCK) if keymap.lock else 0
        if caps:
            self._tap(caps)
        try:
            shift = d.keysym_to_keycode(SHIFT_L)
            for char in "\b" * backspaces + text.replace("\r\n", "\n"):
                keycode, shifted = keymap.find(char)
                if keycode is None:
                    keycode, shifted = self._borrow(keymap, char), False
                if keycode in self._borrowed:
                    self._used[keycode] = time.monotonic()
                self._tap(keycode, shift if shifted else 0)
        finally:
            if caps:
                self._tap(caps)
            d.sync()

    def _tap(self, keycode: int, modifier: int = 0) -> None:
        from Xlib import X
        from Xlib.ext import xtest

        if modifier:
            xtest.fake_input(self._display, X.KeyPress, modifier)
        xtest.fake_input(self._display, X.KeyPress, keycode)
        xtest.fake_input(self._display, X.KeyRelease, keycode)
        if modifier:
            xtest.fake_input(self._display, X.KeyRelease, modifier)

    def _borrow(self, keymap: Keymap, char: str) -> int:
        """Map a spare keycode to ``char``'s keysym; the least recently typed one when every
        spare keycode is taken."""
        free = [kc for kc in keymap.spare if kc not in self._borrowed]
        if free:
            keycode = free[0]
        elif self._borrowed:
            keycode = min(self._borrowed, key=lambda kc: self._used.get(kc, 0.0))
            wait = self._used.get(keycode, 0.0) + REBORROW_AFTER_S - time.monotonic()
            if wait > 0:
                self._display.sync()
                time.sleep(wait)
        else:
            raise TypingError(f"cannot type {char!r}: the keyboard layout lacks it and has no "
                              "spare keycode to map it to")
        keysym = char_keysyms(char)[0]
        self._display.change_keyboard_mapping(keycode, [(keysym,) * keymap.width])
        self._display.sync()
        keymap.assign(keycode, keysym)
        self._borrowed[keycode] = keysym
        self._used[keycode] = time.monotonic()
        return keycode


class Keymap:
    """The server's core keymap seen through the active group: keysym -> (keycode, shifted).
    ``borrowed``: keycodes given a keysym earlier (keycode -> keysym); `borrowed` keeps those
    that still have it (a layout switch replaces the whole keymap)."""

    def __init__(self, display: Any, borrowed: dict[int, int]) -> None:
        from Xlib import X

        first = display.display.info.min_keycode
        rows = display.get_keyboard_mapping(first, display.display.info.max_keycode - first + 1)
        self.width = len(rows[0]) if rows else 0
        state = display.screen().root.query_pointer().mask
        self.lock = bool(state & X.LockMask)
        group = (state >> 13) & 3
        modifiers = {kc for kcs in display.get_modifier_mapping() for kc in kcs if kc}
        self.borrowed = {kc for kc, keysym in borrowed.items()
                         if first <= kc < first + len(rows)
                         and set(rows[kc - first]) - {0} == {keysym}}
        self.spare: list[int] = []
        self.rows: dict[int, tuple[int, int]] = {}
        self.where: dict[int, tuple[int, bool]] = {}
        columns = GROUP_COLUMNS.get(group)
        for keycode, row in enumerate(rows, start=first):
            if keycode in self.borrowed or (not any(row) and keycode not in modifiers):
                self.spare.append(keycode)
            if columns is None or columns[1] >= self.width or keycode in self.borrowed:
                continue  # a group beyond the second: every character gets a borrowed key
            pair = (row[columns[0]], row[columns[1]] or row[columns[0]])
            self.rows[keycode] = pair
            for level, keysym in enumerate(pair):
                if keysym and (keysym not in self.where or self.where[keysym][1] > bool(level)):
                    self.where[keysym] = (keycode, bool(level))  # without Shift where it can
        for keycode in self.borrowed:
            self.assign(keycode, borrowed[keycode])

    def assign(self, keycode: int, keysym: int) -> None:
        for old in self.rows.get(keycode, ()):
            if self.where.get(old, (None, False))[0] == keycode:
                del self.where[old]
        self.rows[keycode] = (keysym, keysym)
        self.where[keysym] = (keycode, False)

    def find(self, char: str) -> tuple[int | None, bool]:
        """The keycode typing ``char`` and whether Shift is needed (None: not in the keymap)."""
        for keysym in char_keysyms(char):
            if keysym in self.where:
                return self.where[keysym]
        return None, False
