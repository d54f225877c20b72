"""Cross-session batching: one inference thread, many sessions, one batched decode at a time.

Sessions submit decode requests from the asyncio loop (`submit`, or `decode` to await one); the
inference thread takes what is waiting, gathers whatever else arrives within ``window_ms`` (up
to ``max_batch``) and hands it to the runner as ``decode_batch`` calls. While a batch is
decoding, new requests queue up, so under load batches fill by themselves (request-level
in-flight batching) and an idle server adds at most ``window_ms`` to a lone request.

Finals first: a final ("urgent") is what a user waits for, a partial is a preview. A round
takes only finals while any are waiting, so a final never queues behind partials that came
before it, only behind the decode already running (a partial round is split into runs of
similar length, and the runs not yet started give way to a final that comes in meanwhile);
partials go in a round of their own. File work (OpenAI's transcription endpoint,
`SchedulerRunner`) comes last: a round of it is taken only when no final or partial waits,
and its runs not yet started give way to live work that comes in meanwhile. Under
overload partials therefore wait longer, and each session's policy, seeing the longer round
trip, asks for them less often (``busy_factor``). A session takes back (`withdraw`) a queued
partial of an utterance that has ended meanwhile: its result would be thrown away, and it
would hold back that utterance's final (a session has one request in flight at a time).

Length: a gathered round is split into runs of similar length (`split_by_length`), shortest
first, since every item of a call is encoded at the length of the longest. Prompts: items of
a batch are decoded without their prompt (`without_prompts` says why); a lone request keeps
it.

Failures: a batch whose decode raises is decoded again request by request, so a request that
cannot be decoded fails alone (its session is told) and the others of its batch get their text.

Queue bound and overflow policy: each session has at most one request in flight, so the queue
never holds more than the session limit; ``queue_size`` is set above that, and a submit that
still finds it full fails that one request with `TranscriptionError` (the session reports an
error) instead of blocking the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from engine.asr.wrapper import RunnerWrapper
from engine.errors import EngineError, TranscriptionError
from engine.types import SAMPLE_RATE, DecodeRequest, Runner, Transcript

log = logging.getLogger(__name__)

Clock = Callable[[], float]
FINAL = "final"
PARTIAL = "partial"
FILE = "file"


@dataclass(frozen=True)
class SchedulerOptions:
    """``max_batch`` 1 turns batching off (one request per decode, finals first).

    ``max_pad_ratio``: a batch is encoded at the length of its longest item, so a gathered
    batch is split into runs of similar length where the padded audio stays within this factor
    of the real audio (partials of short and long utterances mix freely otherwise; on a CPU the
    padding can cost more than batching saves). Use a large value on a GPU, where width is
    nearly free.
    """

    max_batch: int = 16
    # File work goes in smaller rounds: a live request that arrives waits for the run in
    # progress, and a run of 16 file chunks of 20 s is seconds of CPU time.
    max_file_batch: int = 4
    window_ms: float = 5.0
    queue_size: int = 256
    max_pad_ratio: float = 1.6

    def __post_init__(self) -> None:
        if self.max_batch < 1 or self.max_file_batch < 1:
            raise ValueError("max_batch and max_file_batch must be >= 1")
        if self.max_pad_ratio < 1.0:
            raise ValueError("max_pad_ratio must be >= 1")
        if not 0.0 <= self.window_ms <= 1000.0:
            raise ValueError("window_ms must be within 0..1000")
        if self.queue_size < 1:
            raise ValueError("queue_size must be >= 1")


@dataclass
class KindStats:
    """Work of one kind (finals or partials): how much, how long it waited, how long it took."""

    requests: int = 0
    audio_seconds: float = 0.0
    decode_seconds: float = 0.0
    wait_seconds: float = 0.0
    fallbacks: int = 0  # items the runner re-decoded on the padded window (``extra.fallback``)
    # batch size -> [calls, seconds]: what an item costs at each batch size
    by_size: dict[int, list[float]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        wait = self.wait_seconds / self.requests * 1000 if self.requests else 0.0
        per_item = {str(size): {"calls": int(calls), "ms_per_item": round(
            seconds / calls / size * 1000, 1)} for size, (calls, seconds) in
            sorted(self.by_size.items())}
        return {"requests": self.requests, "audio_seconds": round(self.audio_seconds, 3),
                "decode_seconds": round(self.decode_seconds, 3), "mean_wait_ms": round(wait, 1),
                "fallbacks": self.fallbacks, "by_batch_size": per_item}


@dataclass
class SchedulerStats:
    """Counters for /metrics; written by the inference thread (``withdrawn`` under the lock)."""

    batches: int = 0
    requests: int = 0
    errors: int = 0
    withdrawn: int = 0
    decode_seconds: float = 0.0
    audio_seconds: float = 0.0
    batch_sizes: dict[int, int] = field(default_factory=dict)
    kinds: dict[str, KindStats] = field(
        default_factory=lambda: {FINAL: KindStats(), PARTIAL: KindStats(), FILE: KindStats()})

    def as_dict(self) -> dict[str, object]:
        mean = self.requests / self.batches if self.batches else 0.0
        return {"batches": self.batches, "requests": self.requests, "errors": self.errors,
                "withdrawn": self.withdrawn, "mean_batch_size": round(mean, 2),
                "decode_seconds": round(self.decode_seconds, 3),
                "audio_seconds": round(self.audio_seconds, 3),
                "batch_sizes": {str(k): v for k, v in sorted(self.batch_sizes.items())},
                **{f"{kind}s": s.as_dict() for kind, s in self.kinds.items()}}


@dataclass(eq=False)
class Ticket:
    """One submitted request. ``state`` goes "queued" -> "taken" (by the inference thread) or
    "withdrawn" (by its session), under the scheduler's lock."""

    request: DecodeRequest
    future: asyncio.Future[Transcript]
    loop: asyncio.AbstractEventLoop
    urgent: bool = False
    queued_at: float = 0.0
    state: str = "queued"
    background: bool = False  # file work: decoded when no live request waits

    @property
    def kind(self) -> str:
        return FILE if self.background else FINAL if self.urgent else PARTIAL


