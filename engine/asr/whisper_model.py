"""faster-whisper's ``WhisperModel`` (CTranslate2), resolved and loaded on demand, shared by the
runners built over it: GPU float16 when present, CPU int8 otherwise.

Not a runner itself: `engine.asr.ct2_decoder.Ct2Runner` (short-context chunk batches) and
`engine.asr.sequential.SequentialRunner` (faster-whisper's own 30 s loop) each decode with one,
and both may share the same `FasterWhisperModel` (same weights, loaded once). faster_whisper is
imported lazily so a thin-client install works without it.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING

from engine.asr.budget import MB
from engine.errors import EngineError, missing_dependency
from engine.models import DeviceChoice, ModelSpec, choose_device, resolve_model
from engine.native_memory import limit_native_caches, resident_bytes
from engine.types import ModelInfo

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

log = logging.getLogger(__name__)


def default_cpu_threads(streams: int = 1) -> int:
    """CTranslate2 threads per replica: the cores shared out among ``streams`` replicas."""
    return max(1, (os.cpu_count() or 1) // max(1, streams))


class FasterWhisperModel:
    """One ``faster_whisper.WhisperModel``, loaded by `load()` (explicit and idempotent).

    ``streams``: how many decode calls may run at the same time on the CPU. CTranslate2 keeps
    that many replicas of the model (sharing one copy of the weights: same RSS) and splits the
    cores between them (``cpu_threads`` each, by default cores // streams). The long-form
    pipeline keeps every replica busy with a batch of its own (`engine.longform`); one call
    alone runs on one replica. On CUDA there is always one replica.
    """

    def __init__(
        self,
        model: str | ModelSpec | None = None,
        *,
        device: str = "auto",
        compute_type: str = "auto",
        cpu_threads: int = 0,
        streams: int = 1,
    ) -> None:
        if streams < 1 or cpu_threads < 0:
            raise ValueError("streams must be >= 1 and cpu_threads >= 0")
        self._model_arg = model
        self._device_arg = device
        self._compute_arg = compute_type
        self._cpu_threads = cpu_threads
        # (replicas, CTranslate2 threads each): as asked until load() resolves it (0: default).
        self.layout = (streams, cpu_threads)
        self._whisper: WhisperModel | None = None
        self._spec: ModelSpec | None = None
        self._device: DeviceChoice | None = None
        self.load_seconds = 0.0
        self.loaded_rss: int | None = None  # resident bytes once loaded (engine.asr.budget)

    @property
    def info(self) -> ModelInfo:
        spec = self._spec or (self._model_arg if isinstance(self._model_arg, ModelSpec) else None)
        name = spec.name if spec else str(self._model_arg or "tiny.en")
        device = self._device or DeviceChoice(self._device_arg, self._compute_arg, "not loaded")
        languages = tuple(self._whisper.supported_languages) if self._whisper else ()
        return ModelInfo(name=name, device=device.device, compute_type=device.compute_type,
                         multilingual=not name.endswith(".en"), languages=languages)

    @property
    def loaded(self) -> bool:
        return self._whisper is not None

    @property
    def whisper(self) -> WhisperModel:
        """The loaded ``faster_whisper.WhisperModel`` (EngineError before `load()`)."""
        if self._whisper is None:
            raise EngineError("model not loaded: call load() first")
        return self._whisper

    @property
    def streams(self) -> int:
        """Model replicas: as asked until loaded (then 1 on CUDA)."""
        return self.layout[0]

    @property
    def device(self) -> str:
        """"cuda" or "cpu": where the model runs, or will run once loaded."""
        if self._device is not None:
            return self._device.device
        if self._device_arg in ("cpu", "cuda"):
            return self._device_arg
        try:
            return choose_device(self._device_arg, self._compute_arg).device
        except EngineError:
            return "cpu"  # the error comes back, with its message, when the model loads

    def load(self) -> None:
        if self._whisper is not None:
            return
        limit_native_caches()  # before CTranslate2's oneDNN makes its first primitive
        try:
            from faster_whisper import WhisperModel
        except ImportError as exc:
            raise missing_dependency("faster-whisper", "local") from exc
        started = time.perf_counter()
        spec = self._model_arg if isinstance(self._model_arg, ModelSpec) else resolve_model(
            self._model_arg)
        device = choose_device(self._device_arg, self._compute_arg)
        streams = self.layout[0] if device.device == "cpu" else 1
        threads = self._cpu_threads or default_cpu_threads(streams)
        try:
            self._whisper = WhisperModel(
                spec.load_arg, device=device.device, compute_type=device.compute_type,
                cpu_threads=threads, num_workers=streams,
                local_files_only=spec.path is not None,
            )
        except (RuntimeError, ValueError, OSError) as exc:
            raise EngineError(f"could not load model {spec.name} on {device.device}: {exc}") from exc
        self._spec, self._device = spec, device
        self.layout = (streams, threads)
        self.load_seconds = time.perf_counter() - started
        self.loaded_rss = resident_bytes()
        log.info("loaded %s on %s/%s in %.2f s (%d stream(s) x %d thread(s)); resident %.0f MB "
                 "with the model loaded", spec.name, device.device, device.compute_type,
                 self.load_seconds, streams, threads, (self.loaded_rss or 0) / MB)


class ModelRunner:
    """What every runner over a `FasterWhisperModel` shares: the model (``model``: a name,
    directory or `ModelSpec`, loaded by `load()` with the other arguments; or an existing
    `FasterWhisperModel` whose weights and layout are shared, the other arguments then ignored)
    and the `engine.types.Runner` protocol's ``info``, ``streams``, ``device`` and `load()`.
    Subclasses add ``decode_batch``."""

    def __init__(self, model: str | ModelSpec | FasterWhisperModel | None = None, *,
                 device: str = "auto", compute_type: str = "auto", cpu_threads: int = 0,
                 streams: int = 1) -> None:
        self.model = model if isinstance(model, FasterWhisperModel) else FasterWhisperModel(
            model, device=device, compute_type=compute_type, cpu_threads=cpu_threads,
            streams=streams)

    @property
    def info(self) -> ModelInfo:
        return self.model.info

    @property
    def device(self) -> str:
        """"cuda" or "cpu": where the CTranslate2 model runs (choose batch sizes from it)."""
        return self.model.device

    @property
    def streams(self) -> int:
        """How many ``decode_batch`` calls can run at the same time: the model's replicas."""
        return self.model.streams

    def load(self) -> None:
        self.model.load()
