"""Where a dictation's latency goes: the steps one final passed, from the key release (push-to-
talk) or the end of speech (VAD) to the text sent into the focused app.

The engine stamps its steps on `FinalText.stages` (end of speech, utterance closed, final decode
queued / started / done, event emitted); the app adds the key release, the moment the GUI thread
got the final, and the injector's steps (`app.inject.TextInjector.timings`). All are
``time.monotonic()`` seconds (CLOCK_MONOTONIC, shared with other processes: `bench/app_latency.py`
lines them up with the moment the text showed in the target app). The breakdown is logged as one
line (``latency breakdown from <origin> at <t>: name=+ms ...``) and shown in the latency meter's
tooltip.
"""

from __future__ import annotations

from collections.abc import Sequence

Stages = Sequence[tuple[str, float]]


def breakdown(stages: Stages, origin: str) -> list[tuple[str, float]]:
    """Each step's time in ms after ``origin`` (the first step when it is missing), in the
    order the steps happened (a speculative final is queued before its utterance ended)."""
    if not stages:
        return []
    times = dict(stages)
    zero = times.get(origin, stages[0][1])
    return sorted(((name, (at - zero) * 1000) for name, at in stages), key=lambda row: row[1])


def describe(rows: Sequence[tuple[str, float]]) -> str:
    """``name=+12 other=+140``: the log line's body, one token per step."""
    return " ".join(f"{name}={ms:+.0f}" for name, ms in rows)


def parse(body: str) -> dict[str, float]:
    """The inverse of `describe` (for the benchmark reading the log)."""
    rows: dict[str, float] = {}
    for token in body.split():
        name, _, value = token.partition("=")
        if value:
            rows[name] = float(value)
    return rows
