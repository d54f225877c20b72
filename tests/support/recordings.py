"""Recorded decodes for tests (`engine.asr.recorded`): a test that needs a particular behaviour of
the real model replays a recording of it, so it passes on any processor.

    runner = recorded_runner("vocabulary-misspelling", lambda: Ct2Runner("tiny.en"))

replays ``tests/recordings/vocabulary-misspelling.jsonl``. With ``SOTTOVOCE_RECORD=1`` in the
environment it decodes with the real runner ``make`` builds and writes that file again (commit
it with the test). The model guard (tests/conftest.py) is off while recording, since a replaying
test carries no ``model`` marker. Record on purpose, look at what the recording says (each line
holds the text), and keep the behaviour the test is about in the recording's name.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from engine.asr.recorded import RECORD_ENV, RecordingRunner, ReplayRunner
from engine.types import Runner

RECORDINGS = Path(__file__).resolve().parents[1] / "recordings"


def recording_path(name: str) -> Path:
    return RECORDINGS / f"{name}.jsonl"


def recording() -> bool:
    """Whether this run records (``SOTTOVOCE_RECORD=1``) instead of replaying."""
    return os.environ.get(RECORD_ENV, "") not in ("", "0")


def recorded_runner(name: str, make: Callable[[], Runner], *, streams: int = 1) -> Runner:
    """The replay of recording ``name``; while recording, ``make()``'s real runner, recorded."""
    if recording():
        return RecordingRunner(make(), recording_path(name))
    return ReplayRunner(recording_path(name), streams=streams)