class BatchScheduler:
    """Owns the inference thread. `start()` / `stop()` are explicit; `decode()` is awaited."""

    def __init__(self, runner: Runner, options: SchedulerOptions | None = None,
                 clock: Clock = time.monotonic) -> None:
        self.runner = runner
        self.options = options or SchedulerOptions()
        self.stats = SchedulerStats()
        self._clock = clock
        self._ready = threading.Condition()  # guards the queues, ticket states and _stopping
        self._urgent: deque[Ticket] = deque()
        self._normal: deque[Ticket] = deque()
        self._background: deque[Ticket] = deque()
        self._stopping = False
        self._thread: threading.Thread | None = None

    @property
    def waiting(self) -> int:
        with self._ready:
            return len(self._urgent) + len(self._normal) + len(self._background)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="sottovoce-inference", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Decode what is queued, then end the thread."""
        if self._thread is None:
            return
        with self._ready:
            self._stopping = True
            self._ready.notify()
        self._thread.join(timeout)
        self._thread = None

    def submit(self, request: DecodeRequest, *, urgent: bool = False,
               background: bool = False) -> Ticket:
        """Queue a request (call on the event loop that awaits ``ticket.future``); a
        ``background`` one (file work) has its own queue of the same bound, so files never
        fill the live sessions' queue."""
        loop = asyncio.get_running_loop()
        ticket = Ticket(request, loop.create_future(), loop, urgent and not background,
                        self._clock(), background=background)
        with self._ready:
            if self._stopping:
                raise TranscriptionError("server is stopping")
            queue = self._queue(ticket)
            held = len(queue) if background else len(self._urgent) + len(self._normal)
            if held >= self.options.queue_size:
                raise TranscriptionError("decode queue full; server overloaded")
            queue.append(ticket)
            self._ready.notify()
        return ticket

    def _queue(self, ticket: Ticket) -> deque[Ticket]:
        return (self._background if ticket.background else self._urgent if ticket.urgent
                else self._normal)

    async def decode(self, request: DecodeRequest, *, urgent: bool = False) -> Transcript:
        return await self.submit(request, urgent=urgent).future

    def withdraw(self, ticket: Ticket) -> bool:
        """Take back a request that has not started decoding (call on its event loop); its
        future gets an empty transcript marked ``withdrawn``. False when it already started."""
        with self._ready:
            if ticket.state != "queued":
                return False
            ticket.state = "withdrawn"
            self._queue(ticket).remove(ticket)
            self.stats.withdrawn += 1
        empty = Transcript(segments=(), duration=len(ticket.request.audio),
                           extra={"path": "withdrawn"})
        _set_result(ticket.future, empty)
        return True

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            groups = split_by_length(batch, self.options.max_pad_ratio)
            for i, group in enumerate(groups):
                if i and not group[0].urgent and self._yield_to_live(
                        [t for g in groups[i:] for t in g]):
                    break
                self._decode(group)

    def _yield_to_live(self, rest: list[Ticket]) -> bool:
        """When a final came in while a partial round decodes (or any live request while a
        file round does), the runs not yet started go back to the front of their queue, so
        the newcomer waits for one run at most. (The queue may then briefly hold up to
        ``max_batch`` more than ``queue_size``.)"""
        with self._ready:
            if not (self._urgent or (rest[0].background and self._normal)):
                return False
            for ticket in reversed(rest):
                ticket.state = "queued"
                self._queue(ticket).appendleft(ticket)
            return True

    def _requests(self, batch: list[Ticket]) -> list[DecodeRequest]:
        if len(batch) == 1:
            return [batch[0].request]
        return without_prompts([t.request for t in batch])

    def _take(self) -> list[Ticket] | None:
        """The next round: waiting finals if any, else waiting partials, else file work (after
        the gather window); None once stopping with nothing left."""
        with self._ready:
            while not (self._urgent or self._normal or self._background):
                if self._stopping:
                    return None
                self._ready.wait()
            deadline = self._clock() + self.options.window_ms / 1000
            while not self._stopping and max(len(self._urgent) + len(self._normal), len(
                    self._background)) < self.options.max_batch:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    break
                self._ready.wait(remaining)
            source = self._urgent or self._normal or self._background
            most = (self.options.max_file_batch if source is self._background
                    else self.options.max_batch)
            batch = [source.popleft() for _ in range(min(len(source), most))]
            for ticket in batch:
                ticket.state = "taken"
            return batch

    def _decode(self, batch: list[Ticket]) -> None:
        requests = self._requests(batch)
        started = self._clock()
        try:
            results = self.runner.decode_batch(requests)
            if len(results) != len(batch):
                raise TranscriptionError("runner returned a wrong number of results")
        except Exception as exc:  # noqa: BLE001 - the thread's top: fail the batch, keep serving
            if len(batch) > 1:
                # One bad request (a language the model refuses...) must not fail the others:
                # each is decoded alone, and only the one that fails alone fails.
                log.warning("batch of %d failed (%s); decoding its requests one by one",
                            len(batch), exc)
                for ticket in batch:
                    self._decode([ticket])
                return
            log.exception("request failed")
            self.stats.errors += 1
            error = exc if isinstance(exc, EngineError) else TranscriptionError(str(exc))
            _deliver(batch[0], _set_exception, error)
            return
        self._count(batch, results, started, self._clock() - started)
        for ticket, result in zip(batch, results, strict=True):
            _deliver(ticket, _set_result, result)

    def _count(self, batch: list[Ticket], results: list[Transcript], started: float,
               elapsed: float) -> None:
        seconds = audio_seconds([t.request for t in batch])
        self.stats.batches += 1
        self.stats.requests += len(batch)
        self.stats.decode_seconds += elapsed
        self.stats.audio_seconds += seconds
        self.stats.batch_sizes[len(batch)] = self.stats.batch_sizes.get(len(batch), 0) + 1
        kind = self.stats.kinds[batch[0].kind]  # a round holds one kind only
        kind.requests += len(batch)
        kind.audio_seconds += seconds
        kind.decode_seconds += elapsed
        kind.wait_seconds += sum(started - t.queued_at for t in batch)
        kind.fallbacks += sum(r.extra.get("fallback") is not None for r in results)
        calls_seconds = kind.by_size.setdefault(len(batch), [0, 0.0])
        calls_seconds[0] += 1
        calls_seconds[1] += elapsed


