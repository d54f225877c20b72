"""Regression: a long prompt on a short chunk used to crash CTranslate2 (SIGSEGV) because
generate()'s max_length did not cover the prompt. Run in a subprocess so a crash fails the test
instead of killing the test session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.asr.ct2_passes import MAX_LENGTH, generate_max_length

REPRO = """
from engine.asr.ct2_decoder import Ct2Runner
from engine.types import DecodeOptions, DecodeRequest
from engine.audio.decode import load_audio
audio = load_audio({path!r})[351424:370880]  # 1.2 s: a short window with a tiny token budget
fast = Ct2Runner("tiny.en"); fast.load()
prompt = ("the acoustic corpus was recorded by one speaker who kept talking about many "
          "different things for a long time ") * 4
for cap in (199, 400, len(prompt)):
    options = DecodeOptions(short_context=True, beam_size=1, prompt=prompt[:cap])
    result = fast.decode_batch([DecodeRequest(audio, options)])[0]
    print("ok", cap, result.extra.get("path"))
"""


def test_max_length_covers_prompt_and_budget() -> None:
    assert generate_max_length(0, 20) == 40  # new tokens <= max_length // 2
    assert generate_max_length(100, 20) == 121  # new tokens <= max_length - prompt
    assert generate_max_length(400, 200) == MAX_LENGTH


@pytest.mark.model
def test_long_prompt_on_short_chunk_does_not_crash(shared_audio: Path) -> None:
    code = REPRO.format(path=str(shared_audio / "mfa-acoustic-corpus.wav"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
    assert out.stdout.count("ok ") == 3
