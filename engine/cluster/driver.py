"""The driver of `sottovoce transcribe --cluster`: connect, start actors, fan files out, collect.

Every input ends in exactly one of: written output (atomically, as soon as its file task
returns), skipped (its output already exists: a rerun does no work, and does not even connect
when nothing is left), or a reported error (the file's own error, as the local CLI words it, or
the task's failure after Ray's retries). The summary lists all three.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.asr.budget import DECODE_MEMORY_MB
from engine.atomic import atomic_write_text
from engine.cluster.inputs import ClusterInput, is_done, list_inputs, probe_seconds
from engine.cluster.progress import Bar, Board, Tally
from engine.cluster.remote import ActorLayout, DecodeActor, FileJob, transcribe_one
from engine.errors import EngineError
from engine.outputs import Manifest, check_folder
from engine.types import DecodeOptions

if TYPE_CHECKING:
    from engine.files import FileOptions

log = logging.getLogger(__name__)

SUMMARY_NAME = "sottovoce-summary.json"
FILES_PER_ACTOR = 2  # file tasks in flight per decode actor: one waits on a wave, one plans
FILE_TASK_RETRIES = 4  # Ray re-runs a file task whose worker or node died


@dataclass(frozen=True)
class ClusterOptions:
    """``address``: "local" (start Ray here), "auto" (the cluster this machine belongs to),
    ``ray://HOST:PORT`` (Ray client) or ``HOST:PORT`` (the head's GCS)."""

    address: str
    out_dir: Path
    fmt: str
    options: DecodeOptions | FileOptions  # what `FileOptions.coerce` takes (the CLI: for_beam's)
    model: str
    engine: str = "auto"
    device: str = "auto"
    compute_type: str = "auto"
    actors: int | None = None
    summary: Path | None = None
    progress: bool = False
    decode_memory_mb: float | None = DECODE_MEMORY_MB  # per actor (engine.asr.budget)


def run_cluster(sources: Sequence[str], opts: ClusterOptions) -> int:
    """Transcribe ``sources`` on the cluster; returns the exit status (0, or 1 if any failed).

    Before any work (and before connecting): the output folder is checked, its manifest
    (`engine.outputs.Manifest`) says which output is whose and is saved with the new inputs,
    and the summary is written; any of these failing raises EngineError and costs nothing.
    The summary's last state is "done", "interrupted" (Ctrl-C) or "failed"."""
    check_folder(opts.out_dir)
    manifest = Manifest.load(opts.out_dir)
    items = list_inputs(sources, opts.out_dir, opts.fmt, manifest)
    manifest.save()
    todo = [i for i in items if not is_done(i)]
    tally = Tally(total_s=0.0)
    tally.skipped = [{"input": i.key, "output": str(i.output)} for i in items if is_done(i)]
    summary = opts.summary or opts.out_dir / SUMMARY_NAME
    extra: dict[str, Any] = {"inputs": len(items)}
    _write_summary(summary, tally.summary("running", extra), strict=True)
    try:
        if todo:
            _run(todo, opts, tally, summary, extra)
    except BaseException as exc:  # Ctrl-C included: the summary says what was done
        _write_summary(summary, tally.summary(
            "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed", extra))
        raise
    _write_summary(summary, tally.summary("done", extra))
    log.info("cluster run: %d done, %d skipped, %d errors", len(tally.done), len(tally.skipped),
             len(tally.errors))
    return 1 if tally.errors else 0


def _run(todo: list[ClusterInput], opts: ClusterOptions, tally: Tally, summary: Path,
         extra: dict[str, Any]) -> None:
    try:
        ray = _ray()
    except ImportError as exc:
        raise EngineError("--cluster needs Ray: pip install 'sottovoce[cluster]'") from exc
    started = time.monotonic()
    connect(opts.address)
    try:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        layout, streams, batch = local_layout(opts, gpus > 0)
        actors = start_actors(layout, opts.actors or default_actors(layout, gpus), gpus > 0)
        info = ray.get(actors[0].info.remote())
        extra["ray"] = {"version": ray.__version__, "address": opts.address,
                        "nodes": sum(1 for n in ray.nodes() if n.get("Alive")),
                        "actors": len(actors), "device": layout.device, "streams": streams,
                        "batch_size": batch, "startup_s": round(time.monotonic() - started, 2)}
        seconds = probe_all([i.path for i in todo])
        tally.total_s = sum(s or 0.0 for s in seconds)
        tally.started = time.monotonic()
        # Longest first: the long tail of a run is then short files, spread over every actor.
        order = sorted(zip(todo, seconds, strict=True), key=lambda p: -(p[1] or 0.0))
        options = replace(_file_options(opts, layout.device), batch_size=batch)
        job = FileJob(opts.fmt, options, info, layout.device, streams)
        _fan_out(order, job, actors, tally, summary, extra, opts.progress)
        extra["ray"]["decode_memory"] = ray.get([a.memory.remote() for a in actors])
    finally:
        ray.shutdown()


