"""The state the policy keeps per utterance."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.core.agreement import LocalAgreement, tokens
from engine.core.policy.commit import EarlyCommit
from engine.core.policy.job import Job
from engine.core.policy.retries import Retry
from engine.core.policy.speculation import SpecState, Speculation
from engine.events import PartialText
from engine.types import SAMPLE_RATE, Audio, Transcript


@dataclass
class Utterance:
    id: int
    start: int
    started_at: float
    chunks: list[Audio] = field(default_factory=list)
    samples: int = 0
    arrived_at: float = 0.0  # when the newest sample arrived
    partial_samples: int = 0  # audio length at the last partial request
    agreement: LocalAgreement = field(default_factory=LocalAgreement)
    speech: bool = False  # any speech heard yet (a ptt press may start on silence)
    end: int = 0
    speech_end_at: float = 0.0
    speech_end: int = 0  # session sample where the last speech window ended
    attempts: int = 0
    soft: bool = False  # only the segmenter's soft path heard speech (see soft_no_speech)
    heard: str = ""  # the latest partial's text: which vocabulary terms go first
    heard_upto: int = 0  # ... and the stream sample after the audio it decoded (`finals.dropped`)
    tried: list[Retry] = field(default_factory=list)  # the final's retries so far (finals.py)
    retry: Retry | None = None  # the retry the next final attempt is (finals.RETRIES)
    earlier: tuple[Job, Transcript] | None = None  # a decode a retry competes with (REPLAY)
    speech_upto: int = 0  # stream sample after the last audio a window called speech
    ended_at: float = 0.0  # when the segmenter (or a flush) closed it
    spec: Speculation = field(default_factory=Speculation)  # its speculative final, if any
    decoded_at: float = 0.0  # when the result its final is made of came back
    decode_ms: float = 0.0
    # Where this utterance's own words begin: ``start``, or the end of the words committed
    # early before it (its audio may start earlier: commit.COMMIT_WINDOW_S).
    first: int = 0
    commit: EarlyCommit = field(default_factory=EarlyCommit)  # its words on the way to commit

    def audio(self) -> Audio:
        if not self.chunks:
            return np.zeros(0, dtype=np.float32)
        if len(self.chunks) > 1:
            self.chunks = [np.concatenate(self.chunks)]
        return self.chunks[0]

    def append(self, audio: Audio, now: float) -> None:
        if len(audio):
            self.chunks.append(audio)
            self.samples += len(audio)
            self.arrived_at = now

    def close(self, end: int, speech_end: int, soft: bool, now: float) -> int:
        """The segmenter ended it at stream sample ``end`` (its last speech at ``speech_end``):
        keep its audio up to there; returns the samples kept."""
        self.ended_at = now
        # Audio after the speech end had arrived while the segmenter waited out the silence;
        # latency is measured from the speech end.
        received_after = max(0, self.start + self.samples - speech_end)
        self.speech_end_at = now - received_after / SAMPLE_RATE
        self.speech_end, self.soft = speech_end, soft
        keep = max(0, min(self.samples, end - self.start))
        self.chunks = [self.audio()[:keep]]
        self.samples = keep
        self.end = self.start + keep
        return keep

    def drop_speculation(self) -> None:
        """Let its speculative final go; its job may still be decoding, and the policy ignores
        its result (it is no longer ``spec.job``)."""
        if self.spec.issued:
            self.attempts, self.retry, self.tried = 0, None, []
        self.spec.drop()

    def speech_heard(self, sentence_cut_s: float) -> None:
        """A window of speech was appended: a speculation of the audio before it is stale,
        unless it may still mark a sentence end to cut at (`Speculation.may_cut`)."""
        self.speech_upto = self.start + self.samples
        spec = self.spec
        if spec.state is SpecState.DUE and spec.at < self.speech_upto:
            spec.drop()  # its pause is over before its decode could start
        if spec.issued and not (spec.may_cut(sentence_cut_s)
                                and (not spec.has_result or spec.reads == "finished")):
            self.drop_speculation()

    def plan_retry(self, retry: Retry, earlier: tuple[Job, Transcript] | None) -> None:
        """Its final is decoded again as ``retry``; ``earlier``: the decode it competes with."""
        self.retry = retry
        self.tried.append(retry)
        self.earlier = earlier

    def partial_text(self, text: str, heard_upto: int) -> PartialText:
        """A partial (not committing early) read ``text`` in the audio up to stream sample
        ``heard_upto``: it may decide a sentence cut (`Speculation.judge_cut`), and its words
        two partials agree on show as committed (`LocalAgreement`)."""
        if not self.spec.judge_cut(heard_upto, text):
            self.drop_speculation()
        committed, tentative = self.agreement.update(tokens(text))
        self.heard, self.heard_upto = f"{committed} {tentative}", heard_upto
        return PartialText(utterance_id=self.id, committed=committed, tentative=tentative,
                           start=self.start)
