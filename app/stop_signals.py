"""Ctrl+C, SIGTERM and SIGHUP for a command that runs until stopped (`sottovoce listen`, the
app: app.gui_main).

A handler only records the signal; the main thread polls for it between short waits. Raising
KeyboardInterrupt wherever the main thread happens to be (inside a join, inside an engine's
stop) is what left native threads (PortAudio, CTranslate2, onnxruntime) running at interpreter
exit, which aborts the process; and a handler that took a lock could deadlock the main thread
it interrupts, so none does.

The first signal asks for a graceful stop (the utterance in flight is decoded, the server's
last final awaited); a second one asks to stop at once, keeping what was already heard.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                if hasattr(signal, name))  # Windows has no SIGHUP
POLL_S = 0.1


class Stoppable(Protocol):
    def stop(self) -> None: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class StopSignals:
    """Records SIGINT, SIGTERM and SIGHUP while installed (a context manager); the previous
    handlers come back on exit."""

    def __init__(self, on_signal: Callable[[int], None] | None = None) -> None:
        self.received: list[int] = []
        self._previous: dict[int, Any] = {}
        self._on_signal = on_signal  # called with the count so far (the app's own loop)

    def __enter__(self) -> StopSignals:
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _record(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)  # list.append is atomic; no lock to deadlock on
        if self._on_signal is not None:
            self._on_signal(len(self.received))

    def exit_status(self, graceful: int) -> int:
        """``graceful`` after one Ctrl+C (the usual way to end listening); 128 + the last
        signal's number when a SIGTERM or SIGHUP ended it or a second signal cut it short."""
        if not self.received:
            return graceful
        if self.received == [signal.SIGINT]:
            return graceful
        return 128 + int(self.received[-1])


def run_until_stopped(engine: Stoppable, signals: StopSignals, *, abort: Callable[[], None],
                      finishing: str) -> None:
    """Wait for ``engine`` to end: the first signal stops it (``finishing`` says what it still
    does), the second calls ``abort`` (stop at once, keep what was heard). Returns once the
    engine's threads have all finished, so the interpreter never exits under them."""
    stopping = aborted = False
    while not engine.wait(POLL_S):
        count = len(signals.received)
        if count >= 1 and not stopping:
            stopping = True
            _say(f"\nstopping ({finishing}; Ctrl+C again to stop at once)...")
            engine.stop()
        if count >= 2 and not aborted:
            aborted = True
            _say("stopping now; what was heard is kept...")
            abort()


def _say(text: str) -> None:
    # stderr gone (a closed terminal after SIGHUP): stop quietly all the same.
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)