def connect(address: str) -> None:
    ray = _ray()

    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    if address == "local":
        ray.init(include_dashboard=False, **kwargs)
    else:
        ray.init(address=address, **kwargs)


def local_layout(opts: ClusterOptions, gpu: bool) -> tuple[ActorLayout, int, int]:
    """The actors' model layout, the decode streams per file and the batch size: what the
    local runner (`engine.asr.local_runner` for files, `batch_size_for`) picks on this machine
    for the device, so the waves, hence the text, are the same as a local run's."""
    from engine.asr import CPU_DECODE_SLICE, CPU_STREAMS
    from engine.asr.whisper_model import default_cpu_threads
    from engine.longform.pipeline import batch_size_for

    device = "cuda" if gpu and opts.device in ("auto", "cuda") else "cpu"
    streams = 1 if device == "cuda" else max(1, min(CPU_STREAMS, os.cpu_count() or 1))
    layout = ActorLayout(opts.model, device, opts.compute_type,
                         threads=default_cpu_threads(streams),
                         sequential_threads=default_cpu_threads(1),
                         decode_memory_mb=opts.decode_memory_mb,
                         max_batch=CPU_DECODE_SLICE if device == "cpu" else None)
    return layout, streams, batch_size_for(device, None)


def same_threads_env() -> dict[str, Any]:
    """Ray sets OMP_NUM_THREADS to a task's CPU share; faster-whisper's word alignment then
    places some word times differently (by up to 20 ms on the JFK clip, which moved a subtitle
    cue border). The workers get this machine's value, as a local run has it."""
    return {"env_vars": {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")
                         or str(os.cpu_count() or 1)}}


