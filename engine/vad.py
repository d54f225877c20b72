"""Streaming Silero VAD v6 on onnxruntime (the only module importing onnxruntime; no torch).

The ONNX model (the one faster-whisper ships) takes a batch of 576-sample rows = 64 samples of
context (the tail of the previous window) + a 512-sample window, plus the LSTM state ``h``/``c``
(1, 1, 128); the rows of one call are processed in order as a sequence, so several windows can
be scored in one call with the state carried. It returns one speech probability per row.

`SileroVad` keeps the state, the context and any remainder shorter than a window between
calls, so it can be fed blocks of any length as they come from the microphone.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.asr.base import Audio
from engine.errors import EngineError, missing_dependency

log = logging.getLogger(__name__)

WINDOW = 512
CONTEXT = 64
MODEL_NAME = "silero_vad_v6.onnx"


def default_model_path() -> Path:
    from resources import resource_path

    return resource_path(MODEL_NAME)


class SileroVad:
    """Stateful streaming VAD. Call `load()` once, then `feed()` blocks in order."""

    def __init__(self, model_path: str | Path | None = None) -> None:
        self._model_path = model_path
        self._session: Any = None
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)

    def load(self) -> None:
        if self._session is not None:
            return
        try:
            import onnxruntime
        except ImportError as exc:
            raise missing_dependency("onnxruntime", "client") from exc
        path = Path(self._model_path) if self._model_path else default_model_path()
        opts = onnxruntime.SessionOptions()
        # One thread: a window costs well under a millisecond, and the cores belong to Whisper.
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 3
        try:
            self._session = onnxruntime.InferenceSession(
                str(path), providers=["CPUExecutionProvider"], sess_options=opts)
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own untyped errors
            raise EngineError(f"could not load the VAD model {path}: {exc}") from exc
        log.debug("loaded Silero VAD from %s", path)

    def reset(self) -> None:
        """Forget the state (a new, unrelated stream)."""
        self._h = np.zeros_like(self._h)
        self._c = np.zeros_like(self._c)
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)

    def feed(self, audio: Audio) -> list[tuple[Audio, float]]:
        """Append 16 kHz audio; return each newly complete window with its speech probability."""
        if self._session is None:
            raise EngineError("VAD not loaded: call load() first")
        data = np.concatenate([self._pending, np.asarray(audio, dtype=np.float32)])
        count = len(data) // WINDOW
        self._pending = data[count * WINDOW:]
        if count == 0:
            return []
        windows = data[:count * WINDOW].reshape(count, WINDOW)
        probs = self._run(windows)
        return [(windows[i], float(probs[i])) for i in range(count)]

    def probabilities(self, audio: Audio) -> npt.NDArray[np.float32]:
        """Speech probability per whole window of ``audio`` (state carried; tail dropped)."""
        return np.asarray([p for _, p in self.feed(audio)], dtype=np.float32)

    def _run(self, windows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        # Each row gets the last CONTEXT samples of the window before it.
        previous = np.concatenate([self._context[None, :], windows[:-1, -CONTEXT:]], axis=0)
        rows = np.ascontiguousarray(np.concatenate([previous, windows], axis=1))
        out, self._h, self._c = self._session.run(
            None, {"input": rows, "h": self._h, "c": self._c})
        self._context = windows[-1, -CONTEXT:].copy()
        return np.asarray(out, dtype=np.float32).reshape(-1)
