"""A hotkey field you set by pressing the keys.

Click it ("Press the keys…"), press the combination, let go: it shows the combination the
platform's way ("Ctrl+Alt+Space"; Qt's native text, so macOS shows its symbols) and keeps it in
pynput's syntax (``<ctrl>+<alt>+<space>``), which only the config file shows. A ``check``
function (the app's: can pynput listen for it, does it clash with another hotkey) may refuse a
combination with the reason; the field then keeps its old value and shows the reason.
Escape cancels; Backspace or Delete alone clears the field when ``allow_empty`` ("off").
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFocusEvent, QKeyEvent, QKeySequence
from PySide6.QtWidgets import QLineEdit, QWidget

K = Qt.Key
M = Qt.KeyboardModifier
MODIFIERS = ((M.ControlModifier, "<ctrl>"), (M.AltModifier, "<alt>"),
             (M.ShiftModifier, "<shift>"), (M.MetaModifier, "<cmd>"))
MODIFIER_KEYS = {K.Key_Control, K.Key_Alt, K.Key_Shift, K.Key_Meta, K.Key_AltGr,
                 K.Key_Super_L, K.Key_Super_R}
NAMED_KEYS: dict[Qt.Key, str] = {
    K.Key_Space: "space", K.Key_Tab: "tab", K.Key_Return: "enter", K.Key_Enter: "enter",
    K.Key_Backspace: "backspace", K.Key_Delete: "delete", K.Key_Insert: "insert",
    K.Key_Home: "home", K.Key_End: "end", K.Key_PageUp: "page_up", K.Key_PageDown: "page_down",
    K.Key_Up: "up", K.Key_Down: "down", K.Key_Left: "left", K.Key_Right: "right",
    K.Key_Escape: "esc", K.Key_Pause: "pause", K.Key_Print: "print_screen",
    K.Key_ScrollLock: "scroll_lock", K.Key_CapsLock: "caps_lock", K.Key_Menu: "menu",
    **{getattr(K, f"Key_F{n}"): f"f{n}" for n in range(1, 21)},
}
_BY_NAME = {name: key for key, name in NAMED_KEYS.items() if key != K.Key_Enter}
_MODIFIER_BY_NAME = {name.strip("<>"): modifier for modifier, name in MODIFIERS}


def to_pynput(modifiers: Qt.KeyboardModifier, key: int) -> str | None:
    """``<ctrl>+<alt>+<space>`` for Ctrl+Alt+Space; None for a key pynput has no name for."""
    parts = [name for modifier, name in MODIFIERS if modifiers & modifier]
    if key in NAMED_KEYS:
        parts.append(f"<{NAMED_KEYS[Qt.Key(key)]}>")
    elif 0x21 <= key <= 0x7E:  # printable ASCII: Qt's key code is the upper-case character
        parts.append(chr(key).lower())
    else:
        return None
    return "+".join(parts)


def qt_sequence(hotkey: str) -> QKeySequence | None:
    """The Qt key sequence for a pynput hotkey (None when it has a part Qt cannot show)."""
    combination = 0
    key = 0
    for part in hotkey.lower().split("+"):
        name = part.strip().strip("<>")
        if part.startswith("<") and name in _MODIFIER_BY_NAME:
            combination |= _MODIFIER_BY_NAME[name].value
        elif part.startswith("<") and name in _BY_NAME:
            key = _BY_NAME[name].value
        elif len(part) == 1:
            key = ord(part.upper())
        else:
            return None
    return QKeySequence(combination | key) if key else None


def shown(hotkey: str) -> str:
    """How the platform writes a pynput hotkey ("Ctrl+Alt+Space"); "" stays ""."""
    if not hotkey:
        return ""
    sequence = qt_sequence(hotkey)
    if sequence is None:
        return hotkey
    return sequence.toString(QKeySequence.SequenceFormat.NativeText)


class HotkeyEdit(QLineEdit):
    """See the module docstring. `hotkey()` is the pynput syntax; `refused` says why a
    combination was not taken."""

    changed = Signal(str)  # the new hotkey (pynput syntax)
    refused = Signal(str)  # the reason

    def __init__(self, hotkey: str = "", *, allow_empty: bool = False,
                 check: Callable[[str], str | None] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)  # text comes from key presses only
        self.setObjectName("hotkeyEdit")
        self._hotkey = hotkey
        self._allow_empty = allow_empty
        self._check = check
        self._recording = False
        self.message = ""
        self.setPlaceholderText("off" if allow_empty else "click, then press the keys")
        self.setToolTip("Click here, then press the key combination"
                        + (" (Backspace turns it off)" if allow_empty else ""))
        self._show()

    def hotkey(self) -> str:
        return self._hotkey

    def set_check(self, check: Callable[[str], str | None]) -> None:
        self._check = check

    def _show(self) -> None:
        self.setText("Press the keys…" if self._recording else shown(self._hotkey))

    def focusInEvent(self, event: QFocusEvent) -> None:  # noqa: N802 - Qt override
        super().focusInEvent(event)
        self._recording = True
        self._show()

    def focusOutEvent(self, event: QFocusEvent) -> None:  # noqa: N802 - Qt override
        super().focusOutEvent(event)
        self._recording = False
        self._show()

    def mousePressEvent(self, event: object) -> None:  # noqa: N802 - Qt override
        self._recording = True
        self._show()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        if not self._recording:
            self._recording = True
        key = event.key()
        modifiers = event.modifiers() & (M.ControlModifier | M.AltModifier | M.ShiftModifier
                                         | M.MetaModifier)
        if key in MODIFIER_KEYS:  # wait for the key that completes the combination
            self.setText(QKeySequence(modifiers.value).toString(
                QKeySequence.SequenceFormat.NativeText) + "…")
            return
        if not modifiers and key == K.Key_Escape:
            self._finish()
            return
        if not modifiers and key in (K.Key_Backspace, K.Key_Delete) and self._allow_empty:
            self._take("")
            return
        self._take(to_pynput(modifiers, key))

    def offer(self, hotkey: str | None) -> bool:
        """Take ``hotkey`` as if it had been pressed; False (and `refused`) when refused."""
        return self._take(hotkey)

    def _take(self, hotkey: str | None) -> bool:
        reason: str | None
        if hotkey is None:
            reason = "that key cannot be used in a global hotkey"
        elif hotkey == "":
            reason = None
        else:
            reason = self._check(hotkey) if self._check is not None else None
        if reason is not None:
            self.message = f"{shown(hotkey) if hotkey else 'This key'}: {reason}"
            self.refused.emit(self.message)
            self._finish()
            return False
        assert hotkey is not None
        self.message = ""
        self._hotkey = hotkey
        self.changed.emit(hotkey)
        self._finish()
        return True

    def _finish(self) -> None:
        self._recording = False
        self._show()