def split_by_length(batch: list[Ticket], max_pad_ratio: float) -> list[list[Ticket]]:
    """Runs of similar length (shortest first) whose padded size stays within the ratio."""
    ordered = sorted(batch, key=lambda item: len(item.request.audio))
    groups: list[list[Ticket]] = []
    for item in ordered:
        if groups:
            group = groups[-1]
            longest = len(item.request.audio)
            real = sum(len(g.request.audio) for g in group) + longest
            if longest * (len(group) + 1) <= max_pad_ratio * real:
                group.append(item)
                continue
        groups.append([item])
    return groups


def without_prompts(requests: list[DecodeRequest]) -> list[DecodeRequest]:
    """The requests of a batch with their prompts (previous text) left out.

    Why: a batched generate needs every prompt at one token length, and the decoder pads the
    shorter ones with filler tokens, which derails Whisper. Measured on 16 finals (2.8-11.7 s,
    beam 5, the previous utterance's text as prompt, tiny.en on 2 CPU cores): decoded one by
    one with prompts, WER 8.8 %, 3 fallbacks to the slow 30 s window, 9.3 s; in this
    scheduler's batches with prompts 3-6 fallbacks and 1.3-1.6x slower than one by one (cut
    to a common word count: WER 8.8 %, 4 fallbacks, 11.9 s); in batches without prompts
    WER 7.8 %, no fallback, 3.4 s. A request decoded alone keeps its prompt, so prompts only
    go when the server is busy enough to batch.

    Vocabularies (``hotwords``) fill the same slot, so the same holds: requests of one batch
    whose vocabulary text is the batch's most common one keep it (same tokens, no padding),
    the others are decoded without theirs.
    """
    texts = Counter(r.options.hotwords for r in requests if r.options.hotwords)
    kept = texts.most_common(1)[0][0] if texts else None
    return [replace(r, options=replace(
        r.options, prompt=None,
        hotwords=r.options.hotwords if r.options.hotwords == kept else None))
        if r.options.prompt or r.options.hotwords else r for r in requests]


