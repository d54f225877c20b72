"""Driving the sans-I/O stream core synchronously: audio fed block by block on its own clock,
every decode job answered at once (by a runner, or by a function of the job)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from engine.core.policy import Job
from engine.core.stream import StreamCore
from engine.events import Event
from engine.types import SAMPLE_RATE, VAD_WINDOW, Runner, Transcript

Answer = Callable[[Job], Transcript]


def answered_by(runner: Runner) -> Answer:
    """Each job decoded by ``runner``, one request at a time."""
    return lambda job: runner.decode_batch([job.request])[0]


def drive(core: StreamCore, data: np.ndarray, answer: Answer, *, block: int = VAD_WINDOW,
          tick: float | None = None, release: int | None = None, flush: bool = True,
          on_job: Callable[[Job], None] | None = None) -> list[Event]:
    """Feed ``data`` in blocks of ``block`` samples, the clock moving ``tick`` seconds a block
    (None: the block's duration), and answer every job at once; a push-to-talk release at
    sample ``release``; the core flushed at the end (``flush``). ``on_job`` sees each job
    before it is answered. Returns the events."""
    step = block / SAMPLE_RATE if tick is None else tick
    now, events = 0.0, []

    def answer_all() -> None:
        while (job := core.next_job(now)) is not None:
            if on_job is not None:
                on_job(job)
            events.extend(core.on_result(job, answer(job), now))

    for i in range(0, len(data), block):
        now += step
        if release is not None and i <= release < i + block:
            core.end(release)
        events.extend(core.feed(data[i:i + block], now))
        answer_all()
    if flush:
        events.extend(core.flush(now))
        answer_all()
    return events
