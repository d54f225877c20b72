"""The oracle of real-model tests: what this model reads on this processor, in place of literal
words (which change with the processor's kernels)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.evaluation import normalize
from engine.types import SAMPLE_RATE, DecodeOptions, DecodeRequest


def plain_words(runner: Any, data: np.ndarray) -> list[str]:
    """The normalised words of one plain greedy decode of ``data`` (no prompt)."""
    result = runner.decode_batch([DecodeRequest(audio=data, options=DecodeOptions(
        language="en", word_timestamps=False, beam_size=1, temperatures=(0.0,),
        short_context=len(data) <= 10 * SAMPLE_RATE))])[0]
    return normalize(result.text).split()
