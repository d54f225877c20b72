"""Local ASR with faster-whisper (CTranslate2): GPU float16 when present, CPU int8 otherwise.

The only module (with `engine.asr.ct2_*`) that imports faster_whisper; it is imported lazily so a
thin-client install works without it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from engine.errors import EngineError, TranscriptionError, missing_dependency
from engine.models import DeviceChoice, ModelSpec, choose_device, resolve_model
from engine.types import (
    Audio,
    DecodeOptions,
    ModelInfo,
    Segment,
    Transcript,
    Word,
    seconds_to_samples,
)

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

log = logging.getLogger(__name__)


def default_cpu_threads(streams: int = 1) -> int:
    """CTranslate2 threads per replica: the cores shared out among ``streams`` replicas."""
    return max(1, (os.cpu_count() or 1) // max(1, streams))


class FasterWhisperTranscriber:
    """`Transcriber` over ``faster_whisper.WhisperModel``.

    ``model`` (the WhisperModel) is exposed after `load()` so the fast chunk decoder and the
    batched long-form pipeline can share the same CTranslate2 weights instead of loading twice.

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
        self._streams = streams
        # (replicas, CTranslate2 threads each): as asked until load() resolves it (0: default).
        self.layout = (streams, cpu_threads)
        self._model: WhisperModel | None = None
        self._spec: ModelSpec | None = None
        self._device: DeviceChoice | None = None
        self.load_seconds = 0.0

    @property
    def info(self) -> ModelInfo:
        spec = self._spec or (self._model_arg if isinstance(self._model_arg, ModelSpec) else None)
        name = spec.name if spec else str(self._model_arg or "tiny.en")
        device = self._device or DeviceChoice(self._device_arg, self._compute_arg, "not loaded")
        return ModelInfo(name=name, device=device.device, compute_type=device.compute_type,
                         multilingual=not name.endswith(".en"))

    @property
    def model(self) -> WhisperModel:
        if self._model is None:
            raise EngineError("model not loaded: call load() first")
        return self._model

    def load(self) -> None:
        if self._model is not None:
            return
        try:
            from faster_whisper import WhisperModel
        except ImportError as exc:
            raise missing_dependency("faster-whisper", "local") from exc
        started = time.perf_counter()
        spec = self._model_arg if isinstance(self._model_arg, ModelSpec) else resolve_model(
            self._model_arg)
        device = choose_device(self._device_arg, self._compute_arg)
        streams = self._streams if device.device == "cpu" else 1
        threads = self._cpu_threads or default_cpu_threads(streams)
        try:
            self._model = WhisperModel(
                spec.load_arg, device=device.device, compute_type=device.compute_type,
                cpu_threads=threads, num_workers=streams,
                local_files_only=spec.path is not None,
            )
        except (RuntimeError, ValueError, OSError) as exc:
            raise EngineError(f"could not load model {spec.name} on {device.device}: {exc}") from exc
        self._spec, self._device = spec, device
        self.layout = (streams, threads)
        self.load_seconds = time.perf_counter() - started
        log.info("loaded %s on %s/%s in %.2f s (%d stream(s) x %d thread(s))", spec.name,
                 device.device, device.compute_type, self.load_seconds, streams, threads)

    def transcribe(self, audio: Audio, options: DecodeOptions) -> Transcript:
        """Decode with faster-whisper's own loop (30 s windows, temperature fallback)."""
        started = time.perf_counter()
        segments, language = self.iter_segments(audio, options)
        decoded = tuple(segments)
        return Transcript(
            segments=decoded, language=language, duration=len(audio),
            decode_ms=(time.perf_counter() - started) * 1000,
        )

    def iter_segments(
        self, audio: Audio, options: DecodeOptions,
    ) -> tuple[Iterator[Segment], str | None]:
        """Segments one at a time as faster-whisper decodes them (so progress can move), and
        the language. Decoding happens while the iterator is consumed."""
        model = self.model
        language = options.language if self.info.multilingual else "en"
        try:
            raw_segments, info = model.transcribe(
                audio, language=language, task=options.task, beam_size=options.beam_size,
                temperature=list(options.temperatures), initial_prompt=options.prompt or None,
                word_timestamps=options.word_timestamps, condition_on_previous_text=True,
                vad_filter=False,
            )
        except (RuntimeError, ValueError) as exc:
            raise TranscriptionError(f"decode failed: {exc}") from exc

        def converted() -> Iterator[Segment]:
            try:
                for raw in raw_segments:
                    yield _convert_segment(raw)
            except (RuntimeError, ValueError) as exc:
                raise TranscriptionError(f"decode failed: {exc}") from exc

        return converted(), info.language


def _convert_segment(seg: Any) -> Segment:
    words = tuple(
        Word(text=w.word, start=seconds_to_samples(w.start), end=seconds_to_samples(w.end),
             probability=float(w.probability))
        for w in (seg.words or ())
    )
    return Segment(
        text=seg.text, start=seconds_to_samples(seg.start), end=seconds_to_samples(seg.end),
        words=words, avg_logprob=float(seg.avg_logprob), no_speech_prob=float(seg.no_speech_prob),
        compression_ratio=float(seg.compression_ratio), temperature=float(seg.temperature or 0.0),
    )
