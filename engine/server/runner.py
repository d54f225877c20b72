"""Runners: what the server's scheduler calls to decode one batch of requests.

The interface is one method, ``decode_batch(requests) -> list[Transcript]`` (results in request
order), so the inference backend can change without touching sessions or the scheduler:

- `Ct2Runner` (default): the CTranslate2 Whisper model inside faster-whisper, one batched encode
  and one batched generate per batch with per-item prompts (`engine.asr.ct2_decoder`). CPU int8
  or CUDA float16.
- `TensorRTLLMRunner`: NVIDIA's TensorRT-LLM Whisper engines for GPU servers. It needs the
  ``tensorrt_llm`` package and a Whisper engine directory built with TensorRT-LLM's
  ``examples/whisper`` build scripts; without them `load()` raises a clear error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from engine.errors import DependencyMissingError, EngineError, TranscriptionError
from engine.types import SAMPLE_RATE, DecodeRequest, ModelInfo, Segment, Transcript

log = logging.getLogger(__name__)

__all__ = ["Runner", "Ct2Runner", "TensorRTLLMRunner", "DecodeRequest"]


class Runner(Protocol):
    """Decodes a batch of requests on one thread; `load()` is explicit."""

    @property
    def info(self) -> ModelInfo: ...

    def load(self) -> None: ...

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]: ...


class Ct2Runner:
    """`Runner` over a faster-whisper model: loads it, then batches with `Ct2WhisperRunner`."""

    def __init__(self, model: str | None = None, *, device: str = "auto",
                 compute_type: str = "auto", cpu_threads: int = 0) -> None:
        from engine.asr.faster_whisper_backend import FasterWhisperTranscriber

        self._backend = FasterWhisperTranscriber(model, device=device, compute_type=compute_type,
                                                 cpu_threads=cpu_threads)
        self._batcher: Any = None

    @classmethod
    def from_loaded(cls, backend: Any) -> Ct2Runner:
        """Share an already loaded `FasterWhisperTranscriber` (tests, the desktop app).

        On a CPU the decoder encodes a batch's items one by one and batches only the decoder
        steps (`engine.asr.ct2_passes.EncodedBatch` says why), so nothing here needs tuning."""
        runner = cls.__new__(cls)
        runner._backend = backend
        runner._batcher = None
        return runner

    @property
    def info(self) -> ModelInfo:
        info: ModelInfo = self._backend.info
        return info

    def load(self) -> None:
        from engine.asr.ct2_decoder import Ct2WhisperRunner

        self._backend.load()
        self._batcher = Ct2WhisperRunner(self._backend.model)

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        if self._batcher is None:
            raise EngineError("runner not loaded: call load() first")
        results: list[Transcript] = self._batcher.decode_batch(requests)
        return results


class TensorRTLLMRunner:
    """`Runner` over a TensorRT-LLM Whisper engine (NVIDIA GPUs only).

    ``engine_dir`` holds the ``encoder`` and ``decoder`` engines built by TensorRT-LLM's
    ``examples/whisper/convert_checkpoint.py`` + ``trtllm-build``. Decoding uses
    ``tensorrt_llm.runtime.ModelRunnerCpp`` (in-flight batching inside TensorRT-LLM): features are
    computed with the same log-mel front end as CTranslate2 and every request of a batch becomes
    one row with its own prompt. This path cannot run on a machine without the package and a GPU;
    it is kept here, whole, so a GPU server only needs those two things.
    """

    def __init__(self, engine_dir: str | Path, *, tokenizer_model: str = "tiny.en",
                 max_new_tokens: int = 96) -> None:
        self._engine_dir = Path(engine_dir)
        self._tokenizer_model = tokenizer_model
        self._max_new_tokens = max_new_tokens
        self._runner: Any = None
        self._tokenizer: Any = None
        self._features: Any = None

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(name=self._engine_dir.name, device="cuda", compute_type="tensorrt",
                         multilingual=not self._tokenizer_model.endswith(".en"))

    def load(self) -> None:
        try:
            import tensorrt_llm  # noqa: F401 - presence check before the heavier imports
            from tensorrt_llm.runtime import ModelRunnerCpp
        except ImportError as exc:
            raise DependencyMissingError(
                "the TensorRT-LLM runner needs the 'tensorrt_llm' package and an NVIDIA GPU "
                "(pip install tensorrt_llm, then build a Whisper engine with TensorRT-LLM's "
                "examples/whisper); use the default CTranslate2 runner otherwise") from exc
        if not (self._engine_dir / "encoder").is_dir() or not (self._engine_dir / "decoder").is_dir():
            raise EngineError(f"{self._engine_dir} holds no encoder/ and decoder/ TensorRT engines")
        from faster_whisper.feature_extractor import FeatureExtractor
        from faster_whisper.tokenizer import Tokenizer
        from tokenizers import Tokenizer as HfTokenizer

        from engine.models import resolve_model

        spec = resolve_model(self._tokenizer_model)
        hf = HfTokenizer.from_file(str(Path(spec.load_arg) / "tokenizer.json"))
        self._tokenizer = Tokenizer(hf, multilingual=self.info.multilingual, task="transcribe",
                                    language="en")
        self._features = FeatureExtractor()
        self._runner = ModelRunnerCpp.from_dir(engine_dir=str(self._engine_dir),
                                               is_enc_dec=True, max_batch_size=32,
                                               max_input_len=3000, max_output_len=448)
        log.info("TensorRT-LLM Whisper engine loaded from %s", self._engine_dir)

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        if self._runner is None:
            raise EngineError("runner not loaded: call load() first")
        import torch

        started = time.perf_counter()
        mels = [self._features(r.audio)[:, :3000] for r in requests]
        mels = [np.pad(m, ((0, 0), (0, 3000 - m.shape[1]))) for m in mels]
        features = torch.tensor(np.stack(mels), dtype=torch.float16, device="cuda")
        prompts = [self._prompt_ids(r) for r in requests]
        try:
            outputs = self._runner.generate(
                batch_input_ids=[torch.tensor(p, dtype=torch.int32) for p in prompts],
                encoder_input_features=[f.transpose(0, 1) for f in features],
                encoder_output_lengths=[1500] * len(requests),
                max_new_tokens=self._max_new_tokens, end_id=self._tokenizer.eot,
                pad_id=self._tokenizer.eot, num_beams=1, return_dict=True)
        except RuntimeError as exc:
            raise TranscriptionError(f"TensorRT-LLM decode failed: {exc}") from exc
        decode_ms = (time.perf_counter() - started) * 1000
        results = []
        for request, prompt, ids in zip(requests, prompts, outputs["output_ids"], strict=True):
            tokens = [t for t in ids[0].tolist()[len(prompt):] if t < self._tokenizer.eot]
            text = self._tokenizer.decode(tokens)
            duration = len(request.audio)
            segments = (Segment(text=text, start=0, end=duration),) if text.strip() else ()
            results.append(Transcript(segments=segments, language=request.options.language,
                                      duration=duration, decode_ms=decode_ms))
        return results

    def _prompt_ids(self, request: DecodeRequest) -> list[int]:
        prompt: list[int] = []
        if request.options.prompt:
            previous = self._tokenizer.encode(" " + request.options.prompt.strip())
            prompt = [self._tokenizer.sot_prev, *previous[-(448 // 2 - 1):]]
        sequence: list[int] = list(self._tokenizer.sot_sequence)
        return [*prompt, *sequence, self._tokenizer.no_timestamps]


def audio_seconds(requests: Sequence[DecodeRequest]) -> float:
    return sum(len(r.audio) for r in requests) / SAMPLE_RATE
