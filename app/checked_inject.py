"""Insertions that are checked: the text must be seen in the focused field, not just sent.

`CheckedInjector` wraps app.inject.TextInjector (same API: the controller, dictation and voice
editing use it unchanged) and, for each text, in order:
1. probes the focused field on the accessibility bus (app.verify, on a worker thread): a
   password field gets nothing ("not typed: a password field has focus");
2. inserts through the configured route (paste or type; on Wayland the route chain of
   app.wayland_inject);
3. checks the field: all there -> "verified"; the field can't be read (a terminal, a game, an
   app without accessibility) -> "sent, not verified"; none or only the first part there (a
   route that exits 0 and does nothing, an app that ignores paste) -> the missing part through
   the other route (type for paste, paste for type), checked again; still missing -> the text
   is left on the clipboard and the user told "not inserted: press Ctrl+V". Something else in
   the field changed (the user typed, an autocorrect) -> not sent again: nothing goes in twice.
The outcome joins the latency breakdown (app.latency_trace, the latency meter's tooltip) as its
last step: "verified", "sent not verified" or "not inserted".
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal, SignalInstance

from app.inject import (
    HELD_POLL_MS,
    HELD_WAIT_S,
    TextInjector,
    copy_to_clipboard,
    merge_waiting,
    modifiers_held,
)
from app.verify import CHANGED, MISSING, PASSWORD, UNVERIFIABLE, VERIFIED, Check, Probe, Verifier
from app.wayland_inject import RouteError, WaylandInserter
from engine.core.sanitize import clean
from ui.qt_compat import emit

log = logging.getLogger(__name__)

OTHER_MODE = {"paste": "type", "type": "paste"}


@dataclass
class Job:
    text: str
    delete_chars: int
    mode: str
    probe: Probe | None = None
    message: str = ""  # what the route said it did
    retried: bool = False


class CheckedInjector(QObject):
    """Lives on the GUI thread; one text at a time (the next waits for the check)."""

    finished = Signal(bool, str)  # ok, message for the user
    _probed = Signal(object)  # Probe, from the worker
    _checked = Signal(object)  # Check, from the worker

    def __init__(self, injector: TextInjector, verifier: Verifier | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.raw = injector
        self.verifier = verifier or Verifier()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sottovoce-verify")
        self._jobs: deque[Job] = deque()
        self._job: Job | None = None
        self._since = 0.0  # since when the first queued text waits
        # Texts wait here (not in the raw injector) while Ctrl/Alt/Shift/Super are held, so
        # they are merged as before and the field is probed once the user lets go.
        self._held = QTimer(self)
        self._held.setSingleShot(True)
        self._held.setInterval(HELD_POLL_MS)
        self._held.timeout.connect(self._next)
        injector.finished.connect(self._sent)
        self._probed.connect(self._on_probed)
        self._checked.connect(self._on_checked)

    # -- the TextInjector API ----------------------------------------------------------------
    @property
    def mode(self) -> str:
        return self.raw.mode

    @property
    def paste_keys(self) -> str:
        return self.raw.paste_keys

    @property
    def timings(self) -> list[tuple[str, float]]:
        return self.raw.timings

    @property
    def wayland(self) -> WaylandInserter | None:
        return self.raw.wayland

    @property
    def waiting(self) -> int:
        return len(self._jobs) + self.raw.waiting

    def configure(self, mode: str, paste_keys: str) -> None:
        self.raw.configure(mode, paste_keys)

    def use_wayland(self, inserter: WaylandInserter | None) -> None:
        self.raw.use_wayland(inserter)

    def use_ibus(self, route: Any) -> None:
        self.raw.use_ibus(route)

    def inject(self, text: str, mode: str | None = None) -> None:
        if text.strip():
            self.insert(text.strip() + " ", mode=mode)

    def insert(self, text: str, delete_chars: int = 0, mode: str | None = None) -> None:
        mode = mode or self.raw.mode
        # Cleaned as the raw injector will (app.inject): a text it drops must not be waited for.
        text = clean(text, newlines=True, tabs=True)
        if (not text and delete_chars <= 0) or mode == "off":
            return
        if not self._jobs:
            self._since = time.monotonic()
        self._jobs.append(Job(text, delete_chars, mode))
        self._next()

    def close(self) -> None:
        self._worker.shutdown(wait=True, cancel_futures=True)
        self.verifier.close()
        self.raw.close()

    # -- the chain ------------------------------------------------------------------------------
    def _next(self) -> None:
        if self._job is not None or not self._jobs or self._held.isActive():
            return
        held = self.raw.wayland is None and modifiers_held()
        if held and time.monotonic() - self._since < HELD_WAIT_S:
            self._held.start()
            return
        merged = merge_waiting((j.text, j.delete_chars, j.mode) for j in self._jobs)
        self._jobs = deque(Job(*each) for each in merged[1:])
        self._since = time.monotonic()
        self._job = job = Job(*merged[0])
        self._submit(lambda: self.verifier.probe(job.delete_chars), self._probed, Probe(None))

    def _submit(self, work: Callable[[], object], done: SignalInstance, fallback: object) -> None:
        """`work` on the worker, its answer to `done`; `fallback` if it breaks unexpectedly (a
        job left waiting would hold every later dictation back)."""
        def run() -> None:
            try:
                answer = work()
            except Exception:  # noqa: BLE001 - top of the worker: fall back, never get stuck
                log.exception("checking an insertion failed")
                answer = fallback
            emit(done, answer)

        try:
            self._worker.submit(run)
        except RuntimeError:  # closed: the app is quitting
            self._job = None

    def _on_probed(self, probe: Probe) -> None:
        job = self._job
        if job is None:
            return
        job.probe = probe
        if probe.verdict == PASSWORD:
            self.raw.timings = []  # (the last insertion's steps are not this one's)
            self._stamp("password_field_skipped")
            self._done(False, "Not typed: a password field has focus (dictation never types "
                              "into one)")
            return
        self.raw.insert(job.text, job.delete_chars, job.mode)

    def _sent(self, ok: bool, message: str) -> None:
        """The route's word: sent (or not). Sent text is checked in the field."""
        job = self._job
        if job is None:  # an insertion made on the raw injector directly
            emit(self.finished, ok, message)
            return
        if not ok:
            self._done(False, f"{job.message}; {message}" if job.message else message)
            return
        job.message = f"{job.message}; {message}" if job.message else message
        probe, text = job.probe, job.text
        assert probe is not None
        self._submit(lambda: self.verifier.check(probe, text), self._checked,
                     Check(UNVERIFIABLE))

    def _on_checked(self, check: Check) -> None:
        job = self._job
        if job is None:
            return
        if check.verdict == VERIFIED:
            self._stamp("verified")
            self._done(True, f"{job.message} · verified")
        elif check.verdict == UNVERIFIABLE:
            self._stamp("sent_not_verified")
            self._done(True, f"{job.message} · sent, not verified")
        elif check.verdict == CHANGED:
            self._stamp("sent_not_verified")
            self._done(True, f"{job.message} · sent, but the field does not show it as "
                             "dictated: not verified, check it")
        elif check.verdict == MISSING and not job.retried:
            log.warning("%d of %d characters did not arrive through %s: trying %s",
                        len(check.missing), len(job.text), job.mode, OTHER_MODE[job.mode])
            job.retried, job.mode = True, OTHER_MODE[job.mode]
            # The check after the retry still compares with the field before the first try.
            self.raw.insert(check.missing, check.delete_left, job.mode)
        else:
            self._leave_on_clipboard(job, check)

    def _leave_on_clipboard(self, job: Job, check: Check) -> None:
        text = check.missing.strip() or job.text.strip()
        try:
            if self.raw.wayland is not None and self.raw.wayland.clipboard is not None:
                self.raw.wayland.clipboard.write_text(text)
            else:
                copy_to_clipboard(text)
        except RouteError as exc:
            self._done(False, f"Not inserted, and the clipboard failed too: {exc}")
            return
        self._stamp("not_inserted")
        self._done(False, "Not inserted: press Ctrl+V (the text is on the clipboard)")

    def _stamp(self, step: str) -> None:
        """The check's outcome as the last step of the latency breakdown (the meter's tooltip)."""
        self.raw.timings.append((step, time.monotonic()))

    def _done(self, ok: bool, message: str) -> None:
        self._job = None
        emit(self.finished, ok, message)
        self._next()


def checked(injector: TextInjector) -> CheckedInjector:
    """The controller's injector: `injector` with its insertions checked."""
    return CheckedInjector(injector, parent=injector.parent())

