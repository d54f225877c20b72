"""What runs on the cluster's workers: the decode actor and the per-file task.

`DecodeActor` holds one model (`Ct2Runner`, one replica; the sequential decoder for short files
shares it where the layouts agree). `RemoteRunner` is an `engine.types.Runner` whose
``decode_batch`` is a call on one of the actors, so `engine.files.transcribe_file` drives a file
on the cluster unchanged: its waves put one batch on each of ``streams`` actors at a time.

Loss-free: the actors restart when their worker or node dies (Ray ``max_restarts``); a call that
was on a dying actor fails over to another live one (`call_any`: Ray re-runs an actor call
only on the same actor, which may have no node left to restart on); a file task whose node dies
is run again by Ray (``max_retries``). Decoding is deterministic per batch, so a retried batch
or file gives the same text.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from engine.types import Audio, DecodeOptions, DecodeRequest, ModelInfo, Segment, Transcript

log = logging.getLogger(__name__)

# How long a call keeps looking for a live actor (restarts take a model load) before the file
# is reported as failed.
FAILOVER_TIMEOUT_S = 900.0
# A call not answered in this long is tried elsewhere (a batch takes seconds; an actor that
# lost its node waits for room to restart, which may never come). The batch may then be decoded
# twice, never lost; the result is the same either way.
CALL_TIMEOUT_S = 300.0
ALIVE_CHECK_S = 2.0


@dataclass(frozen=True)
class ActorLayout:
    """The model each actor loads: as the local runner would on the submitting machine."""

    model: str
    device: str = "cpu"
    compute_type: str = "auto"
    threads: int = 1  # CTranslate2 threads of the chunk decoder (the local replica's share)
    sequential_threads: int = 1  # of the sequential decoder (locally: all cores)
    # The local runner's byte budget for decode buffers (engine.asr.budget), per actor, and
    # its generate slices on the CPU: the same calls as a local run, so the same text.
    decode_memory_mb: float | None = None
    max_batch: int | None = None


class DecodeActor:
    """One model on one worker (made a Ray actor by the driver: ``ray.remote(DecodeActor)``)."""

    def __init__(self, layout: ActorLayout) -> None:
        from engine.asr.ct2_decoder import Ct2Runner

        self.layout = layout
        self.runner = Ct2Runner(layout.model, device=layout.device,
                                compute_type=layout.compute_type, cpu_threads=layout.threads,
                                max_batch=layout.max_batch,
                                decode_memory_mb=layout.decode_memory_mb)
        self.runner.load()  # on the actor's own thread, which lives as long as the actor
        self._sequential: Any = None

    def info(self) -> ModelInfo:
        return self.runner.info

    def node(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def decode(self, requests: list[DecodeRequest]) -> list[Transcript]:
        return self.runner.decode_batch(requests)

    def memory(self) -> dict[str, float | int | None]:
        """The decode budget (MB), the most of it ever held at once (MB), the calls that
        waited for it, and the actor process's peak RSS (MB)."""
        import resource

        budget = self.runner.budget
        rss = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        if budget is None:
            return {"budget_mb": None, "peak_mb": None, "waits": 0, "max_rss_mb": rss}
        return {"budget_mb": budget.limit / 2**20, "peak_mb": round(budget.peak / 2**20, 1),
                "waits": budget.waits, "max_rss_mb": rss}

    def sequential(self, audio: Audio, options: DecodeOptions
                   ) -> tuple[list[Segment], str | None]:
        """A short file decoded whole by faster-whisper's loop (what the local CLI does under
        2 minutes), segments as a list (an iterator cannot cross processes)."""
        if self._sequential is None:
            from engine.asr.sequential import SequentialRunner

            lay = self.layout
            same = lay.device != "cpu" or lay.sequential_threads == lay.threads
            self._sequential = SequentialRunner(self.runner.model) if same else SequentialRunner(
                lay.model, device=lay.device, compute_type=lay.compute_type,
                cpu_threads=lay.sequential_threads)
            self._sequential.load()
        segments, language = self._sequential.iter_segments(audio, options)
        return list(segments), language


def call_any(actors: Sequence[Any], start: int, call: Callable[[Any], Any],
             timeout_s: float = FAILOVER_TIMEOUT_S) -> tuple[Any, list[Any]]:
    """``call(actor)`` on ``actors[start % n]``; if that actor dies, or gives no answer within
    `CALL_TIMEOUT_S` (restarting with no room left to restart in), on the next, round and round
    until one answers or ``timeout_s`` passes. Returns the result and the actors that failed.
    Other errors propagate."""
    from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

    from engine.errors import TranscriptionError

    deadline = time.monotonic() + timeout_s
    failed: list[Any] = []
    for attempt in itertools.count():
        actor = actors[(start + attempt) % len(actors)]
        try:
            return _get_while_alive(actor, call(actor)), failed
        except (RayActorError, ActorUnavailableError, GetTimeoutError) as exc:
            log.warning("decode actor unavailable (%s): trying another", type(exc).__name__)
            failed.append(actor)
            if time.monotonic() > deadline:
                raise TranscriptionError(f"no decode actor answered for {timeout_s:.0f} s") from exc
            if (attempt + 1) % len(actors) == 0:
                time.sleep(1.0)  # every actor refused: give the restarts time
    raise AssertionError("unreachable")


