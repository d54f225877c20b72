"""A scripted `engine.types.Runner` for tests of the layers above ASR (streaming, UI, server).

It is a real implementation of the interface whose output is fixed by a script, so tests can
assert exact text and timings without a model. Time costs are reported, never slept, unless
``sleep`` is injected (a test of the GUI's loading state, say).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from engine.types import (
    SAMPLE_RATE,
    Audio,
    DecodeOptions,
    DecodeRequest,
    ModelInfo,
    Segment,
    Transcript,
    Word,
)


class ScriptedRunner:
    """Returns the script's texts in order (cycling, one per request that is not silent),
    spreading words evenly over the audio.

    Silent audio (RMS below ``silence_rms``) returns an empty transcript, like a good backend.
    ``calls`` records (samples, options) for every request decoded, in order; with ``sleep``
    each request sleeps its ``decode_ms``.
    """

    def __init__(
        self,
        script: Sequence[str] = ("hello world",),
        *,
        decode_ms: float = 5.0,
        silence_rms: float = 1e-3,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self._script = list(script) or [""]
        self._index = 0
        self._decode_ms = decode_ms
        self._silence_rms = silence_rms
        self._sleep = sleep
        self.calls: list[tuple[int, DecodeOptions]] = []
        self.loaded = False

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(name="scripted", device="cpu", compute_type="none", multilingual=True)

    @property
    def streams(self) -> int:
        return 1

    @property
    def device(self) -> str:
        return "cpu"

    def load(self) -> None:
        self.loaded = True

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        return [self._decode(r.audio, r.options) for r in requests]

    def _decode(self, audio: Audio, options: DecodeOptions) -> Transcript:
        self.calls.append((len(audio), options))
        if self._sleep is not None:
            self._sleep(self._decode_ms / 1000)
        duration = len(audio)
        rms = float(np.sqrt(np.mean(np.square(audio)))) if duration else 0.0
        if rms < self._silence_rms:
            return Transcript(segments=(), language=options.language, duration=duration,
                              decode_ms=self._decode_ms)
        text = self._script[self._index % len(self._script)]
        self._index += 1
        tokens = text.split()
        words = tuple(
            Word(text=" " + tok, start=duration * i // len(tokens),
                 end=duration * (i + 1) // len(tokens), probability=0.9)
            for i, tok in enumerate(tokens)
        )
        segment = Segment(text=" " + text if text else "", start=0, end=duration, words=words,
                          avg_logprob=-0.2, no_speech_prob=0.01, compression_ratio=1.2)
        return Transcript(segments=(segment,) if text else (), language=options.language or "en",
                          duration=duration, decode_ms=self._decode_ms)


def silence(seconds: float) -> Audio:
    """Digital silence of the given length (a test helper)."""
    return np.zeros(int(seconds * SAMPLE_RATE), dtype=np.float32)
