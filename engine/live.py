"""`LocalLiveEngine`: microphone (or file) -> the stream core -> a local runner, emitting
`engine.events` to one sink.

The engine is a driver: every decision (windows, VAD, utterances, partials, finals, prompts,
retries) is `engine.core.stream.StreamCore`'s, the same core the server runs per session. This
module owns only the threads, all at the edges:
- the audio source's own thread (PortAudio callback) fills the source's bounded queue;
- the *pipeline* thread reads blocks, feeds the core and hands its jobs to the worker and, at
  the end, flushes the tail and waits for the last final;
- one *inference worker* per decode stream of the runner (``runner.streams``: two one-thread
  replicas sharing the weights on a 2-core CPU) runs ``decode_batch`` of one request. The
  policy keeps at most that many jobs out (finals first, the last free stream kept for a
  final, speculative finals while the end is being confirmed: `engine.core.policy.speculation`), so
  the job queue never holds more than that (bounded by the policy).
The core and the journal are touched only under one lock; the sink is called under it, so
events arrive one at a time, in order, from either engine thread. It must return quickly (the
Qt bridge re-emits them as queued signals).

The first worker thread also loads the runner, and all stay alive for the engine's life: a
CTranslate2 model first used on a thread that has exited decodes 4-6x slower.

Simulated time: with a simulated source (`FileSource(realtime=False)`) the clock is the audio
position, and each decode "takes" what ``LiveOptions.decode_cost`` charges it on that clock:
the pipeline feeds no audio past the moment a result would have arrived before delivering it
(results in the order they would have arrived). The default charges the measured wall time, so
latency figures match a real-time run on this machine without waiting for it (benchmarks);
tests charge a modelled cost (`DecodeCost`, `ReportedCost`), so what is decoded when, and hence
every partial, speculation, cut and final, is the same on any processor and under any load.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from engine.audio.sources import AudioSource, device_notice
from engine.core.policy import Job, PolicyOptions
from engine.core.segmenter import SegmenterOptions
from engine.core.stream import StreamCore, StreamOptions
from engine.errors import EngineError
from engine.events import (
    EngineFailed,
    Event,
    EventSink,
    FinalText,
    Metrics,
    StateChanged,
)
from engine.journal import Journal, JournalError
from engine.types import SAMPLE_RATE, Audio, DecodeRequest, Runner, SpeechScorer, Transcript

log = logging.getLogger(__name__)

# What a decode costs on the simulated clock: (the request, its result or None when it failed,
# the measured wall time in seconds) -> seconds.
CostModel = Callable[[DecodeRequest, "Transcript | None", float], float]


@dataclass(frozen=True)
class Measured:
    """The measured wall time x ``scale`` (the default; ``scale`` K: a machine K times slower,
    as `bench/streaming.py --busy K`)."""

    scale: float = 1.0

    def __call__(self, request: DecodeRequest, result: Transcript | None,
                 measured: float) -> float:
        return measured * self.scale


@dataclass(frozen=True)
class DecodeCost:
    """A modelled processor: ``fixed_s`` + ``per_audio_s`` x the request's seconds of audio,
    + ``padded_s`` for a request that takes the padded 30 s window (no short context), all x
    ``beam_x`` for a beam search, whatever the decode took here. The defaults are tiny.en int8
    on one stream of the 2-core test machine, idle (a greedy final takes 0.58x the time of a
    beam-5 one there: `PolicyOptions.final_beam_size`); ``scaled(k)``: that machine k times
    slower."""

    fixed_s: float = 0.05
    per_audio_s: float = 0.02
    padded_s: float = 0.4
    beam_x: float = 1.7

    def __post_init__(self) -> None:
        if min(self.fixed_s, self.per_audio_s, self.padded_s) < 0 or self.beam_x < 1:
            raise ValueError("decode costs must be >= 0 and beam_x >= 1")

    def __call__(self, request: DecodeRequest, result: Transcript | None,
                 measured: float) -> float:
        padded = 0.0 if request.options.short_context else self.padded_s
        beam = self.beam_x if request.options.beam_size > 1 else 1.0
        return beam * (self.fixed_s + padded + self.per_audio_s * len(request.audio) / SAMPLE_RATE)

    def scaled(self, k: float) -> DecodeCost:
        return replace(self, fixed_s=self.fixed_s * k, per_audio_s=self.per_audio_s * k,
                       padded_s=self.padded_s * k)


@dataclass(frozen=True)
class ReportedCost:
    """The runner's own figure (``Transcript.decode_ms``: a recording's, a scripted runner's)
    x ``scale``; a failed decode costs ``failed_s``."""

    scale: float = 1.0
    failed_s: float = 0.0

    def __call__(self, request: DecodeRequest, result: Transcript | None,
                 measured: float) -> float:
        return self.failed_s if result is None else result.decode_ms / 1000 * self.scale


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
    # Simulated time only: what each decode costs on the clock (module docstring). Tests pass
    # a model (`DecodeCost`, `ReportedCost`) so no outcome depends on this processor's speed.
    decode_cost: CostModel = field(default_factory=Measured)

    def __post_init__(self) -> None:
        if self.mode not in ("vad", "ptt"):
            raise ValueError("mode must be 'vad' or 'ptt'")
        if self.ptt_tail_ms < 0 or self.level_interval_ms <= 0:
            raise ValueError("ptt_tail_ms must be >= 0 and level_interval_ms > 0")
        if self.read_timeout_s <= 0 or self.drain_timeout_s <= 0:
            raise ValueError("timeouts must be > 0")

    def stream(self) -> StreamOptions:
        return StreamOptions(mode=self.mode, policy=self.policy, segmenter=self.segmenter,
                             level_interval_ms=self.level_interval_ms)


@dataclass
class _Outcome:
    job: Job
    transcript: Transcript | None
    error: str
    seconds: float  # what the decode took on the engine's clock (simulated: decode_cost's)


class LocalLiveEngine:
    """`engine.events.LiveEngine` over a local runner. See the module docstring.

    ``scorer``: the VAD (default: `engine.vad.default_scorer()`, loaded on the pipeline
    thread); ``journal``: where finals are autosaved (default: a new session journal when
    ``options.journal``)."""

    def __init__(self, sink: EventSink, *, source: AudioSource, runner: Runner,
                 options: LiveOptions | None = None, scorer: SpeechScorer | None = None,
                 journal: Journal | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options or LiveOptions()
        self._sink = sink
        self._source = source
        self._runner = runner
        self._scorer = scorer
        self._journal = journal if journal is not None else (
            Journal() if self.options.journal else None)
        self._clock = clock
        self._simulated = source.simulated
        self._lock = threading.Condition()
        self._core: StreamCore | None = None
        self._early: list[tuple[str, int, int]] = []  # key presses before the core exists
        self._streams = 1  # decode streams (workers): runner.streams once loaded
        self._jobs: queue.Queue[Job | None] = queue.Queue()  # bounded by the policy (docstring)
        self._vocabulary = self.options.policy.vocabulary
        self._language: tuple[str | None, tuple[str, ...]] = (
            self.options.policy.language, self.options.policy.languages)
        self._outcomes: queue.Queue[_Outcome] = queue.Queue()  # simulated time only
        self._loaded: queue.Queue[BaseException | None] = queue.Queue(maxsize=1)
        self._reload_to: queue.Queue[Runner] = queue.Queue()  # reload(): for the pipeline
        self._retiring = False  # a reload is swapping the inference threads
        self._stop = threading.Event()
        self._aborted = threading.Event()
        self._finished = threading.Event()
        self._pipeline: threading.Thread | None = None
        self._workers: list[threading.Thread] = []
        self._sim_now = 0.0
        self._held: list[_Outcome] = []  # simulated time: results not delivered yet
        self._mutes: list[tuple[int, int]] = []  # captured sample ranges replaced by silence

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

    def abort(self) -> None:
        """Stop at once (a second Ctrl+C): the utterance in flight is not decoded and queued
        decodes are dropped; a decode already running finishes (native code cannot be
        interrupted) and its final is kept, as are the finals before it."""
        self._aborted.set()
        self.stop()
        with self._lock:
            self._lock.notify_all()

    def begin_utterance(self, at: int | None = None) -> int:
        """Push-to-talk press. ``at``: the sample it applies to (default: captured so far);
        returns that sample."""
        at = self._source.captured if at is None else at
        self._control("begin", at)
        return at

    def end_utterance(self, at: int | None = None) -> None:
        """Push-to-talk release; audio up to ``ptt_tail_ms`` after it is kept. The final is
        decoded speculatively as soon as the audio up to the release is in, and that decode
        stands if the tail holds no speech (engine.core.policy.speculation)."""
        tail = self.options.ptt_tail_ms * SAMPLE_RATE // 1000
        released = self._source.captured if at is None else max(0, at - tail)
        self._control("end", released + tail, released)

    def mute_input(self, seconds: float, at: int | None = None) -> int:
        """Replace ``seconds`` of captured audio from ``at`` (default: captured so far) with
        silence before the core (VAD, level, decoder) sees it: the app's own start cue, played
        on the speakers, must not be transcribed (engine.audio.cues). Returns ``at``; a second
        call with the same ``at`` replaces the range (to cut it short once the cue is over)."""
        start = self._source.captured if at is None else at
        with self._lock:
            self._mutes = [(a, b) for a, b in self._mutes if a != start]
            self._mutes.append((start, start + max(0, round(seconds * SAMPLE_RATE))))
        return start

    def _muted(self, block: Audio) -> Audio:
        """The block with the muted ranges silenced (a copy; the source's block is left as
        it is). Call under the lock."""
        end = self._source.position
        begin = end - len(block)
        self._mutes = [(a, b) for a, b in self._mutes if b > begin]
        overlapping = [(a, b) for a, b in self._mutes if a < end]
        if overlapping:
            block = block.copy()
            for a, b in overlapping:
                block[max(a, begin) - begin:min(b, end) - begin] = 0.0
        return block

    def set_vocabulary(self, terms: tuple[str, ...]) -> None:
        """Bias the decodes issued from now on towards ``terms`` (no model reload)."""
        with self._lock:
            self._vocabulary = tuple(terms)
            if self._core is not None:
                self._core.set_vocabulary(self._vocabulary)

    def set_language(self, language: str | None, languages: tuple[str, ...] = ()) -> None:
        """Decode in ``language`` from now on (None: detect among ``languages``); no model
        reload. An English-only model stays in English."""
        with self._lock:
            self._language = (language, tuple(languages))
            if self._core is not None:
                self._set_core_language()

    def reload(self, runner: Runner) -> None:
        """Switch to another model while running, without closing the microphone: the pipeline
        thread lets the decodes out finish on the old model, retires its inference threads and
        loads ``runner`` on a new one ("loading", then "ready" and "listening" again). Audio
        keeps flowing into the stream core meanwhile, so nothing heard is lost: what is spoken
        during the load is decoded once the model is in (the app refuses push-to-talk then, to
        be clear). A model that fails to load is reported (recoverable) and the old one stays."""
        self._reload_to.put(runner)

    def _reload(self, runner: Runner) -> None:
        """On the pipeline thread: see `reload`."""
        with self._lock:
            self._lock.wait_for(lambda: self._stream.in_flight == 0, self.options.drain_timeout_s)
            self._retiring = True  # no job goes out until the new workers are there
        for _ in self._workers:
            self._jobs.put(None)
        for worker in self._workers:
            worker.join(timeout=self.options.drain_timeout_s)
        self._workers = []
        old, self._runner = self._runner, runner
        self._emit_one(StateChanged("loading"))
        self._start_worker(load=True)
        while True:  # keep the microphone read (and the core fed) while the model loads
            try:
                failed = self._loaded.get_nowait()
                break
            except queue.Empty:
                self._read_once()
        if failed is not None:
            log.error("could not load the new model: %s", failed)
            self._emit_one(EngineFailed(f"could not load the new model ({failed}); keeping "
                                        f"{old.info.name}", recoverable=True))
            self._workers = []
            self._runner = old
            self._start_worker(load=False)
        self._streams = max(1, self._runner.streams)
        for _ in range(len(self._workers), self._streams):
            self._start_worker(load=False)
        with self._lock:
            self._retiring = False
            self._set_core_language()  # an English-only model decodes English
            self._dispatch(self.now())
        self._emit_one(StateChanged("ready", self._runner.info.name))
        self._emit_one(StateChanged("listening"))

    def _set_core_language(self) -> None:
        language, languages = self._language
        if not self._runner.info.multilingual:
            language, languages = "en", ()
        self._stream.set_language(language, languages)

    def _control(self, kind: str, at: int, released: int = 0) -> None:
        with self._lock:
            if self._core is None:
                self._early.append((kind, at, released))
            else:
                self._apply(kind, at, released)
                self._dispatch(self.now())

    def _apply(self, kind: str, at: int, released: int) -> None:
        if kind == "begin":
            self._stream.begin(at)
        else:
            self._stream.end(at)
            self._stream.speculate(released)

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
            self._start_worker(load=True)
            loaded = self._loaded.get()
            if loaded is not None:
                raise loaded
            self._streams = max(1, self._runner.streams)  # known once loaded (CUDA: 1)
            for _ in range(1, self._streams):
                self._start_worker(load=False)
            scorer = self._scorer if self._scorer is not None else _default_scorer()
            stream = self.options.stream()
            stream = replace(stream, policy=replace(stream.policy, max_in_flight=self._streams))
            with self._lock:
                stream = replace(stream, policy=stream.policy.for_model(self._runner.info))
                self._core = StreamCore(stream, scorer)
                self._core.set_vocabulary(self._vocabulary)
                if self._language != (self.options.policy.language,
                                      self.options.policy.languages):
                    self._set_core_language()  # changed while the model loaded
                for kind, at, released in self._early:
                    self._apply(kind, at, released)
            self._emit_one(StateChanged("ready", self._runner.info.name))
            if self._stop.is_set():
                return  # stopped while the model loaded: the source is never opened
            self._source.start()
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
        try:
            while not self._stop.is_set():
                if not self._reload_to.empty():
                    self._reload(self._reload_to.get())
                if not self._read_once() and self._source.finished:
                    break
        except EngineError as exc:
            log.error("audio source failed: %s", exc)
            return EngineFailed(str(exc), recoverable=False)
        return None

    def _read_once(self) -> bool:
        """Read one block (waiting up to the read timeout) and feed it; False when none came.
        A device error (EngineError) ends the capture."""
        block = self._source.read(self.options.read_timeout_s)
        if notice := device_notice(self._source):  # the microphone changed: say so, go on
            self._emit_one(EngineFailed(notice, recoverable=True))
        if block is None:
            return False
        self._on_block(block)
        return True

    def _on_block(self, block: Audio) -> None:
        end_time = self._source.position / SAMPLE_RATE
        if self._simulated:
            self._sim_deliver(until=end_time)
            self._sim_now = max(self._sim_now, end_time)
        with self._lock:
            if self._mutes:
                block = self._muted(block)
            now = self.now()
            self._emit(self._stream.feed(block, now))
            self._dispatch(now)

    @property
    def _stream(self) -> StreamCore:
        assert self._core is not None  # built before the source starts
        return self._core

    def _drain(self) -> None:
        """Flush the utterance in flight and wait until its final has been emitted."""
        if self._aborted.is_set():
            return
        with self._lock:
            now = self.now()
            self._emit(self._stream.flush(now))
            self._dispatch(now)
        if self._simulated:
            self._sim_deliver(until=float("inf"))
            return
        with self._lock:
            if not self._lock.wait_for(
                    lambda: self._stream.policy.idle or self._aborted.is_set(),
                    self.options.drain_timeout_s):
                self._emit_one(EngineFailed("gave up waiting for the last decode", True))

    def _shutdown(self, failure: EngineFailed | None) -> None:
        self._source.stop()
        if self._aborted.is_set():
            with contextlib.suppress(queue.Empty):
                while True:  # decodes not started yet are dropped
                    self._jobs.get_nowait()
        for _ in self._workers:
            self._jobs.put(None)
        for worker in self._workers:
            worker.join(timeout=self.options.drain_timeout_s)
        if self._journal is not None:
            self._journal.close()
        with self._lock:
            if failure is not None:
                self._emit_one(failure)
            self._emit_one(StateChanged("stopped"))
        self._finished.set()

    # -- decoding ------------------------------------------------------------------------

    def _dispatch(self, now: float) -> None:
        """Hand the core's next jobs to the free workers (lock held)."""
        while not self._retiring and self._stream.in_flight < self._streams:
            job = self._stream.next_job(now)
            if job is None:
                return
            self._jobs.put_nowait(job)  # never more than streams jobs out

    def _start_worker(self, load: bool) -> None:
        worker = threading.Thread(target=self._work, args=(load,), name="sottovoce-inference",
                                  daemon=True)
        self._workers.append(worker)
        worker.start()

    def _work(self, load: bool) -> None:
        if load:
            try:
                self._runner.load()
            except BaseException as exc:  # noqa: BLE001 - handed to the pipeline thread
                self._loaded.put(exc)
                return
            self._loaded.put(None)
        while True:
            job = self._jobs.get()
            if job is None:
                return
            outcome = self._decode(job)
            if self._simulated:
                self._outcomes.put(outcome)
                continue
            with self._lock:
                self._deliver(outcome, self._clock())
                self._dispatch(self._clock())
                self._lock.notify_all()

    def _decode(self, job: Job) -> _Outcome:
        started = time.perf_counter()
        try:
            transcript: Transcript | None = self._runner.decode_batch([job.request])[0]
            error = ""
        except Exception as exc:  # noqa: BLE001 - the worker's top: any failure becomes an event
            log.exception("decode of job %d failed", job.request_id)
            transcript, error = None, str(exc) or type(exc).__name__
        seconds = time.perf_counter() - started
        if self._simulated:
            seconds = max(0.0, self.options.decode_cost(job.request, transcript, seconds))
            if transcript is not None:  # the result says what the clock charged
                transcript = replace(transcript, decode_ms=seconds * 1000)
        return _Outcome(job, transcript, error, seconds)

    def _deliver(self, outcome: _Outcome, now: float) -> None:
        if outcome.transcript is None:
            self._emit(self._stream.on_failure(outcome.job, outcome.error, now))
        else:
            self._emit(self._stream.on_result(outcome.job, outcome.transcript, now))

    def _sim_deliver(self, until: float) -> None:
        """Simulated time: deliver, in the order they would have arrived, every result that
        is ready before ``until`` (waiting for every decode out to know that order)."""
        while True:
            with self._lock:
                missing = self._stream.in_flight - len(self._held)
            for _ in range(missing):
                self._held.append(self._outcomes.get())
            if not self._held:
                return
            # (Ties go to the job issued first, not to the thread that happened to finish.)
            outcome = min(self._held,
                          key=lambda o: (o.job.issued_at + o.seconds, o.job.request_id))
            ready_at = outcome.job.issued_at + outcome.seconds
            if ready_at > until:
                return
            with self._lock:
                self._sim_now = max(self._sim_now, ready_at)
                self._held = [o for o in self._held if o is not outcome]
                self._deliver(outcome, self._sim_now)
                self._dispatch(self._sim_now)

    # -- events --------------------------------------------------------------------------

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


def _default_scorer() -> SpeechScorer:
    from engine.vad import default_scorer

    return default_scorer()
