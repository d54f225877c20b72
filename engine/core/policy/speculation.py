"""Speculative finals: decode an utterance before it is known to have ended (sans-I/O).

One `Speculation` per utterance, in one of the `SpecState`s; `usable` says whether its decode
may stand for the final.

Most of the wait between the end of speech and the final text is spent waiting: for the
segmenter's min-silence hangover (VAD mode: is this a pause or the end?) or for the push-to-talk
tail after the key release. A speculative final decodes the utterance as it is at that moment,
on a free decode stream, while the wait goes on:

- VAD mode: when the silence after the last speech window reaches the end pad
  (`engine.core.segmenter.SegmentPaused`), the utterance's audio is exactly what its final would
  decode if nothing more is said;
- push-to-talk: when the speech pauses for the end pad while the key is held (if the key is
  then let go before speech resumes, the utterance ends at the release with no tail to wait
  for, and the final is usually ready), else at the key release, once the audio up to it has
  arrived.

When the utterance then ends, the speculative result is used as the final if no speech was
heard after the audio it decoded and it covers the speech the segmenter reports (`usable`);
otherwise it is thrown away and the final is decoded as usual. Speech resuming during the wait
discards it at once. Either way nothing is lost or said twice: a final is always emitted once,
from the speculative decode or from a regular one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from engine.core.form import ends_sentence_in, reads_finished, reads_open
from engine.core.policy.hints import CutAt, Reading
from engine.types import SAMPLE_RATE

if TYPE_CHECKING:
    from engine.core.policy.job import Job
    from engine.types import Transcript


# A partial that heard this much past a sentence cut's pause without saying whether a sentence
# ends there gives the cut up; one that heard less than CUT_HEARD_S past it cannot tell yet (no
# word after the pause), so the verdict's partial waits for that much.
CUT_VERDICT_S = 4.0
CUT_HEARD_S = 0.5


def usable(cut: int, soft: bool, *, end: int, speech_end: int, speech_upto: int,
           ended_soft: bool) -> bool:
    """Whether a speculative decode of the utterance's audio up to stream sample ``cut``
    (decoded as ``soft`` or not) may stand for the final of the utterance that ended at ``end``
    with its last speech at ``speech_end`` (the segmenter's) and ``speech_upto`` (the end of the
    last audio any window called speech): nothing spoken after the audio it decoded, none of
    the final's audio missing from it, decoded as carefully as the final would be."""
    return (soft == ended_soft and speech_upto <= cut and speech_end <= cut and cut <= end)


class SpecState(Enum):
    """Where an utterance's speculative final is.

    NONE -> DUE (a pause: `speculate`) -> DECODING (issued) -> BACK (result in, the utterance
    still open) -> CONFIRMED (kept for a sentence cut, and a partial that heard past its pause
    ends a sentence there too). Any state -> NONE when it is dropped (speech resumed over a
    pause that cannot be a cut, a verdict against the cut, a failed decode); DECODING/BACK/
    CONFIRMED stand for the final when the utterance ends and `usable` says so."""

    NONE = "none"
    DUE = "due"
    DECODING = "decoding"
    BACK = "back"
    CONFIRMED = "confirmed"


