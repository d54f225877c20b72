"""End-to-end self-test for `sottovoce doctor`: the user's own command, `sottovoce transcribe
--sample`, run in a child process on the bundled speech sample with the bundled model, and its
text compared with what the sample says (`resources.SAMPLE_TEXT`).

A child process, not an in-process call: it proves what a user would run (entry point, argument
parsing, decoding, model load, output) in a source checkout, a wheel install and the frozen bundle
alike, and a crash or hang in native code cannot take the doctor down with it.
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
import time
from dataclasses import dataclass

# Words in the same order as the reference, allowing one word in ten to differ: tiny.en gets the
# sample exactly; a broken model or decoder produces nothing or something unrelated (< 0.5).
MIN_AGREEMENT = 0.9
TIMEOUT_S = 180.0  # model load + 11 s of audio; seconds on any machine, minutes only when broken


@dataclass(frozen=True)
class SampleRun:
    text: str  # what the transcriber printed
    agreement: float  # 0..1, word-sequence similarity to resources.SAMPLE_TEXT
    seconds: float
    error: str = ""  # non-empty when the command failed or did not finish

    @property
    def ok(self) -> bool:
        return not self.error and self.agreement >= MIN_AGREEMENT


def transcribe_command() -> list[str]:
    """``sottovoce transcribe --sample`` as this installation runs it."""
    if getattr(sys, "frozen", False):  # the PyInstaller bundle: the executable is the app
        return [sys.executable, "transcribe", "--sample", "--no-progress"]
    return [sys.executable, "-m", "app.cli", "transcribe", "--sample", "--no-progress"]


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def agreement(text: str, reference: str) -> float:
    return difflib.SequenceMatcher(a=words(reference), b=words(text), autojunk=False).ratio()


def run_sample(timeout_s: float = TIMEOUT_S) -> SampleRun:
    from resources import SAMPLE_TEXT

    started = time.monotonic()
    try:
        done = subprocess.run(transcribe_command(), capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return SampleRun("", 0.0, time.monotonic() - started, f"no result within {timeout_s:g} s")
    seconds = time.monotonic() - started
    text = " ".join(done.stdout.split())
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return SampleRun(text, 0.0, seconds, last)
    return SampleRun(text, agreement(text, SAMPLE_TEXT), seconds)
