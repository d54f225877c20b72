"""Per-chunk hallucination checks and what to do about a failing chunk (pure, no model).

A decoded chunk is judged with engine.core.quality (compression ratio, average log-prob, words
per minute, repeated n-grams, the model's no-speech probability) plus one check only the
long-form pipeline can make: text on a chunk where VAD heard no speech at all.

The ladder for a failing chunk:
1. ``hotter``: decode it again on the padded 30 s path, starting at a higher temperature
   (sampling breaks the deterministic loop greedy decoding fell into);
2. ``split``: cut it in two at its quietest point and decode each half (a shorter window gives
   the model less room to loop or drift);
3. give up: keep the text but mark it with the failed checks (``Segment.flags``), except when the
   failure says "this is not speech": then the text is dropped and reported in
   ``Transcript.extra["dropped"]``, because a caption track must not say "Thank you." over a
   silent or noisy stretch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum

from engine.core.quality import QualityThresholds, check_text
from engine.types import SAMPLE_RATE, DecodeOptions, Transcript

SILENCE_FLAGS = frozenset({"no_speech", "text_on_silence"})


class Step(Enum):
    """Where a chunk is on the retry ladder (the stage of its next or latest decode)."""

    FIRST = 0
    HOTTER = 1
    SPLIT = 2


class Verdict(Enum):
    ACCEPT = "accept"
    RETRY_HOTTER = "retry_hotter"
    SPLIT = "split"
    GIVE_UP = "give_up"


@dataclass(frozen=True)
class RetryPolicy:
    """Thresholds and limits of the retry ladder.

    Attributes:
      thresholds: the hallucination checks' limits.
      hotter_temperatures: the schedule used for the re-decode (the runner falls back along it).
      min_split_s: chunks shorter than this are not split further (halves would be too short
        for the model to read reliably).
      silence_probability: a chunk whose highest VAD speech probability stays below this is
        "no speech"; any text on it fails ``text_on_silence``.
    """

    thresholds: QualityThresholds = dataclasses.field(default_factory=QualityThresholds)
    hotter_temperatures: tuple[float, ...] = (0.4, 0.6, 0.8, 1.0)
    min_split_s: float = 4.0
    silence_probability: float = 0.3

    def __post_init__(self) -> None:
        if not self.hotter_temperatures or min(self.hotter_temperatures) <= 0.0:
            raise ValueError("hotter_temperatures must be non-empty and above 0")
        if self.min_split_s < 1.0:
            raise ValueError("min_split_s must be at least 1 s")
        if not 0.0 < self.silence_probability < 1.0:
            raise ValueError("silence_probability must be within (0, 1)")


def chunk_flags(
    transcript: Transcript, seconds: float, max_speech_prob: float, policy: RetryPolicy
) -> tuple[str, ...]:
    """Names of the checks the chunk's text fails; empty when it looks like real speech."""
    text = transcript.text
    if not text:
        return ()
    segments = [s for s in transcript.segments if s.text.strip()]
    total_chars = sum(len(s.text) for s in segments) or 1
    # Long segments weigh more: one shaky word must not sink a confident paragraph.
    avg_logprob = sum(s.avg_logprob * len(s.text) for s in segments) / total_chars
    no_speech = max((s.no_speech_prob for s in segments), default=0.0)
    flags = list(check_text(text, seconds, avg_logprob=avg_logprob, no_speech_prob=no_speech,
                            thresholds=policy.thresholds))
    if max_speech_prob < policy.silence_probability:
        flags.append("text_on_silence")
    return tuple(flags)


def verdict(flags: tuple[str, ...], step: Step, seconds: float, policy: RetryPolicy) -> Verdict:
    """The next rung of the ladder for a chunk decoded at ``step`` with ``flags``."""
    if not flags:
        return Verdict.ACCEPT
    if step is Step.FIRST:
        return Verdict.RETRY_HOTTER
    if step is Step.HOTTER and seconds >= 2 * policy.min_split_s:
        return Verdict.SPLIT
    return Verdict.GIVE_UP


def hotter_options(options: DecodeOptions, policy: RetryPolicy) -> DecodeOptions:
    """The options of the hotter re-decode: padded window, sampled at higher temperatures.

    No prompt: conditioning on earlier text is the usual way a loop carries over.
    """
    return dataclasses.replace(options, temperatures=policy.hotter_temperatures,
                               short_context=False, prompt=None)


def give_up(transcript: Transcript, flags: tuple[str, ...]) -> tuple[Transcript, bool]:
    """The transcript to keep after the last rung, and whether its text was dropped.

    Text failing only "this is not speech" checks is dropped (returned empty); anything else is
    kept with the flags, for a person to judge.
    """
    if flags and set(flags) <= SILENCE_FLAGS:
        return dataclasses.replace(transcript, segments=()), True
    return transcript, False


def seconds_of(samples: int) -> float:
    return samples / SAMPLE_RATE