@dataclass
class Speculation:
    """An utterance's speculative final (`SpecState`). ``at``: decode the audio up to this
    stream sample (DUE); ``soft``: the pause came on the segmenter's soft path; ``job``: its
    decode (DECODING on); ``upto``: the utterance's ``speech_upto`` when it was issued (speech
    may resume after it: a sentence cut); ``result``, ``text`` (its spoken text) and ``reads``
    (how that reads: `engine.core.form.reads_finished` / `reads_open`) once BACK."""

    state: SpecState = SpecState.NONE
    at: int = 0
    soft: bool = False
    job: Job | None = None
    upto: int = 0
    result: Transcript | None = None
    text: str = ""
    reads: Reading | None = None

    @property
    def issued(self) -> bool:
        """Its decode was issued (in flight or back)."""
        return self.state in (SpecState.DECODING, SpecState.BACK, SpecState.CONFIRMED)

    @property
    def has_result(self) -> bool:
        """Its decode is back (BACK or CONFIRMED)."""
        return self.state in (SpecState.BACK, SpecState.CONFIRMED)

    @property
    def end(self) -> int:
        """The stream sample after the audio its decode covers."""
        assert self.job is not None
        return self.job.start + len(self.job.audio)

    def resumed(self, speech_upto: int) -> bool:
        """Speech was heard (up to ``speech_upto``) after the audio it decoded."""
        return self.issued and speech_upto > self.end

    def schedule(self, at: int, soft: bool) -> None:
        """Decode the audio up to stream sample ``at`` once it has arrived (DUE)."""
        self.state, self.at, self.soft = SpecState.DUE, at, soft

    def issue(self, job: Job, upto: int) -> None:
        self.state, self.job, self.upto = SpecState.DECODING, job, upto

    def store_result(self, result: Transcript, text: str) -> None:
        """Its decode is back with ``text`` (its speech segments'): read once how it reads, as
        a speculation kept for a sentence cut is asked on every window."""
        reads: Reading | None = ("finished" if reads_finished(text)
                                 else "open" if reads_open(text) else None)
        self.state, self.result, self.text, self.reads = SpecState.BACK, result, text, reads

    def reading(self, speech_upto: int) -> Reading | None:
        """How its text reads, once back and while no speech came after its audio."""
        return self.reads if self.has_result and not self.resumed(speech_upto) else None

    def verdict_due(self, speech_upto: int, audio_end: int) -> bool:
        """Kept for a sentence cut, back, unconfirmed, and the utterance has audio far enough
        past its pause (to stream sample ``audio_end``) for a partial to tell (`judge_cut`)."""
        return (self.state is SpecState.BACK and self.resumed(speech_upto)
                and audio_end - self.end >= CUT_HEARD_S * SAMPLE_RATE)

    def may_cut(self, sentence_cut_s: float) -> bool:
        """It may mark a sentence end to cut a long utterance at although speech went on: it
        covers ``sentence_cut_s`` of audio or more (0: never) and was not decoded as soft."""
        return (sentence_cut_s > 0 and not self.soft and self.job is not None
                and len(self.job.audio) >= sentence_cut_s * SAMPLE_RATE)

    def decode_due(self, speech_upto: int, audio_end: int) -> bool:
        """DUE, its audio has arrived (to ``audio_end``) and no speech came after its pause
        (then its decode could never stand: `usable`)."""
        return self.state is SpecState.DUE and speech_upto <= self.at <= audio_end

    def cut_offer(self, speech_upto: int) -> CutAt | bool | None:
        """Once back with speech resumed after it: a `CutAt` once confirmed, False when it does
        not read as a finished sentence (drop it), None otherwise (nothing to do yet)."""
        if not self.has_result or not self.resumed(speech_upto):
            return None
        if self.reads != "finished":
            return False
        if self.state is SpecState.CONFIRMED:
            assert self.job is not None
            return CutAt(self.end, self.upto, self.job.request_id)
        return None

    def judge_cut(self, partial_end: int, partial_text: str) -> bool:
        """A partial that decoded audio up to ``partial_end`` read ``partial_text``: confirm the
        sentence cut at this speculation's pause if the partial ends a sentence there too;
        False: let the speculation go (a verdict against, or none after CUT_VERDICT_S)."""
        if self.state is not SpecState.BACK or partial_end <= self.end:
            return True
        verdict = ends_sentence_in(self.text, partial_text)
        if verdict:
            self.state = SpecState.CONFIRMED
        return not (verdict is False
                    or (verdict is None and partial_end - self.end >= CUT_VERDICT_S * SAMPLE_RATE))

    def drop(self) -> None:
        """Back to NONE (its job may still be decoding: its result is then ignored)."""
        self.state, self.job, self.result, self.text, self.reads = (
            SpecState.NONE, None, None, "", None)
