"""One server session: audio in, protocol messages out, decode jobs for the scheduler.

It is a thin driver of `engine.core.stream.StreamCore`, the same core the desktop engine runs,
and translates the core's events into wire messages. No I/O: the connection handler feeds it
audio and decode results and sends what it returns; ``now`` comes from an injected clock.

Timeline: the core counts from the hello's ``offset`` (a resumed session starts where the
client's last ``ack`` was), so every position it reports is already the client's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from engine.core.policy import Job, PolicyOptions
from engine.core.segmenter import SegmenterOptions
from engine.core.stream import StreamCore, StreamOptions
from engine.events import EngineFailed, Event, FinalText, PartialText, SpeechEnded, SpeechStarted
from engine.types import SAMPLE_RATE, VAD_WINDOW, SpeechScorer, Transcript
from engine.wire import protocol as p

log = logging.getLogger(__name__)

Clock = Callable[[], float]

ACK_STEP = SAMPLE_RATE // 4  # an ack every 250 ms of settled audio is plenty


@dataclass(frozen=True)
class SessionOptions:
    policy: PolicyOptions = field(default_factory=PolicyOptions)
    segmenter: SegmenterOptions = field(default_factory=SegmenterOptions)


@dataclass(frozen=True)
class _Issued:
    trigger: int  # stream position of the newest sample when the request was issued
    arrived_at: float  # when that sample arrived


class ServerSession:
    """See the module docstring. Not thread-safe: one connection handler drives it."""

    def __init__(self, hello: p.Hello, options: SessionOptions, scorer: SpeechScorer | None,
                 clock: Clock) -> None:
        self.hello = hello
        policy = options.policy
        if hello.language is not None:
            policy = replace(policy, language=hello.language)
        if hello.vocabulary:
            policy = replace(policy, vocabulary=hello.vocabulary)
        self.core = StreamCore(
            StreamOptions(mode=options.segmenter.mode, policy=policy,
                          segmenter=options.segmenter, level_interval_ms=0),
            scorer, offset=hello.offset)
        if hello.prompt:
            self.core.policy.prompt.add(hello.prompt, at=clock(), flags=(),
                                        language=hello.language)
        self._offset = hello.offset
        self._clock = clock
        self._fed_at = clock()  # arrival time of the newest sample
        self._issued: dict[int, _Issued] = {}
        self._open: dict[int, int] = {}  # unfinished utterance id -> start
        self._speaking: int | None = None  # id of the utterance still being spoken
        self._acked = hello.offset
        self._preroll = options.segmenter.windows(options.segmenter.preroll_ms) * VAD_WINDOW

    @property
    def position(self) -> int:
        """Stream position of the next sample expected."""
        return self.core.position

    @property
    def idle(self) -> bool:
        return self.core.idle

    @property
    def speaking(self) -> bool:
        """An utterance is open (its end not yet heard)."""
        return self._speaking is not None

    def feed(self, audio: p.Audio) -> list[p.ServerMessage]:
        return self.feed_samples(p.pcm16_to_float(audio.samples))

    def feed_samples(self, samples: npt.NDArray[np.float32]) -> list[p.ServerMessage]:
        """Float samples in [-1, 1] (WhisperLive clients send float32)."""
        self._fed_at = self._clock()
        events = self.core.feed(samples, self._fed_at)
        return self._translate(events) + self._maybe_ack()

    def flush(self) -> list[p.ServerMessage]:
        """Close the utterance in flight now (push-to-talk release, or ``end``)."""
        return self._translate(self.core.flush(self._clock()))

    def set_vocabulary(self, terms: tuple[str, ...]) -> None:
        """A ``vocabulary`` message: the decodes issued from now on use ``terms``."""
        self.core.set_vocabulary(terms)

    def cancel(self) -> None:
        self.core.cancel()
        self._open.clear()
        self._speaking = None

    def is_stale(self, job: Job) -> bool:
        """A partial of an utterance that has ended (the final supersedes it), or a
        speculative final thrown away because speech resumed: the policy ignores its result,
        so it need not be decoded at all."""
        return (job.kind == "partial" and job.utterance_id != self._speaking) \
            or self.core.policy.discarded(job)

    def next_request(self) -> Job | None:
        job = self.core.next_job(self._clock())
        if job is not None:
            self._issued[job.request_id] = _Issued(self.position, self._fed_at)
        return job

    def on_result(self, job: Job, transcript: Transcript) -> list[p.ServerMessage]:
        out = self._translate(self.core.on_result(job, transcript, self._clock()), job,
                              transcript)
        return out + self._maybe_ack(force=any(isinstance(m, p.Final) for m in out))

    def on_failure(self, job: Job, message: str) -> list[p.ServerMessage]:
        events = self.core.on_failure(job, message, self._clock())
        return self._translate(events, job) + self._maybe_ack(force=True)

    def settled(self) -> int:
        """Stream position before which all audio is fully handled (finals sent)."""
        if self._open:
            return min(self._open.values())
        # Audio in the pre-roll ring may still open the next utterance.
        return max(self._offset, self.core.segmentation.segmenter.position - self._preroll)

    def final_ack(self) -> int:
        """After ``end``: everything the client sent is handled."""
        self._acked = max(self._acked, self.position)
        return self._acked

    def _maybe_ack(self, force: bool = False) -> list[p.ServerMessage]:
        """An ack when ``ACK_STEP`` more audio is settled, or right after a final (``force``)."""
        upto = self.settled()
        if upto <= self._acked or (upto - self._acked < ACK_STEP and not force):
            return []
        self._acked = upto
        return [p.Ack(upto=upto)]

    def _translate(self, events: list[Event], job: Job | None = None,
                   transcript: Transcript | None = None) -> list[p.ServerMessage]:
        out: list[p.ServerMessage] = []
        issued = self._issued.pop(job.request_id, None) if job is not None else None
        trigger = issued.trigger if issued else self.position
        server_ms = (self._clock() - issued.arrived_at) * 1000 if issued else 0.0
        for event in events:
            if isinstance(event, SpeechStarted):
                self._open[event.utterance_id] = event.at
                self._speaking = event.utterance_id
            elif isinstance(event, SpeechEnded):
                self._speaking = None
            elif isinstance(event, PartialText) and job is not None:
                out.append(p.Partial(
                    utterance_id=event.utterance_id, committed=event.committed,
                    tentative=event.tentative, start=event.start,
                    end=job.start + len(job.audio), trigger=trigger, server_ms=server_ms))
            elif isinstance(event, FinalText):
                self._open.pop(event.utterance_id, None)
                out.append(_final(event, transcript, trigger, server_ms))
            elif isinstance(event, EngineFailed):
                # Recoverable: the policy already closed the utterance with an empty final.
                # An ``error`` frame would end the connection, so this only goes to the log.
                log.warning("session %s: %s", self.hello.session_id, event.message)
        return out


def language_problem(language: str | None, model: str, languages: tuple[str, ...]) -> str | None:
    """Why a session cannot have ``language`` on the loaded model (``languages``: the codes it
    decodes, () when unknown), or None. Checked when the session starts, so a language the
    model would refuse fails that session alone, with this message, and never a batch."""
    if language is None or not languages or language in languages:
        return None
    if languages == ("en",):
        return (f"language {language!r} is not available: the model {model!r} is English-only "
                f"(send \"en\", or null)")
    return (f"language {language!r} is not one the model {model!r} knows: send an ISO 639-1 "
            f"code such as \"en\", \"de\" or \"fr\", or null to detect it")


def _final(event: FinalText, transcript: Transcript | None, trigger: int,
           server_ms: float) -> p.Final:
    return p.Final(
        utterance_id=event.utterance_id, text=event.text, words=event.words, start=event.start,
        end=event.end, decode_ms=transcript.decode_ms if transcript else 0.0,
        language=event.language, trigger=trigger, server_ms=server_ms)
