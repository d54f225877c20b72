"""Voice edits of a selection ("command mode"): select text in any application, hold the command
hotkey (`Settings.command_hotkey`) or send ``edit press`` / ``edit release`` to the control
socket, say what to do ("make this more formal", "translate to French"), let go.

The spoken instruction is dictated like any push-to-talk utterance, but its final goes here, not
into the application. Then, on the GUI thread, step by step without blocking:
1. the selection is read through the clipboard: the user's clipboard is kept, the copy keys are
   sent (the selected text is still selected in the focused application), the copied text is
   taken as soon as the clipboard changes, and the user's clipboard is put back;
2. the selection and the instruction go to the LLM server (app.polish.Polisher.edit: the same
   time budget; the answer must not be empty or a refusal);
3. the answer is pasted over the selection (app.inject: its own clipboard save and restore).
Nothing is replaced when any step fails (nothing selected, the server down, slow or refusing):
the status bar says why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QMimeData, QObject, QTimer
from PySide6.QtGui import QClipboard, QGuiApplication

from app.checked_inject import CheckedInjector
from app.hotkeys import pynput_keyboard
from app.inject import snapshot_clipboard
from app.polish import Outcome, Polisher
from app.settings import Settings
from ui.main_window import MainWindow

log = logging.getLogger(__name__)

COPY_WAIT_MS = 1000  # the focused application's time to put the selection on the clipboard
_PROBE = "application/x-sottovoce-selection-probe"


class SelectionReader(QObject):
    """Reads the focused application's selection through the clipboard, once per `read`."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._done: Callable[[str | None], None] | None = None
        self._saved: QMimeData | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(lambda: self._finish(None))
        QGuiApplication.clipboard().dataChanged.connect(self._changed)

    def read(self, done: Callable[[str | None], None]) -> None:
        """``done(text)`` on the GUI thread: the selected text, or None when nothing was copied."""
        clipboard = QGuiApplication.clipboard()
        self._saved = snapshot_clipboard(clipboard)
        probe = QMimeData()
        probe.setData(_PROBE, b"1")  # what is on the clipboard until the application copies
        clipboard.setMimeData(probe, QClipboard.Mode.Clipboard)
        self._done = done
        self._timer.start(COPY_WAIT_MS)
        try:
            keyboard = pynput_keyboard()
            controller = keyboard.Controller()
            with controller.pressed(keyboard.Key.ctrl):
                controller.press("c")
                controller.release("c")
        except Exception as exc:  # noqa: BLE001 - any backend failure is shown to the user
            log.warning("copy keys failed: %s", exc)
            self._finish(None)

    def _changed(self) -> None:
        if self._done is None:
            return
        data = QGuiApplication.clipboard().mimeData(QClipboard.Mode.Clipboard)
        if data is None or data.hasFormat(_PROBE) or not data.hasText():
            return
        self._finish(data.text())

    def _finish(self, text: str | None) -> None:
        done, self._done = self._done, None
        if done is None:
            return
        self._timer.stop()
        saved, self._saved = self._saved, None
        clipboard = QGuiApplication.clipboard()
        if saved is None:
            clipboard.clear(QClipboard.Mode.Clipboard)
        else:
            clipboard.setMimeData(saved, QClipboard.Mode.Clipboard)
        done(text)


class VoiceEdit(QObject):
    """Command mode's state: idle, listening (hotkey held), waiting (for the instruction's
    final), busy (reading the selection, asking the server)."""

    def __init__(self, settings: Callable[[], Settings], window: MainWindow,
                 injector: CheckedInjector, polisher: Polisher, on_ptt: Callable[[str], None],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._settings, self.window, self.injector = settings, window, injector
        self.polisher, self._on_ptt = polisher, on_ptt
        self.state = "idle"
        self.selection = SelectionReader(self)
        self._said: list[str] = []
        self.last_result: tuple[bool, str] | None = None  # (replaced, message), for tests/logs

    def on_command(self, action: str) -> str:
        """"press" / "release" from the command hotkey or the control socket."""
        if action == "press" and not self._settings().polish:
            self.window.show_message("Voice edits need AI polish: turn it on in "
                                          "Settings > AI polish", 10000)
            return "error AI polish is off"
        if action == "press" and self.state == "idle":
            self.state, self._said = "listening", []
            self._on_ptt("press")
        elif action == "release" and self.state == "listening":
            self.state = "waiting"
            self._on_ptt("release")
        return f"ok edit {self.state}"

    def take(self, text: str) -> bool:
        """A final text: the spoken instruction while command mode listens (True: taken)."""
        if self.state not in ("listening", "waiting"):
            return False
        if text.strip():
            self._said.append(text.strip())
        if self.state == "waiting":
            self._start(" ".join(self._said))
        return True

    def _start(self, command: str) -> None:
        if not command:
            self._end(False, "Voice edit: no instruction was heard; nothing changed")
            return
        self.state = "busy"
        self.selection.read(lambda selection: self._ask(selection, command))

    def _ask(self, selection: str | None, command: str) -> None:
        if not selection or not selection.strip():
            self._end(False, "Voice edit: no text is selected (nothing was copied); "
                      "nothing changed")
            return
        log.info("voice edit: %r on %d selected characters", command, len(selection))
        self.polisher.edit(selection, command,
                                lambda outcome: self._replace(outcome, selection))

    def _replace(self, outcome: Outcome, selection: str) -> None:
        if not outcome.ok:
            self._end(False, f"Voice edit failed ({outcome.reason}: {outcome.detail}); "
                      "nothing changed")
            return
        # Keep the selection's own leading/trailing whitespace (a selected line's newline).
        lead = selection[:len(selection) - len(selection.lstrip())]
        trail = selection[len(selection.rstrip()):]
        self.injector.insert(lead + outcome.text + trail, 0, "paste")
        self._end(True, f"Voice edit: replaced {len(selection)} characters "
                  f"(+{outcome.llm_ms:.0f} ms)")

    def _end(self, replaced: bool, message: str) -> None:
        self.state = "idle"
        self.last_result = (replaced, message)
        (log.info if replaced else log.warning)("%s", message)
        self.window.show_message(message, 4000 if replaced else 15000)
