"""One server session: audio in, protocol messages out, decode requests for the scheduler.

It runs the same pipeline as the desktop engine — VAD windows -> `SpeechSegmenter` ->
`StreamingPolicy` — and translates the policy's events into wire messages. No I/O: the server's
connection handler feeds it audio and decode results and sends what it returns; ``now`` comes
from an injected clock.

Timeline: the segmenter counts from 0; the wire counts from the hello's ``offset`` (a resumed
session starts where the client's last ``ack`` was), so every position is shifted by it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from engine.core import protocol as p
from engine.core.policy import Job, PolicyOptions, StreamingPolicy
from engine.core.segmenter import SegmenterOptions, SpeechSegmenter
from engine.events import EngineFailed, Event, FinalText, PartialText, SpeechEnded, SpeechStarted
from engine.types import SAMPLE_RATE, Audio, Transcript, Word
from engine.types import VAD_WINDOW as WINDOW

log = logging.getLogger(__name__)

VadFn = Callable[[Audio], float]  # one WINDOW of audio -> speech probability
Clock = Callable[[], float]

ACK_STEP = SAMPLE_RATE // 4  # an ack every 250 ms of settled audio is plenty


class EnergyVad:
    """Speech probability from loudness alone: -50 dBFS and below is 0, -35 dBFS and above 1.

    The fallback when Silero (``engine.vad``) is not available. Good enough for close-talking
    microphones and clean recordings; noisy rooms need Silero.
    """

    def __init__(self, floor_db: float = -50.0, full_db: float = -35.0) -> None:
        self._floor = floor_db
        self._span = full_db - floor_db

    def __call__(self, window: Audio) -> float:
        rms = float(np.sqrt(np.mean(np.square(window, dtype=np.float64)))) if len(window) else 0.0
        db = 20 * math.log10(max(rms, 1e-10))
        return min(1.0, max(0.0, (db - self._floor) / self._span))


class SileroWindowVad:
    """Silero VAD (``engine.vad``, stateful, one per session) scoring one window per call."""

    def __init__(self) -> None:
        from engine.vad import SileroVad

        self._vad = SileroVad()
        self._vad.load()

    def __call__(self, window: Audio) -> float:
        scored = self._vad.feed(window)
        return scored[-1][1] if scored else 0.0


def default_vad() -> VadFn:
    """Silero when onnxruntime and the model are there; the energy detector otherwise."""
    try:
        return SileroWindowVad()
    except Exception as exc:  # noqa: BLE001 - any failure to load falls back, loudly
        log.warning("Silero VAD unavailable (%s); using the energy detector", exc)
        return EnergyVad()


@dataclass(frozen=True)
class SessionOptions:
    policy: PolicyOptions = field(default_factory=PolicyOptions)
    segmenter: SegmenterOptions = field(default_factory=SegmenterOptions)


@dataclass(frozen=True)
class _Issued:
    trigger: int  # wire position of the newest sample when the request was issued
    arrived_at: float  # when that sample arrived


class ServerSession:
    """See the module docstring. Not thread-safe: one connection handler drives it."""

    def __init__(self, hello: p.Hello, options: SessionOptions, vad: VadFn, clock: Clock) -> None:
        self.hello = hello
        self._offset = hello.offset
        policy_options = options.policy
        if hello.language is not None:
            policy_options = _with_language(policy_options, hello.language)
        self.policy = StreamingPolicy(policy_options)
        if hello.prompt:
            self.policy.prompt.add(hello.prompt, at=clock(), flags=(), language=hello.language)
        self.segmenter = SpeechSegmenter(options.segmenter)
        self._vad = vad
        self._clock = clock
        self._pending = np.zeros(0, dtype=np.float32)  # samples short of a whole window
        self._fed_at = clock()  # arrival time of the newest sample
        self._issued: dict[int, _Issued] = {}
        self._open: dict[int, int] = {}  # unfinished utterance id -> wire start
        self._speaking: int | None = None  # id of the utterance still being spoken
        self._acked = hello.offset
        self._pads: list[tuple[int, int]] = []  # (segmenter position, silence samples added)
        self._preroll = options.segmenter.windows(options.segmenter.preroll_ms) * WINDOW

    @property
    def position(self) -> int:
        """Wire position of the next sample expected."""
        return self._wire(self.segmenter.position) + len(self._pending)

    def _wire(self, position: int) -> int:
        """Segmenter position -> client timeline, skipping silence padded in by `flush`."""
        shift = 0
        for at, length in self._pads:
            if position > at:
                shift += min(length, position - at)
        return self._offset + position - shift

    @property
    def idle(self) -> bool:
        return self.policy.idle and not self.segmenter.active

    def feed(self, audio: p.Audio) -> list[p.ServerMessage]:
        samples = p.pcm16_to_float(audio.samples)
        self._fed_at = self._clock()
        buffered = np.concatenate([self._pending, samples]) if len(self._pending) else samples
        whole = len(buffered) - len(buffered) % WINDOW
        out: list[p.ServerMessage] = []
        for i in range(0, whole, WINDOW):
            window = buffered[i:i + WINDOW]
            segment_events = self.segmenter.push(window, self._vad(window))
            out.extend(self._translate(self.policy.handle_all(segment_events, self._fed_at)))
        self._pending = buffered[whole:].copy()
        return out + self._maybe_ack()

    def flush(self) -> list[p.ServerMessage]:
        """Close the utterance in flight now (push-to-talk release, or ``end``)."""
        now = self._clock()
        if len(self._pending):  # the tail shorter than a window is padded with silence
            pad = np.zeros(WINDOW - len(self._pending), dtype=np.float32)
            window = np.concatenate([self._pending, pad])
            self._pending = np.zeros(0, dtype=np.float32)
            events = self.segmenter.push(window, self._vad(window))
            # The padding is not the client's audio: remember it so wire positions skip it.
            self._pads.append((self.segmenter.position - len(pad), len(pad)))
            out = self._translate(self.policy.handle_all(events, now))
        else:
            out = []
        return out + self._translate(self.policy.handle_all(self.segmenter.flush(), now))

    def cancel(self) -> None:
        self.policy.cancel()
        self._open.clear()
        self._speaking = None

    def is_stale(self, request: Job) -> bool:
        """A partial of an utterance that has ended: the policy ignores its result (the
        final supersedes it), so it need not be decoded at all."""
        return request.kind == "partial" and request.utterance_id != self._speaking

    def next_request(self) -> Job | None:
        request = self.policy.next_request(self._clock())
        if request is not None:
            self._issued[request.request_id] = _Issued(self.position, self._fed_at)
        return request

    def on_result(self, request: Job, transcript: Transcript) -> list[p.ServerMessage]:
        events = self.policy.on_result(request.request_id, transcript, self._clock())
        out = self._translate(events, request, transcript)
        return out + self._maybe_ack(force=any(isinstance(m, p.Final) for m in out))

    def on_failure(self, request: Job, message: str) -> list[p.ServerMessage]:
        events = self.policy.on_failure(request.request_id, message, self._clock())
        return self._translate(events, request) + self._maybe_ack(force=True)

    def settled(self) -> int:
        """Wire position before which all audio is fully handled (finals sent)."""
        if self._open:
            return min(self._open.values())
        # Audio in the pre-roll ring may still open the next utterance.
        return max(self._offset, self._wire(self.segmenter.position - self._preroll))

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

    def _translate(self, events: list[Event], request: Job | None = None,
                   transcript: Transcript | None = None) -> list[p.ServerMessage]:
        out: list[p.ServerMessage] = []
        issued = self._issued.pop(request.request_id, None) if request is not None else None
        trigger = issued.trigger if issued else self.position
        server_ms = (self._clock() - issued.arrived_at) * 1000 if issued else 0.0
        for event in events:
            if isinstance(event, SpeechStarted):
                self._open[event.utterance_id] = self._wire(event.at)
                self._speaking = event.utterance_id
            elif isinstance(event, SpeechEnded):
                self._speaking = None
            elif isinstance(event, PartialText) and request is not None:
                out.append(p.Partial(
                    utterance_id=event.utterance_id, committed=event.committed,
                    tentative=event.tentative, start=self._wire(event.start),
                    end=self._wire(request.start + len(request.audio)),
                    trigger=trigger, server_ms=server_ms))
            elif isinstance(event, FinalText):
                self._open.pop(event.utterance_id, None)
                out.append(self._final(event, transcript, trigger, server_ms))
            elif isinstance(event, EngineFailed):
                # Recoverable: the policy already closed the utterance with an empty final.
                # An ``error`` frame would end the connection, so this only goes to the log.
                log.warning("session %s: %s", self.hello.session_id, event.message)
        return out

    def _final(self, event: FinalText, transcript: Transcript | None, trigger: int,
               server_ms: float) -> p.Final:
        words = tuple(Word(w.text, self._wire(w.start), self._wire(w.end), w.probability)
                      for w in event.words)
        return p.Final(
            utterance_id=event.utterance_id, text=event.text, words=words,
            start=self._wire(event.start), end=self._wire(event.end),
            decode_ms=transcript.decode_ms if transcript else 0.0, language=event.language,
            trigger=trigger, server_ms=server_ms)


def _with_language(options: PolicyOptions, language: str) -> PolicyOptions:
    from dataclasses import replace

    return replace(options, language=language)
