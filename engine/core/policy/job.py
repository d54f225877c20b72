"""A decode job of the policy, and where its words fall on the stream's timeline."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from engine.events import Metrics
from engine.types import SAMPLE_RATE, Audio, DecodeOptions, DecodeRequest, Segment, Transcript, Word


class JobKind(str, Enum):
    """What a job's decode is for; its value is the `Metrics.kind` of its result (a str enum,
    so drivers that compare or label with the plain strings read the same)."""

    PARTIAL = "partial"  # tentative text of the utterance so far, shown and replaced
    FINAL = "final"  # the text that stands for an utterance (a retry is one too)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Job:
    """One piece of decode work of a stream: the `DecodeRequest` a runner decodes, and what the
    stream needs to place its result. ``start`` is the stream sample of ``request.audio[0]``;
    word times in the result are relative to it. ``audio_arrived_at`` is when its newest sample
    arrived."""

    request_id: int
    utterance_id: int
    kind: JobKind
    start: int
    issued_at: float
    audio_arrived_at: float
    request: DecodeRequest
    speculative: bool = False  # a final decoded before its utterance is known to have ended

    @property
    def audio(self) -> Audio:
        return self.request.audio

    @property
    def options(self) -> DecodeOptions:
        return self.request.options


def end_of(job: Job) -> int:
    """The stream sample after the last one ``job`` decodes."""
    return job.start + len(job.audio)


def placed(segments: Iterable[Segment], job: Job, upto: int | None = None) -> list[Word]:
    """The words of ``segments`` (decoded by ``job``) on the stream's timeline, ending at
    ``upto`` at the latest."""
    return [Word(w.text, job.start + w.start,
                 job.start + w.end if upto is None else min(job.start + w.end, upto),
                 w.probability)
            for s in segments for w in s.words]


def text_of(words: Iterable[Word]) -> str:
    return "".join(w.text for w in words).strip()


def metrics_of(job: Job, transcript: Transcript, now: float, lag: float) -> Metrics:
    """The `Metrics` event of ``job``'s result, back at ``now``, ``lag`` s after its audio."""
    return Metrics(
        chunk_rtt_ms=(now - job.issued_at) * 1000, decode_ms=transcript.decode_ms,
        network_ms=None, lag_ms=lag * 1000,
        rtf=transcript.decode_ms / 1000 / max(len(job.audio) / SAMPLE_RATE, 1e-3),
        dropped_frames=0, kind=job.kind.value)