def default_actors(layout: ActorLayout, gpus: int) -> int:
    """One per GPU; on CPUs, one per ``layout.threads`` cores of the cluster."""
    ray = _ray()

    if layout.device == "cuda":
        return max(1, gpus)
    return max(1, int(ray.cluster_resources().get("CPU", 1)) // layout.threads)


def start_actors(layout: ActorLayout, count: int, gpu: bool) -> list[Any]:
    """``count`` decode actors spread over the nodes, each with its model loaded (raises
    EngineError when the model cannot load). They restart when their worker or node dies."""
    ray = _ray()
    from ray.exceptions import RayActorError

    resources = {"num_gpus": 1, "num_cpus": 1} if gpu else {"num_cpus": layout.threads}
    actor_class = ray.remote(DecodeActor).options(
        max_restarts=-1, max_task_retries=0, scheduling_strategy="SPREAD",
        runtime_env=same_threads_env(), **resources)
    actors = [actor_class.remote(layout) for _ in range(count)]
    try:
        ray.get([a.info.remote() for a in actors])
    except RayActorError as exc:
        raise EngineError(f"the decode actors could not start: {exc}") from exc
    return actors


def probe_all(paths: list[Path]) -> list[float | None]:
    """Durations from the containers' headers, in CPU tasks of up to 64 files."""
    ray = _ray()

    probe = ray.remote(_probe_many).options(num_cpus=0, max_retries=FILE_TASK_RETRIES)
    parts = [paths[i:i + 64] for i in range(0, len(paths), 64)]
    return [s for part in ray.get([probe.remote(p) for p in parts]) for s in part]


def _probe_many(paths: list[Path]) -> list[float | None]:
    return [probe_seconds(p) for p in paths]


def _file_options(opts: ClusterOptions, device: str) -> Any:
    """`app.commands.transcribe`'s file options for ``--engine``, as it builds them."""
    from engine.files import FileOptions

    base = FileOptions.coerce(opts.options)
    if opts.engine == "batched":
        return replace(base, sequential_below_s=0.0)
    if opts.engine == "sequential":
        return replace(base, sequential_below_s=float("inf"))
    return base  # auto: the pipeline's own threshold (2 min), the CLI's too


def _fan_out(order: list[tuple[ClusterInput, float | None]], job: FileJob, actors: list[Any],
             tally: Tally, summary: Path, extra: dict[str, Any], progress: bool) -> None:
    """Keep ``FILES_PER_ACTOR`` file tasks per actor in flight; write each output as its task
    returns; poll progress and rewrite the summary as it goes."""
    ray = _ray()
    from ray.exceptions import RayError
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()  # the board must outlive any worker node
    board = ray.remote(Board).options(num_cpus=0, max_restarts=-1, scheduling_strategy=(
        NodeAffinitySchedulingStrategy(here, soft=True))).remote()
    task = ray.remote(transcribe_one).options(num_cpus=0, max_retries=FILE_TASK_RETRIES,
                                              scheduling_strategy="SPREAD",
                                              runtime_env=same_threads_env())
    queue = deque(order)
    pending: dict[Any, tuple[ClusterInput, float | None]] = {}
    limit, submitted = max(2, FILES_PER_ACTOR * len(actors)), 0
    bar, polled = Bar(tally.total_s, progress), 0.0
    while queue or pending:
        while queue and len(pending) < limit:
            item, seconds = queue.popleft()
            ref = task.remote(str(item.path), job, actors, board, submitted * job.streams)
            pending[ref], submitted = (item, seconds), submitted + 1
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
        for ref in ready:
            item, seconds = pending.pop(ref)
            _collect(ref, item, seconds, tally)
        if time.monotonic() - polled > 1.0 or not pending:
            polled = time.monotonic()
            try:
                done, starts = ray.get(board.snapshot.remote(), timeout=10)
            except RayError:  # progress only: never worth failing the run for
                done, starts = {}, {}
            tally.partial_s = sum(done.get(i.key, 0.0) for i, _ in pending.values())
            extra["file_task_starts"] = max(extra.get("file_task_starts", 0),
                                            sum(starts.values()))
            bar.update(tally, len(queue) + len(pending))
            _write_summary(summary, tally.summary("running", extra))
    bar.close()


def _collect(ref: Any, item: ClusterInput, seconds: float | None, tally: Tally) -> None:
    ray = _ray()
    from ray.exceptions import RayError

    entry: dict[str, Any] = {"input": item.key}
    try:
        result = ray.get(ref)
    except RayError as exc:  # the task failed after its retries (a worker kept dying...)
        tally.failed(entry, f"task failed: {type(exc).__name__}: {exc}", seconds)
        return
    if result["status"] != "ok":
        tally.failed(entry, result["error"], seconds)
        return
    with ctrl_c_after_this():  # an output on disk is always one the summary lists
        try:
            item.output.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(item.output, result["text"])
        except (EngineError, OSError) as exc:
            tally.failed(entry, str(exc), seconds)
            return
        tally.finished_s += seconds if seconds is not None else result["seconds"]
        tally.done.append({**entry, "output": str(item.output),
                           "audio_s": round(result["seconds"], 2),
                           "language": result["language"], "decode_calls": result["calls"],
                           "failovers": result["failovers"]})


@contextlib.contextmanager
def ctrl_c_after_this() -> Iterator[None]:
    """Hold a Ctrl-C (SIGINT) that comes during the block until the block has ended, then
    deliver it as it would have been. Without this, a Ctrl-C between an output's rename and its
    entry in the tally left a file on disk that the "interrupted" summary did not count. Off the
    main thread (where Python cannot set handlers) the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            if callable(previous):
                previous(signal.SIGINT, None)  # default_int_handler: KeyboardInterrupt here
            elif previous == signal.SIG_DFL:
                signal.raise_signal(signal.SIGINT)


def _ray() -> Any:
    """The ray module, imported here only (untyped for mypy: its decorators make Any)."""
    import ray

    return ray


def _write_summary(path: Path, doc: dict[str, Any], strict: bool = False) -> None:
    """Write the summary; a failure is logged (``strict``: raised as EngineError, before any
    work)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(doc, indent=1) + "\n")
    except (EngineError, OSError) as exc:
        if strict:
            raise EngineError(f"cannot write the summary {path} ({exc}); nothing was "
                              "transcribed") from exc
        log.warning("could not write the summary %s: %s", path, exc)
