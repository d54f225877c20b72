"""Put dictated text into whatever app has keyboard focus, without taking focus ourselves.

paste: save the user's clipboard, put the text on it, press the paste keys (Ctrl+V or
  Shift+Insert), and restore the saved clipboard once the target has had time to read it (unless
  something newer was copied meanwhile). Works on any keyboard layout and is fast for long text.
type: synthesise the characters (for apps that block paste): on X11 through XTEST with any
  character on any layout (app.x11_typing), elsewhere with pynput; one text after another.
On Wayland both go through app.wayland_inject instead (`use_wayland`): wl-copy for the
clipboard and the virtual keyboard, the RemoteDesktop portal or ydotool for the keys, on a
thread of its own, falling back route by route.
Where the session's input method is IBus (`use_ibus`, app.ibus_route) the text is committed
through it first, in either mode, on the typing thread; if that fails the text goes the usual
way, and IBus is not tried again unless only the focused window lacked it (a terminal).

`insert(text, delete_chars)` is the exact form dictation uses: backspace over `delete_chars`
characters first ("scratch that", a dictated mark replacing the previous one), then insert the
text as given (its joining space included). `inject(text)` inserts stripped text plus a space.

Every attempt ends with `finished(ok, message)`; a failure is reported, never logged as success.
A paste can't be confirmed by the target app, so success means "keys delivered". `timings` holds
when the last attempt passed each step (time.monotonic seconds): "inject_start",
"clipboard_set" and "keys_sent" (paste), "typed" (type). The keys follow the clipboard at once;
the clipboard is restored once the target has read the text (`PasteData`). One wait comes first: while the user still
holds Ctrl, Alt, Shift or Super (the hotkey's Ctrl+Alt after its Space went up, or the next
push-to-talk press while a slow final lands), the target would see Ctrl+Alt+V, not Paste, and
Ctrl+Alt+V is our own paste-last hotkey; so texts wait, in order, until those keys are let go
(at most HELD_WAIT_S). Wayland's inserter (its own thread) does not wait.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from PySide6.QtCore import QMimeData, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QClipboard, QGuiApplication

from app.hotkeys import HotkeyUnavailableError, pynput_keyboard, uses_x11
from app.wayland_inject import Insertion, RouteError, WaylandInserter
from engine.core.sanitize import clean
from ui.qt_compat import emit, forwarder

log = logging.getLogger(__name__)

# The target app fetches the clipboard asynchronously after it sees the paste keys; restoring
# before it has would paste the user's old clipboard instead of the dictation, and a busy
# machine delays that read by seconds. So the restore waits until the text was read, and
# RESTORE_GRACE_MS more (the target's other formats); never sooner than RESTORE_DELAY_MS after
# the keys (a clipboard manager may read before the target does), and at most RESTORE_MAX_MS (a
# target that ignored the paste). Checked every RESTORE_POLL_MS while it waits.
RESTORE_DELAY_MS = 600
RESTORE_GRACE_MS = 200
RESTORE_MAX_MS = 10_000
RESTORE_POLL_MS = 50
# Marks the clipboard content a paste put there, so the restore can tell it from a newer copy
# even when the newer copy is the same text (File > Copy transcript of a one-line session).
PASTE_MARKER = "application/x-sottovoce-paste"
_INJECTORS = itertools.count(1)
# Keys held down that would turn the paste keys (or typed text) into another chord: a text
# waits for them to be let go, looking every HELD_POLL_MS, and goes anyway after HELD_WAIT_S
# (a key the desktop reports stuck must not keep dictation from landing).
HELD_MODIFIERS = (Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier
                  | Qt.KeyboardModifier.ShiftModifier | Qt.KeyboardModifier.MetaModifier)
HELD_POLL_MS = 20
HELD_WAIT_S = 30.0


def modifiers_held() -> bool:
    """Whether Ctrl, Alt, Shift or Super is down now, whichever app has focus (Qt asks the
    window system: on X11 the server's global state)."""
    return bool(QGuiApplication.queryKeyboardModifiers() & HELD_MODIFIERS)


def snapshot_clipboard(clipboard: QClipboard) -> QMimeData | None:
    """A deep copy of what is on the clipboard now (None when it is empty)."""
    source = clipboard.mimeData()
    if source is None or not source.formats():
        return None
    copy = QMimeData()
    for fmt in source.formats():
        copy.setData(fmt, source.data(fmt))
    return copy


class PasteData(QMimeData):
    """A paste's clipboard content: the text and our marker; notes when the text is first read
    (by any app, this one included: Qt asks `retrieveData` for each read)."""

    def __init__(self, text: str, marker: bytes) -> None:
        super().__init__()
        self.setText(text)
        self.setData(PASTE_MARKER, marker)
        self.read_at: float | None = None  # time.monotonic() of the first read of the text

    def retrieveData(self, mimetype: str, preferredType: Any) -> Any:  # noqa: N802, N803 - Qt's
        if self.read_at is None and mimetype.startswith("text/"):
            self.read_at = time.monotonic()
        return super().retrieveData(mimetype, preferredType)


def merge_waiting(waiting: Iterable[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """Texts (text, delete_chars, mode) that waited together, as few insertions as can be:
    two pastes back to back would race for the clipboard (the target reads it after it sees
    the keys)."""
    merged: list[tuple[str, int, str]] = []
    for text, delete_chars, mode in waiting:
        if merged and merged[-1][2] == mode:
            before, deleted, _ = merged[-1]
            cut = min(delete_chars, len(before))  # ("scratch that" of a text still here)
            merged[-1] = (before[:len(before) - cut] + text, deleted + delete_chars - cut, mode)
        else:
            merged.append((text, delete_chars, mode))
    return merged


class TextInjector(QObject):
    """Lives on the GUI thread (the clipboard must be used there)."""

    finished = Signal(bool, str)  # ok, message for the user
    _typed = Signal(bool, str)  # from the typing thread
    _ibus_failed = Signal(str, int, str)  # text, delete_chars, mode: insert it the usual way

    def __init__(self, mode: str = "paste", paste_keys: str = "ctrl+v",
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.mode = mode
        self.paste_keys = paste_keys
        self._controller: Any = None
        self._typer: Any = None  # app.x11_typing.X11Typer, made on first use
        # One typing thread: texts are typed in the order they came, never interleaved.
        self._typing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sottovoce-type")
        self.wayland: WaylandInserter | None = None
        self.ibus: Any = None  # app.ibus_route.IBusRoute where the session uses IBus
        self._saved: QMimeData | None = None
        self._pastes = 0  # pastes so far: with the token below, the marker of the latest one
        self._token = next(_INJECTORS)  # another injector's paste is never taken for ours
        self._restore_pending = False
        self.timings: list[tuple[str, float]] = []
        self._typed.connect(forwarder(self.finished, 2))
        self._ibus_failed.connect(partial(self._insert_now, via_ibus=False))
        # Texts waiting for held keys to be let go (text, delete_chars, mode), and since when.
        self._waiting: deque[tuple[str, int, str]] = deque()
        self._waiting_since = 0.0
        self._held = QTimer(self)
        self._held.setSingleShot(True)
        self._held.setInterval(HELD_POLL_MS)
        self._held.timeout.connect(self._insert_waiting)

    def configure(self, mode: str, paste_keys: str) -> None:
        self.mode, self.paste_keys = mode, paste_keys

    def use_wayland(self, inserter: WaylandInserter | None) -> None:
        """Insert through this (started) Wayland inserter from now on; None: back to X11."""
        if self.wayland is not None:
            self.wayland.stop()
        self.wayland = inserter

    def use_ibus(self, route: Any) -> None:
        """Commit through this IBus route first (X11; Wayland's inserter has it as a route)."""
        if self.ibus is not None:
            self.ibus.close()
        self.ibus = route

    def inject(self, text: str, mode: str | None = None) -> None:
        """Insert ``text`` (stripped, with a trailing space) into the focused app."""
        if text.strip():
            self.insert(text.strip() + " ", mode=mode)

    def insert(self, text: str, delete_chars: int = 0, mode: str | None = None) -> None:
        """Delete `delete_chars` characters before the cursor, then insert `text` exactly.
        ``mode`` overrides the configured one for this text (an application's profile)."""
        mode = mode or self.mode
        # The last line of defence for every route (X11 and Wayland): nothing but text, line
        # breaks and tabs (which only the dictation's own commands and checked answers carry)
        # is typed or pasted; an escape sequence or a DEL would act in a terminal.
        text = clean(text, newlines=True, tabs=True)
        if (not text and delete_chars <= 0) or mode == "off":
            return
        if self.wayland is not None:
            self.timings = [("inject_start", time.monotonic())]
            self.wayland.submit(Insertion(text, delete_chars, mode, self.paste_keys,
                                          forwarder(self._typed, 2), self.timings))
            return
        if not self._waiting:
            self._waiting_since = time.monotonic()
        self._waiting.append((text, delete_chars, mode))
        if not self._held.isActive():
            self._insert_waiting()

    @property
    def waiting(self) -> int:
        """Texts waiting for held keys to be let go."""
        return len(self._waiting)

    def _insert_waiting(self) -> None:
        """Insert the waiting texts in order once no modifier is held (or HELD_WAIT_S is up)."""
        if modifiers_held():
            if time.monotonic() - self._waiting_since < HELD_WAIT_S:
                self._held.start()
                return
            log.warning("a modifier key has been held for %.0f s: inserting anyway", HELD_WAIT_S)
        merged = merge_waiting(self._waiting)
        self._waiting.clear()
        for text, delete_chars, mode in merged:
            if text or delete_chars > 0:
                self._insert_now(text, delete_chars, mode)

    def _insert_now(self, text: str, delete_chars: int, mode: str, via_ibus: bool = True) -> None:
        self.timings = [("inject_start", time.monotonic())]
        if self.ibus is not None and via_ibus:
            try:
                self._typing.submit(self._commit, mode, text, delete_chars)
            except RuntimeError:  # closed: the app is quitting
                emit(self.finished, False, "Could not insert the text: the app is quitting")
            return
        if mode == "type" and uses_x11():
            self._type_later(self._x11_typer().type_text, text, delete_chars)
            return
        try:
            controller = self._keyboard_controller()
        except (HotkeyUnavailableError, ImportError, RuntimeError) as exc:
            emit(self.finished, False, f"Could not insert text: {exc}")
            return
        if mode == "type":
            self._type_later(partial(self._pynput_type, controller), text, delete_chars)
            return
        if delete_chars > 0:
            try:
                self._backspace(controller, delete_chars)
            except Exception as exc:  # noqa: BLE001 - any backend failure is shown to the user
                log.warning("backspace failed: %s", exc)
                emit(self.finished, False, f"Could not delete the text: {exc}")
                return
        if text:
            self._paste(controller, text)
        else:
            emit(self.finished, True, f"Deleted {delete_chars} characters")

    @staticmethod
    def _backspace(controller: Any, count: int) -> None:
        key = pynput_keyboard().Key.backspace
        for _ in range(count):
            controller.press(key)
            controller.release(key)

    def _paste(self, controller: Any, text: str) -> None:
        clipboard = QGuiApplication.clipboard()
        if not self._restore_pending:
            # During back-to-back pastes the clipboard holds our own text; keep the user's.
            self._saved = snapshot_clipboard(clipboard)
        self._pastes += 1
        ours = PasteData(text, self._marker(self._pastes))
        clipboard.setMimeData(ours, QClipboard.Mode.Clipboard)
        self.timings.append(("clipboard_set", time.monotonic()))
        try:
            self._press_paste_keys(controller)
            self.timings.append(("keys_sent", time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - any backend failure is shown to the user
            log.warning("paste keys failed: %s", exc)
            self._restore_clipboard(self._pastes)
            emit(self.finished, False, f"Could not paste the text: {exc}")
            return
        self._restore_pending = True
        paste, sent = self._pastes, time.monotonic()
        QTimer.singleShot(RESTORE_DELAY_MS, self, lambda: self._restore_when_read(ours, paste, sent))
        emit(self.finished, True, f"Pasted {len(text.strip())} characters")

    def _press_paste_keys(self, controller: Any) -> None:
        keyboard = pynput_keyboard()
        if self.paste_keys == "shift+insert":
            modifier, key = keyboard.Key.shift, keyboard.Key.insert
        else:
            modifier, key = keyboard.Key.ctrl, keyboard.KeyCode.from_char("v")
        with controller.pressed(modifier):
            controller.press(key)
            controller.release(key)

    def _marker(self, paste: int) -> bytes:
        return f"{os.getpid()}.{self._token}.{paste}".encode()

    def _clipboard_holds(self, paste: int) -> bool:
        """Whether the clipboard still holds what paste number ``paste`` put there."""
        current = QGuiApplication.clipboard().mimeData(QClipboard.Mode.Clipboard)
        return current is not None and bytes(
            current.data(PASTE_MARKER).data()) == self._marker(paste)

    def _restore_when_read(self, ours: PasteData, paste: int, sent: float) -> None:
        """Restore once the target has read the paste (module constants), or once the clipboard
        no longer holds it (restoring is then moot: `_restore_clipboard` leaves it)."""
        if paste != self._pastes:
            return  # a later paste is under way; its own restore comes after it
        now = time.monotonic()
        still_ours = self._clipboard_holds(paste)
        read = still_ours and ours.read_at is not None and (
            now - ours.read_at >= RESTORE_GRACE_MS / 1000)
        if not still_ours or read or now - sent >= RESTORE_MAX_MS / 1000:
            self._restore_clipboard(paste)
        else:
            QTimer.singleShot(RESTORE_POLL_MS, self,
                              lambda: self._restore_when_read(ours, paste, sent))

    def _restore_clipboard(self, paste: int) -> None:
        if paste != self._pastes:
            return  # a later paste is under way; its own restore comes after it
        self._restore_pending = False
        clipboard = QGuiApplication.clipboard()
        saved, self._saved = self._saved, None
        if not self._clipboard_holds(paste):
            # Something newer is on the clipboard (the user copied, File > Copy transcript):
            # it wins; restoring the old content would silently throw it away.
            return
        if saved is None:
            clipboard.clear(QClipboard.Mode.Clipboard)
        else:
            clipboard.setMimeData(saved, QClipboard.Mode.Clipboard)

    def _type_later(self, type_text: Callable[[str, int], None], text: str,
                    delete_chars: int) -> None:
        try:
            self._typing.submit(self._type_worker, type_text, text, delete_chars)
        except RuntimeError:  # closed: the app is quitting
            emit(self.finished, False, "Could not type the text: the app is quitting")

    def _pynput_type(self, controller: Any, text: str, delete_chars: int) -> None:
        self._backspace(controller, delete_chars)
        controller.type(text)

    def _type_worker(self, type_text: Callable[[str, int], None], text: str,
                     delete_chars: int = 0) -> None:
        try:
            type_text(text, delete_chars)
            self.timings.append(("typed", time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - top of the typing thread
            log.warning("typing failed: %s", exc)
            emit(self._typed, False, f"Could not type the text: {exc}")
            return
        done = f"Typed {len(text.strip())} characters" if text else ""
        if delete_chars:
            done = f"Deleted {delete_chars} characters" + (f"; {done.lower()}" if done else "")
        emit(self._typed, True, done)

    def _commit(self, mode: str, text: str, delete_chars: int) -> None:
        """On the typing thread: through IBus, or (it failed) back to the GUI thread's routes."""
        try:
            self.ibus.insert(text, delete_chars)
            self.timings.append(("committed", time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - top of the typing thread: any failure falls back
            log.warning("IBus route failed (%s): inserting the usual way", exc)
            if not (isinstance(exc, RouteError) and exc.transient):  # else: only this window
                self.ibus = None
            emit(self._ibus_failed, text, delete_chars, mode)
            return
        done = f"Committed {len(text.strip())} characters" if text else ""
        if delete_chars:
            done = f"Deleted {delete_chars} characters" + (f"; {done.lower()}" if done else "")
        emit(self._typed, True, done + " (IBus)")

    def _x11_typer(self) -> Any:
        if self._typer is None:
            from app.x11_typing import X11Typer

            self._typer = X11Typer()
        return self._typer

    def close(self) -> None:
        """Finish the texts being typed and give back the keycodes borrowed for them."""
        self._typing.shutdown(wait=True)
        if self.ibus is not None:
            self.ibus.close()
        if self._typer is not None:
            self._typer.close()

    def _keyboard_controller(self) -> Any:
        if self._controller is None:
            self._controller = pynput_keyboard().Controller()
        return self._controller


def copy_to_clipboard(text: str) -> None:
    """Export: put text on the clipboard (and the X11 selection, for middle-click paste)."""
    clipboard = QGuiApplication.clipboard()
    clipboard.setText(text, QClipboard.Mode.Clipboard)
    if clipboard.supportsSelection():
        clipboard.setText(text, QClipboard.Mode.Selection)
