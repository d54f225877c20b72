"""`TensorRTLLMRunner`: NVIDIA's TensorRT-LLM Whisper engines behind the `engine.types.Runner`
interface, for GPU servers (``sottovoce serve`` can take it in place of the default
`engine.asr.ct2_decoder.Ct2Runner`).

It needs the ``tensorrt_llm`` package and a Whisper engine directory built with TensorRT-LLM's
``examples/whisper`` build scripts; without them `load()` raises a clear `DependencyMissingError`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import DependencyMissingError, EngineError, TranscriptionError
from engine.types import DecodeRequest, ModelInfo, Segment, Transcript

log = logging.getLogger(__name__)


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

    @property
    def streams(self) -> int:
        """One call at a time: TensorRT-LLM batches in flight inside that call."""
        return 1

    @property
    def device(self) -> str:
        return "cuda"

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
        hotwords, previous_text = request.options.hotwords, request.options.prompt
        if (hotwords and hotwords.strip()) or (previous_text and previous_text.strip()):
            # The vocabulary first, then the previous text's tail (as engine.asr.ct2_passes).
            hot = (self._tokenizer.encode(" " + hotwords.strip())[:448 // 2 - 1]
                   if hotwords and hotwords.strip() else [])
            room = 448 // 2 - 1 - len(hot)
            previous = (self._tokenizer.encode(" " + previous_text.strip())[-room:]
                        if previous_text and previous_text.strip() and room > 0 else [])
            prompt = [self._tokenizer.sot_prev, *hot, *previous]
        sequence: list[int] = list(self._tokenizer.sot_sequence)
        return [*prompt, *sequence, self._tokenizer.no_timestamps]