def _deliver(ticket: Ticket, setter: Callable[..., None], value: object) -> None:
    try:
        ticket.loop.call_soon_threadsafe(setter, ticket.future, value)
    except RuntimeError:  # that session's event loop is closed: nobody is waiting any more
        log.debug("dropped a result for a closed event loop")


def _set_result(future: asyncio.Future[Transcript], result: Transcript) -> None:
    if not future.done():  # the session may have gone away and cancelled it
        future.set_result(result)


def _set_exception(future: asyncio.Future[Transcript], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def audio_seconds(requests: list[DecodeRequest]) -> float:
    return sum(len(r.audio) for r in requests) / SAMPLE_RATE


class SchedulerRunner(RunnerWrapper):
    """The scheduler as a `Runner` for work off the event loop (a file decoded by the long-form
    pipeline in a worker thread): each request is queued as file work on ``loop``, so it is
    batched with other files' chunks and never delays a live session's decode."""

    def __init__(self, scheduler: BatchScheduler, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(scheduler.runner)
        self._scheduler = scheduler
        self._loop = loop

    def load(self) -> None:
        """The server's runner is loaded before it serves."""

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        async def decode(request: DecodeRequest) -> Transcript:
            return await self._scheduler.submit(request, background=True).future

        pending = [asyncio.run_coroutine_threadsafe(decode(r), self._loop) for r in requests]
        return [future.result() for future in pending]
