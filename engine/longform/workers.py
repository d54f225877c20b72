"""Optional: spread chunk decoding over worker processes, each holding its own model.

`ProcessPoolRunner` is an `engine.types.Runner` like `Ct2Runner`, so
`engine.files.transcribe_file` uses it unchanged. Each call splits its batch across the workers and waits for
all of them. It pays off where one process cannot keep the cores busy (many cores, Python-side
work between CTranslate2 calls); on a 2-core machine one process with 2 CTranslate2 threads is
usually as fast, and the extra models cost memory, so it is off by default.

Workers are started with ``spawn`` (never ``fork``: CTranslate2 and onnxruntime own threads that
a forked child would inherit in an unknown state) and only by an explicit `start()`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from engine.errors import EngineError, TranscriptionError
from engine.types import DecodeRequest, Transcript

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerSettings:
    """Which model each worker loads, and how the cores are shared.

    Attributes:
      model: a model name or directory for `engine.models.resolve_model`.
      device, compute_type: as for `engine.asr.ct2_decoder.Ct2Runner`.
      workers: processes; threads_per_worker: CTranslate2 threads in each (workers x threads
        should not exceed the cores).
    """

    model: str = "tiny.en"
    device: str = "cpu"
    compute_type: str = "auto"
    workers: int = 2
    threads_per_worker: int = 1

    def __post_init__(self) -> None:
        if self.workers < 1 or self.threads_per_worker < 1:
            raise ValueError("workers and threads_per_worker must be >= 1")


# The model of *this* worker process; set once by `_init_worker` in each child. A module
# global is the only state a ProcessPoolExecutor initializer can hand to later tasks.
_worker_runner: Any = None


def _init_worker(settings: WorkerSettings) -> None:
    global _worker_runner
    from engine.asr.ct2_decoder import Ct2Runner

    runner = Ct2Runner(settings.model, device=settings.device,
                       compute_type=settings.compute_type,
                       cpu_threads=settings.threads_per_worker)
    runner.load()
    _worker_runner = runner


def _decode(requests: list[DecodeRequest]) -> list[Transcript]:
    result: list[Transcript] = _worker_runner.decode_batch(requests)
    return result


class ProcessPoolRunner:
    """A batch runner over ``settings.workers`` processes. Use as a context manager, or call
    `start()` and `close()`."""

    def __init__(self, settings: WorkerSettings | None = None) -> None:
        self.settings = settings or WorkerSettings()
        self._pool: ProcessPoolExecutor | None = None

    def start(self) -> None:
        """Start the workers and wait until every one has loaded its model."""
        if self._pool is not None:
            return
        import multiprocessing

        n = self.settings.workers
        self._pool = ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context(
            "spawn"), initializer=_init_worker, initargs=(self.settings,))
        # An empty task per worker forces every initializer to run now, so a model that cannot
        # load fails here with a clear error instead of in the middle of a file.
        self._gather([self._pool.submit(_decode, []) for _ in range(n)])
        log.info("started %d decode workers (%d thread(s) each)", n,
                 self.settings.threads_per_worker)

    def load(self) -> None:
        self.start()

    @property
    def streams(self) -> int:
        """One: each call already spreads its batch over every worker."""
        return 1

    @property
    def device(self) -> str:
        return "cuda" if self.settings.device.startswith("cuda") else "cpu"

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> ProcessPoolRunner:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        """Decode ``requests`` across the workers; results in request order."""
        if self._pool is None:
            raise EngineError("worker pool not started: call start() first")
        if not requests:
            return []
        n = min(self.settings.workers, len(requests))
        # Round-robin keeps the shares balanced when neighbouring chunks differ in length.
        shares = [list(range(i, len(requests), n)) for i in range(n)]
        futures = [self._pool.submit(_decode, [requests[j] for j in share]) for share in shares]
        results: list[Transcript | None] = [None] * len(requests)
        for share, transcripts in zip(shares, self._gather(futures), strict=True):
            for j, transcript in zip(share, transcripts, strict=True):
                results[j] = transcript
        return [r for r in results if r is not None]

    @staticmethod
    def _gather(futures: list[Future[list[Transcript]]]) -> list[list[Transcript]]:
        try:
            return [f.result() for f in futures]
        except BrokenProcessPool as exc:
            raise TranscriptionError(f"a decode worker died: {exc}") from exc
