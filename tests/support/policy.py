"""Inputs for the streaming policy's tests: steady audio, a transcript with its words spread over
it, and an utterance that has started."""

from __future__ import annotations

import numpy as np

from engine.core.policy import StreamingPolicy
from engine.core.segmenter import SegmentStarted
from engine.types import SAMPLE_RATE, Segment, Transcript, Word

SR = SAMPLE_RATE


def audio(seconds: float) -> np.ndarray:
    return np.full(int(seconds * SR), 0.1, dtype=np.float32)


def transcript(text: str, *, seconds: float = 1.0, no_speech: float = 0.0, logprob: float = -0.2,
               language: str = "en", decode_ms: float = 50.0) -> Transcript:
    split = text.split()  # words spread evenly over the audio, like real speech
    words = tuple(Word(" " + w, int(i * seconds * SR / len(split)),
                       int((i + 1) * seconds * SR / len(split)), 0.9)
                  for i, w in enumerate(split))
    seg = Segment(text=" " + text, start=0, end=int(seconds * SR), words=words,
                  avg_logprob=logprob, no_speech_prob=no_speech)
    return Transcript(segments=(seg,) if text else (), language=language, decode_ms=decode_ms)


def started(policy: StreamingPolicy, start: int = 16000, seconds: float = 0.4,
            now: float = 0.0) -> list:
    return policy.handle(SegmentStarted(start=start, audio=audio(seconds)), now)
