"""Cross-session batching: one inference thread, many sessions, one batched decode at a time.

Sessions submit decode requests from the asyncio loop; the inference thread takes the first
waiting request, then gathers whatever else arrives within ``window_ms`` (up to ``max_batch``)
and hands the lot to the runner as one ``decode_batch`` call. While a batch is decoding, new
requests queue up, so under load batches fill by themselves (request-level in-flight batching)
and an idle server adds at most ``window_ms`` to a lone request.

Queue bound and overflow policy: each session has at most one request in flight, so the queue
never holds more than the session limit; ``queue_size`` is set above that and a submit that
still finds it full fails that one request with `TranscriptionError` (the session reports an
error) instead of blocking the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.asr.ct2_decoder import DecodeRequest
from engine.errors import EngineError, TranscriptionError
from engine.server.runner import Runner, audio_seconds
from engine.types import Transcript

log = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass(frozen=True)
class SchedulerOptions:
    """``max_batch`` 1 turns batching off (one request per decode, in arrival order).

    ``max_pad_ratio``: a batch is encoded at the length of its longest item, so a gathered
    batch is split into runs of similar length where the padded audio stays within this factor
    of the real audio (partials of short and long utterances mix freely otherwise; on a CPU the
    padding can cost more than batching saves). Use a large value on a GPU, where width is
    nearly free.
    """

    max_batch: int = 16
    window_ms: float = 5.0
    queue_size: int = 256
    max_pad_ratio: float = 1.6

    def __post_init__(self) -> None:
        if self.max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        if self.max_pad_ratio < 1.0:
            raise ValueError("max_pad_ratio must be >= 1")
        if not 0.0 <= self.window_ms <= 1000.0:
            raise ValueError("window_ms must be within 0..1000")
        if self.queue_size < 1:
            raise ValueError("queue_size must be >= 1")


@dataclass
class SchedulerStats:
    """Counters for /metrics; written by the inference thread only."""

    batches: int = 0
    requests: int = 0
    errors: int = 0
    decode_seconds: float = 0.0
    audio_seconds: float = 0.0
    batch_sizes: dict[int, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        mean = self.requests / self.batches if self.batches else 0.0
        return {"batches": self.batches, "requests": self.requests, "errors": self.errors,
                "mean_batch_size": round(mean, 2),
                "decode_seconds": round(self.decode_seconds, 3),
                "audio_seconds": round(self.audio_seconds, 3),
                "batch_sizes": {str(k): v for k, v in sorted(self.batch_sizes.items())}}


@dataclass
class _Pending:
    request: DecodeRequest
    future: asyncio.Future[Transcript]
    loop: asyncio.AbstractEventLoop


_STOP = object()


class BatchScheduler:
    """Owns the inference thread. `start()` / `stop()` are explicit; `decode()` is awaited."""

    def __init__(self, runner: Runner, options: SchedulerOptions | None = None,
                 clock: Clock = time.monotonic) -> None:
        self.runner = runner
        self.options = options or SchedulerOptions()
        self.stats = SchedulerStats()
        self._clock = clock
        self._queue: queue.Queue[_Pending | object] = queue.Queue(self.options.queue_size)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="sottovoce-inference", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread is None:
            return
        # The stop marker may wait behind a full queue; the thread drains it first.
        self._queue.put(_STOP, timeout=timeout)
        self._thread.join(timeout)
        self._thread = None

    async def decode(self, request: DecodeRequest) -> Transcript:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Transcript] = loop.create_future()
        try:
            self._queue.put_nowait(_Pending(request, future, loop))
        except queue.Full:
            raise TranscriptionError("decode queue full; server overloaded") from None
        return await future

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            assert isinstance(first, _Pending)
            batch, stop = self._gather(first)
            for group in split_by_length(batch, self.options.max_pad_ratio):
                self._decode(group)
            if stop:
                return

    def _gather(self, first: _Pending) -> tuple[list[_Pending], bool]:
        """The first request plus whatever arrives before the window closes."""
        batch = [first]
        deadline = self._clock() + self.options.window_ms / 1000
        while len(batch) < self.options.max_batch:
            try:
                # Already-waiting requests are taken without waiting at all.
                item = self._queue.get_nowait()
            except queue.Empty:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    break
                try:
                    item = self._queue.get(timeout=remaining)
                except queue.Empty:
                    break
            if item is _STOP:
                return batch, True
            assert isinstance(item, _Pending)
            batch.append(item)
        return batch, False

    def _decode(self, batch: list[_Pending]) -> None:
        requests = [p.request for p in batch]
        started = self._clock()
        try:
            results = self.runner.decode_batch(requests)
            if len(results) != len(batch):
                raise TranscriptionError("runner returned a wrong number of results")
        except Exception as exc:  # noqa: BLE001 - the thread's top: fail the batch, keep serving
            log.exception("batch of %d failed", len(batch))
            self.stats.errors += len(batch)
            error = exc if isinstance(exc, EngineError) else TranscriptionError(str(exc))
            for pending in batch:
                _deliver(pending, _set_exception, error)
            return
        elapsed = self._clock() - started
        self.stats.batches += 1
        self.stats.requests += len(batch)
        self.stats.decode_seconds += elapsed
        self.stats.audio_seconds += audio_seconds(requests)
        self.stats.batch_sizes[len(batch)] = self.stats.batch_sizes.get(len(batch), 0) + 1
        for pending, result in zip(batch, results, strict=True):
            _deliver(pending, _set_result, result)


def split_by_length(batch: list[_Pending], max_pad_ratio: float) -> list[list[_Pending]]:
    """Runs of similar length (shortest first) whose padded size stays within the ratio."""
    ordered = sorted(batch, key=lambda item: len(item.request.audio))
    groups: list[list[_Pending]] = []
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


def _deliver(pending: _Pending, setter: Callable[..., None], value: object) -> None:
    try:
        pending.loop.call_soon_threadsafe(setter, pending.future, value)
    except RuntimeError:  # that session's event loop is closed: nobody is waiting any more
        log.debug("dropped a result for a closed event loop")


def _set_result(future: asyncio.Future[Transcript], result: Transcript) -> None:
    if not future.done():  # the session may have gone away and cancelled it
        future.set_result(result)


def _set_exception(future: asyncio.Future[Transcript], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