def _get_while_alive(actor: Any, ref: Any) -> Any:
    """``ray.get(ref)``, but give up (GetTimeoutError) once the actor is not alive: one whose
    node died waits in RESTARTING for room that may not come, and a call queued to it with
    it. Checked in the GCS's actor table every `ALIVE_CHECK_S`, and after `CALL_TIMEOUT_S`."""
    import ray
    from ray.exceptions import GetTimeoutError

    deadline = time.monotonic() + CALL_TIMEOUT_S
    while True:
        ready, _ = ray.wait([ref], timeout=ALIVE_CHECK_S)
        if ready:
            return ray.get(ref)
        if time.monotonic() > deadline or _actor_state(actor) not in ("ALIVE", None):
            raise GetTimeoutError("the decode actor is not alive")


def _actor_state(actor: Any) -> str | None:
    """"ALIVE", "RESTARTING", "DEAD"... from the GCS (None when it cannot say)."""
    try:
        from ray._private import state

        info = state.actors(actor_id=actor._actor_id.hex())
        return str(info.get("State")) if info else None
    except Exception:  # noqa: BLE001 - a private API: when it changes, fall back to the timeout
        return None


class RemoteRunner:
    """An `engine.types.Runner` over the decode actors: each ``decode_batch`` is one actor call,
    spread round-robin; ``streams``, ``device`` and ``info`` are what the driver fixed."""

    def __init__(self, actors: Sequence[Any], info: ModelInfo, device: str, streams: int,
                 first: int = 0) -> None:
        self._actors = list(actors)
        self._info, self._device, self._streams = info, device, streams
        self._next = itertools.count(first)  # next() is atomic under the GIL: threads share it
        self.calls = 0
        self.failovers = 0  # calls that had to move to another actor

    @property
    def info(self) -> ModelInfo:
        return self._info

    @property
    def streams(self) -> int:
        return self._streams

    @property
    def device(self) -> str:
        return self._device

    def load(self) -> None:
        """The actors loaded their models when they started."""

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        if not requests:
            return []
        self.calls += 1
        batch = list(requests)
        result, failed = call_any(self._actors, next(self._next),
                                  lambda a: a.decode.remote(batch))
        self._drop(failed)
        return list(result)

    def iter_segments(self, audio: Audio, options: DecodeOptions
                      ) -> tuple[Iterator[Segment], str | None]:
        """The `engine.files.SequentialDecoder` side: a short file on one actor."""
        self.calls += 1
        (segments, language), failed = call_any(
            self._actors, next(self._next), lambda a: a.sequential.remote(audio, options))
        self._drop(failed)
        return iter(segments), language

    def _drop(self, failed: list[Any]) -> None:
        """This file's later batches avoid actors that failed (while any other is left)."""
        self.failovers += len(failed)
        for actor in failed:
            if actor in self._actors and len(self._actors) > 1:
                self._actors.remove(actor)


@dataclass(frozen=True)
class FileJob:
    """What a file task needs besides its path: the run's fixed settings."""

    fmt: str
    options: Any  # engine.files.FileOptions (sequential_below_s and batch_size fixed)
    info: ModelInfo
    device: str
    streams: int


def transcribe_one(path: str, job: FileJob, actors: Sequence[Any], board: Any,
                   first: int) -> dict[str, Any]:
    """A file task's body: the file through `engine.files.transcribe_file`, rendered.

    Returns ``{"status": "ok", "text", "seconds", "language", "calls", "failovers"}`` or ``{"status":
    "error", "error"}`` for what the local CLI reports as a one-line error (unreadable input,
    a decode that fails). Progress goes to ``board`` (a `engine.cluster.progress.Board` actor).
    """
    from engine.audio.decode import load_audio
    from engine.errors import EngineError
    from engine.files import Progress, transcribe_file
    from engine.types import SAMPLE_RATE
    from engine.wire.export import render

    board.start.remote(path)
    runner = RemoteRunner(actors, job.info, job.device, job.streams, first)
    try:
        audio = load_audio(path)
        run = transcribe_file(audio, runner, job.options, sequential=runner)
        last = 0.0
        for event in run:
            if isinstance(event, Progress) and time.monotonic() - last > 0.5:
                board.report.remote(path, event.done / SAMPLE_RATE)
                last = time.monotonic()
        transcript = run.transcript()
    except EngineError as exc:
        return {"status": "error", "error": str(exc)}
    return {"status": "ok", "text": render(transcript, job.fmt),
            "seconds": len(audio) / SAMPLE_RATE, "language": transcript.language,
            "calls": runner.calls, "failovers": runner.failovers}
