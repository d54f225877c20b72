"""`LocalLiveEngine`: microphone (or file) -> Silero VAD -> segmenter -> streaming policy ->
local Transcriber, emitting `engine.events` to one sink.

Threads (all at the edges; the algorithms live in engine.core and know nothing of them):
- the audio source's own thread (PortAudio callback) fills the source's bounded queue;
- the *pipeline* thread reads blocks, runs VAD and the segmenter, feeds the policy, hands
  decode requests to the worker and, at the end, flushes the tail and waits for the last final;
- one *inference worker* runs the Transcriber. The policy keeps at most one request out, so the
  request queue never holds more than one item (bounded, never overflows).
Policy, segmenter and journal are touched only under one lock; the sink is called under it,
so events arrive one at a time, in order, from either engine thread. It must return quickly
(the Qt bridge re-emits them as queued signals).

Simulated time: with a simulated source (`FileSource(realtime=False)`) the clock is the audio
position, and each decode "takes" its measured wall time on that clock: the pipeline feeds no
audio past the moment the result would have arrived before delivering it. Latency figures thus
match a real-time run on this machine without waiting for it (tests, benchmarks).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from engine.audio.sources import AudioSource
from engine.core.policy import Job, PolicyOptions, StreamingPolicy
from engine.core.segmenter import SegmenterOptions, SpeechSegmenter
from engine.errors import EngineError
from engine.events import (
    EngineFailed,
    Event,
    EventSink,
    FinalText,
    LevelChanged,
    Metrics,
    StateChanged,
)
from engine.journal import Journal, JournalError
from engine.types import SAMPLE_RATE, Audio, Runner, Transcript
from engine.vad import SileroVad

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LiveOptions:
    """How the engine runs. ``mode`` wins over ``segmenter.mode``; the language, partials and
    decoding choices live in ``policy``; ``journal`` autosaves finals (engine.journal)."""

    mode: str = "vad"  # "vad": speech detection decides; "ptt": begin/end_utterance decide
    policy: PolicyOptions = field(default_factory=PolicyOptions)
    segmenter: SegmenterOptions = field(default_factory=SegmenterOptions)
    journal: bool = True
    ptt_tail_ms: int = 150  # keys are released while the last syllable still sounds
    level_interval_ms: int = 100
    read_timeout_s: float = 0.1
    drain_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        if self.mode not in ("vad", "ptt"):
            raise ValueError("mode must be 'vad' or 'ptt'")
        if self.ptt_tail_ms < 0 or self.level_interval_ms <= 0:
            raise ValueError("ptt_tail_ms must be >= 0 and level_interval_ms > 0")
        if self.read_timeout_s <= 0 or self.drain_timeout_s <= 0:
            raise ValueError("timeouts must be > 0")


@dataclass
class _Outcome:
    request: Job
    transcript: Transcript | None
    error: str
    seconds: float  # wall time the decode took


class LocalLiveEngine:
    """`engine.events.LiveEngine` over a local Transcriber. See the module docstring."""

    def __init__(self, sink: EventSink, *, source: AudioSource, transcriber: Runner,
                 options: LiveOptions | None = None, vad: SileroVad | None = None,
                 journal: Journal | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options or LiveOptions()
        self._sink = sink
        self._source = source
        self._transcriber = transcriber
        self._vad = vad or SileroVad()
        self._journal = journal if journal is not None else (
            Journal() if self.options.journal else None)
        self._clock = clock
        self._simulated = bool(getattr(source, "simulated", False))
        self._lock = threading.Condition()
        self._policy = StreamingPolicy(self.options.policy)
        self._segmenter = SpeechSegmenter(replace(self.options.segmenter, mode=self.options.mode))
        self._requests: queue.Queue[Job | None] = queue.Queue(maxsize=1)
        self._outcomes: queue.Queue[_Outcome] = queue.Queue(maxsize=1)  # simulated time only
        self._controls: deque[tuple[str, int]] = deque()
        self._stop = threading.Event()
        self._finished = threading.Event()
        self._pipeline: threading.Thread | None = None
        self._worker: threading.Thread | None = None
        self._sim_now = 0.0
        self._held: _Outcome | None = None
        self._level: list[Audio] = []
        self._level_samples = 0

    # -- the LiveEngine interface --------------------------------------------------------

    def start(self) -> None:
        if self._pipeline is not None:
            raise EngineError("engine already started")
        self._pipeline = threading.Thread(target=self._run, name="sottovoce-pipeline",
                                          daemon=True)
        self._pipeline.start()

    def stop(self) -> None:
        """Stop capturing; the utterance in flight is flushed and its final emitted."""
        self._stop.set()
        self._source.stop()

    def begin_utterance(self, at: int | None = None) -> None:
        """Push-to-talk press. ``at``: the sample it applies to (default: captured so far)."""
        self._control("begin", self._source.captured if at is None else at)

    def end_utterance(self, at: int | None = None) -> None:
        """Push-to-talk release; audio up to ``ptt_tail_ms`` after it is kept."""
        tail = self.options.ptt_tail_ms * SAMPLE_RATE // 1000
        self._control("end", (self._source.captured + tail) if at is None else at)

    # -- extras for the app, CLI and benchmarks ------------------------------------------

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the engine has stopped (file ended, or stop() and flush done)."""
        if self._pipeline is None:
            return True
        # An Event, not Thread.join(): a join interrupted by Ctrl+C can leave the thread marked
        # as stopped on Python < 3.12, and the next join would return before the flush is done.
        return self._finished.wait(timeout)

    def now(self) -> float:
        """The engine's clock in seconds (the audio position in simulated time)."""
        return self._sim_now if self._simulated else self._clock()

    @property
    def journal_path(self) -> str | None:
        return str(self._journal.path) if self._journal is not None else None

    # -- pipeline thread -----------------------------------------------------------------

    def _run(self) -> None:
        failure: EngineFailed | None = None
        try:
            self._emit_one(StateChanged("loading"))
            self._transcriber.load()
            self._vad.load()
            self._emit_one(StateChanged("ready", self._transcriber.info.name))
            self._source.start()
            self._worker = threading.Thread(target=self._work, name="sottovoce-inference",
                                            daemon=True)
            self._worker.start()
            self._emit_one(StateChanged("listening"))
            failure = self._capture()
            self._drain()
        except EngineError as exc:
            failure = EngineFailed(str(exc), recoverable=False)
        except Exception as exc:  # noqa: BLE001 - the thread's top: report, never die silently
            log.exception("live pipeline crashed")
            failure = EngineFailed(f"internal error: {exc}", recoverable=False)
        finally:
            self._shutdown(failure)

    def _capture(self) -> EngineFailed | None:
        """Read and process audio until stopped or the source ends; a device error ends it."""
        while not self._stop.is_set():
            try:
                block = self._source.read(self.options.read_timeout_s)
            except EngineError as exc:
                log.error("audio source failed: %s", exc)
                return EngineFailed(str(exc), recoverable=False)
            if block is None:
                if self._source.finished:
                    break
                continue
            self._on_block(block)
        return None

    def _on_block(self, block: Audio) -> None:
        end_time = self._source.position / SAMPLE_RATE
        if self._simulated:
            self._sim_deliver(until=end_time)
            self._sim_now = max(self._sim_now, end_time)
        with self._lock:
            now = self.now()
            self._level_update(block)
            for window, probability in self._vad.feed(block):
                self._apply_controls(self._segmenter.position + len(window), now)
                self._emit(self._policy.handle_all(self._segmenter.push(window, probability), now))
            self._dispatch(now)

    def _apply_controls(self, upto: int, now: float) -> None:
        while self._controls and self._controls[0][1] <= upto:
            kind, _ = self._controls.popleft()
            events = self._segmenter.begin() if kind == "begin" else self._segmenter.end()
            self._emit(self._policy.handle_all(events, now))

    def _drain(self) -> None:
        """Flush the utterance in flight and wait until its final has been emitted."""
        with self._lock:
            now = self.now()
            self._apply_controls(self._segmenter.position, now)
            self._emit(self._policy.handle_all(self._segmenter.flush(), now))
            self._dispatch(now)
        if self._simulated:
            self._sim_deliver(until=float("inf"))
            return
        with self._lock:
            if not self._lock.wait_for(lambda: self._policy.idle, self.options.drain_timeout_s):
                self._emit_one(EngineFailed("gave up waiting for the last decode", True))

    def _shutdown(self, failure: EngineFailed | None) -> None:
        self._source.stop()
        if self._worker is not None:
            self._requests.put(None)
            self._worker.join(timeout=self.options.drain_timeout_s)
        if self._journal is not None:
            self._journal.close()
        with self._lock:
            if failure is not None:
                self._emit_one(failure)
            self._emit_one(StateChanged("stopped"))
        self._finished.set()

    def _control(self, kind: str, at: int) -> None:
        with self._lock:
            self._controls.append((kind, at))

    # -- decoding ------------------------------------------------------------------------

    def _dispatch(self, now: float) -> None:
        """Hand the policy's next request to the worker if it is free (lock held)."""
        if self._policy.in_flight == 0 and self._held is None:
            request = self._policy.next_request(now)
            if request is not None:
                self._requests.put_nowait(request)  # never full: one request out at a time

    def _work(self) -> None:
        while True:
            request = self._requests.get()
            if request is None:
                return
            outcome = self._decode(request)
            if self._simulated:
                self._outcomes.put(outcome)
                continue
            with self._lock:
                self._deliver(outcome, self._clock())
                self._dispatch(self._clock())
                self._lock.notify_all()

    def _decode(self, request: Job) -> _Outcome:
        started = time.perf_counter()
        try:
            transcript = self._transcriber.decode_batch([request.request])[0]
            error = ""
        except Exception as exc:  # noqa: BLE001 - the worker's top: any failure becomes an event
            log.exception("decode of request %d failed", request.request_id)
            transcript, error = None, str(exc) or type(exc).__name__
        return _Outcome(request, transcript, error, time.perf_counter() - started)

    def _deliver(self, outcome: _Outcome, now: float) -> None:
        rid = outcome.request.request_id
        if outcome.transcript is None:
            self._emit(self._policy.on_failure(rid, outcome.error, now))
        else:
            self._emit(self._policy.on_result(rid, outcome.transcript, now))

    def _sim_deliver(self, until: float) -> None:
        """Simulated time: deliver every result that is ready before ``until``."""
        while True:
            with self._lock:
                if self._held is None and self._policy.in_flight == 0:
                    return
            if self._held is None:
                self._held = self._outcomes.get()
            ready_at = self._held.request.issued_at + self._held.seconds
            if ready_at > until:
                return
            with self._lock:
                self._sim_now = max(self._sim_now, ready_at)
                outcome, self._held = self._held, None
                self._deliver(outcome, self._sim_now)
                self._dispatch(self._sim_now)

    # -- events --------------------------------------------------------------------------

    def _level_update(self, block: Audio) -> None:
        self._level.append(block)
        self._level_samples += len(block)
        if self._level_samples * 1000 < self.options.level_interval_ms * SAMPLE_RATE:
            return
        audio = np.concatenate(self._level)
        self._level, self._level_samples = [], 0
        rms = float(np.sqrt(np.mean(np.square(audio, dtype=np.float64))))
        peak = float(np.max(np.abs(audio)))
        self._emit_one(LevelChanged(rms_db=_db(rms), peak_db=_db(peak)))

    def _emit(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, Metrics):
                event = replace(event, dropped_frames=self._source.dropped)
            elif isinstance(event, FinalText) and event.text:
                self._journal_append(event)
            self._emit_one(event)

    def _journal_append(self, final: FinalText) -> None:
        if self._journal is None:
            return
        try:
            self._journal.append(final)
        except JournalError as exc:
            # Keep transcribing; tell the user once and stop trying to write.
            log.error("%s", exc)
            self._journal = None
            self._emit_one(EngineFailed(f"autosave stopped: {exc}", recoverable=True))

    def _emit_one(self, event: Event) -> None:
        try:
            self._sink(event)
        except Exception:  # noqa: BLE001 - a broken sink must not stop transcription
            log.exception("event sink raised on %s", type(event).__name__)


def _db(value: float) -> float:
    return max(-100.0, 20.0 * float(np.log10(value))) if value > 0 else -100.0


def local_transcriber(model: str | None = None, *, fast: bool = True,
                      device: str = "auto") -> Runner:
    """Kept for callers not yet moved: `engine.asr.local_runner`."""
    from engine.asr import local_runner

    return local_runner(model, fast=fast, device=device)
