"""The long-form pipeline's side of the quality ladder (engine.core.ladder): judging a decoded
chunk and the options of its re-decode (pure, no model).

A chunk is judged with ladder.check (loops, no-speech, confidence...) plus one check only the
long-form pipeline can make: text on a chunk where VAD heard no speech at all. Its rungs are
`ladder.LONG_FORM`'s:
1. ``beam``: a greedy chunk whose only failures are low confidence is decoded again with
   beam 5 (same window, prompt and timestamps);
2. ``hotter``: decode it again on the padded 30 s path, starting at a higher temperature
   (sampling breaks the deterministic loop greedy decoding fell into);
3. ``split``: cut it in two at its quietest point and decode each half (a shorter window gives
   the model less room to loop or drift);
4. give up: keep the text but mark it with the failed checks (``Segment.flags``), except when the
   failure says "this is not speech": then the text is dropped and reported in
   ``Transcript.extra["dropped"]``, because a caption track must not say "Thank you." over a
   silent or noisy stretch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum

from engine.core import ladder
from engine.core.ladder import LONG_FORM, SILENCE_FLAGS, QualityThresholds, Rung, is_greedy
from engine.types import SAMPLE_RATE, DecodeOptions, Transcript

__all__ = ["SILENCE_FLAGS", "RetryPolicy", "Step", "Verdict", "beam_options", "chunk_flags",
           "give_up", "hotter_options", "is_greedy", "long_form_thresholds", "seconds_of",
           "verdict"]


class Step(Enum):
    """Where a chunk is on the retry ladder (the stage of its next or latest decode)."""

    FIRST = 0
    HOTTER = 1
    SPLIT = 2
    BEAM = 3


class Verdict(Enum):
    ACCEPT = "accept"
    RETRY_BEAM = "retry_beam"
    RETRY_HOTTER = "retry_hotter"
    SPLIT = "split"
    GIVE_UP = "give_up"


# The rungs a chunk at each step has been through. A split half has been through them all: it
# is judged once and kept or given up on (the step cannot tell its history, and a half sent
# back to the beam rung could go round beam -> hotter -> split again).
_TRIED = {Step.FIRST: (), Step.BEAM: (Rung.BEAM,), Step.HOTTER: (Rung.HOTTER,),
          Step.SPLIT: (Rung.BEAM, Rung.HOTTER, Rung.SPLIT)}
_VERDICTS = {Rung.ACCEPT: Verdict.ACCEPT, Rung.BEAM: Verdict.RETRY_BEAM,
             Rung.HOTTER: Verdict.RETRY_HOTTER, Rung.SPLIT: Verdict.SPLIT,
             Rung.FLAG: Verdict.GIVE_UP, Rung.DROP: Verdict.GIVE_UP}


def long_form_thresholds() -> QualityThresholds:
    """The checks' limits for long-form chunks: the worst-word rule of the beam rung is off.

    On long-form chunks the worst-word rule sends many chunks to beam 5 for a small WER gain
    at a large CPU cost, enough to lose most of the pipeline's speed. The average
    log-probability rule stays, tighter than the live path's -0.85 (which almost never fires on
    chunks): -0.5 sends the unsure chunks of long readings to beam 5 for a gain at about the
    same CPU time, and a tighter rule helped the readings but hurt mixed speakers at more CPU,
    so -0.5 stays (figures: docs/evidence.md).
    """
    return QualityThresholds(confident_word_prob=0.0, confident_logprob=-0.5)


@dataclass(frozen=True)
class RetryPolicy:
    """Thresholds and limits of the retry ladder.

    Attributes:
      thresholds: the hallucination checks' limits (and the low-confidence rung's).
      hotter_temperatures: the schedule used for the re-decode (the runner falls back along it).
      min_split_s: chunks shorter than this are not split further (halves would be too short
        for the model to read reliably).
      silence_probability: a chunk whose highest VAD speech probability stays below this is
        "no speech"; any text on it fails ``text_on_silence``.
      beam_size: the low-confidence rung's beam.
    """

    thresholds: QualityThresholds = dataclasses.field(default_factory=long_form_thresholds)
    hotter_temperatures: tuple[float, ...] = (0.4, 0.6, 0.8, 1.0)
    min_split_s: float = LONG_FORM.min_split_s
    silence_probability: float = 0.3
    beam_size: int = 5

    def __post_init__(self) -> None:
        if not self.hotter_temperatures or min(self.hotter_temperatures) <= 0.0:
            raise ValueError("hotter_temperatures must be non-empty and above 0")
        if self.min_split_s < 1.0:
            raise ValueError("min_split_s must be at least 1 s")
        if not 0.0 < self.silence_probability < 1.0:
            raise ValueError("silence_probability must be within (0, 1)")
        if self.beam_size < 2:
            raise ValueError("beam_size must be at least 2 (1 is the greedy first decode)")


def chunk_flags(transcript: Transcript, seconds: float, max_speech_prob: float,
                policy: RetryPolicy, *, greedy: bool = False,
                hotwords: str | None = None) -> tuple[str, ...]:
    """Names of the checks the chunk's text fails; empty when it looks like real speech.

    ``greedy``: the chunk was decoded greedily, so low confidence is a reason to retry.
    ``hotwords``: the vocabulary it was decoded with (a recited list is "prompt_echo").
    """
    text = transcript.text
    if not text:
        return ()
    segments = [s for s in transcript.segments if s.text.strip()]
    total_chars = sum(len(s.text) for s in segments) or 1
    # Long segments weigh more: one shaky word must not sink a confident paragraph.
    avg_logprob = sum(s.avg_logprob * len(s.text) for s in segments) / total_chars
    no_speech = max((s.no_speech_prob for s in segments), default=0.0)
    worst = min((w.probability for s in segments for w in s.words), default=None)
    return ladder.check(text, seconds, avg_logprob=avg_logprob, no_speech_prob=no_speech,
                        min_word_prob=worst, greedy=greedy, max_speech_prob=max_speech_prob,
                        silence_probability=policy.silence_probability,
                        thresholds=policy.thresholds, hotwords=hotwords)


def verdict(flags: tuple[str, ...], step: Step, seconds: float, policy: RetryPolicy, *,
            greedy: bool = False) -> Verdict:
    """The next rung of the ladder for a chunk decoded at ``step`` with ``flags``."""
    rungs = dataclasses.replace(LONG_FORM, min_split_s=policy.min_split_s)
    rung = ladder.next_rung(flags, _TRIED[step], seconds=seconds, greedy=greedy, ladder=rungs)
    return _VERDICTS[rung]


def beam_options(options: DecodeOptions, policy: RetryPolicy) -> DecodeOptions:
    """The options of the low-confidence re-decode: the same, with beam search."""
    return dataclasses.replace(options, beam_size=policy.beam_size)


def hotter_options(options: DecodeOptions, policy: RetryPolicy) -> DecodeOptions:
    """The options of the hotter re-decode: padded window, sampled at higher temperatures.

    No prompt and no vocabulary: conditioning on earlier text is the usual way a loop carries
    over, and a recited vocabulary list comes here too.
    """
    return dataclasses.replace(options, temperatures=policy.hotter_temperatures,
                               short_context=False, prompt=None, hotwords=None)


def give_up(transcript: Transcript, flags: tuple[str, ...]) -> tuple[Transcript, bool]:
    """The transcript to keep after the last rung, and whether its text was dropped.

    Text failing only "this is not speech" checks, or too long for its audio, is dropped
    (returned empty); anything else is kept with the flags, for a person to judge.
    """
    if ladder.drops(flags):
        return dataclasses.replace(transcript, segments=()), True
    return transcript, False


def seconds_of(samples: int) -> float:
    return samples / SAMPLE_RATE
