"""Streaming Silero VAD v6 on onnxruntime (the only module importing onnxruntime; no torch).

The ONNX model (the one faster-whisper ships) takes a batch of 576-sample rows = 64 samples of
context (the tail of the previous window) + a 512-sample window, plus the LSTM state ``h``/``c``
(1, 1, 128); the rows of one call are processed in order as a sequence, so several windows can
be scored in one call with the state carried. It returns one speech probability per row.

`SileroVad` keeps the state, the context and any remainder shorter than a window between
calls, so it can be fed blocks of any length as they come from the microphone.

Silero's state drifts towards the voice it has been hearing: a new speaker after a minute of
another scores far lower than the same audio heard fresh (snakers4/silero-vad#725; the shared
"cold" recording after a minute of the LJ reading: 83 % WER through the live engine, 13 % on
its own). Yet the same adaptation helps within one speaker: on the cold recording alone, a
state restarted every few seconds scored fewer of its windows as speech (53 against 62 %) and
the live engine lost 11 more words on it. So two states score every window and the higher
probability is taken: the continuous one, and a *fresh* one that every `REFRESH_S` of audio is
rebuilt as if the stream had started at the quietest window of the second half of that span,
where a pause or a new voice starts (the windows since then are scored again from a zero
state; their new scores only build the state). The long-form pipeline, which sees whole files,
scores pieces cut the same way with fresh states only (`engine.longform.chunking`).
"""

from __future__ import annotations

import logging
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.errors import EngineError, missing_dependency
from engine.types import SAMPLE_RATE, Audio

log = logging.getLogger(__name__)

WINDOW = 512
CONTEXT = 64
MODEL_NAME = "silero_vad_v6.onnx"
REFRESH_S = 8.0  # the state is rebuilt at least this often (module notes); 0 turns it off


def window_levels_db(windows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The level (mean power, dB full scale; -100 for digital silence) of each row of
    ``windows``: where `SileroVad` and the long-form VAD look for the quietest window."""
    power = np.mean(np.square(windows, dtype=np.float64), axis=1)
    return np.asarray(10 * np.log10(power + 1e-10), dtype=np.float32)


def default_model_path() -> Path:
    from resources import resource_path

    return resource_path(MODEL_NAME)


class SileroVad:
    """Stateful streaming VAD. Call `load()` once, then `feed()` blocks in order.

    ``refresh_s``: how often the fresh state is rebuilt from the last pause (module notes;
    0: one continuous state only).
    """

    def __init__(self, model_path: str | Path | None = None, *,
                 refresh_s: float = REFRESH_S) -> None:
        if refresh_s < 0:
            raise ValueError("refresh_s must not be negative")
        self._model_path = model_path
        self._session: Any = None
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._fresh = (np.zeros_like(self._h), np.zeros_like(self._c))  # the refreshed state
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)
        self._refresh = int(refresh_s * SAMPLE_RATE) // WINDOW
        # The model's input rows and levels (dB) since the fresh state last started from zero.
        self._rows: deque[npt.NDArray[np.float32]] = deque()
        self._levels: deque[float] = deque()

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
        self._fresh = (np.zeros_like(self._h), np.zeros_like(self._c))
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)
        self._rows.clear()
        self._levels.clear()

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
        probs: list[float] = []
        done = 0
        while done < count:  # in runs that end where the fresh state is due to be rebuilt
            room = self._refresh - len(self._rows) if self._refresh else count
            take = max(1, min(count - done, room))
            probs.extend(self._run(windows[done:done + take]).tolist())
            done += take
            if self._refresh and len(self._rows) >= self._refresh:
                self._restart_at_quietest()
        return [(windows[i], float(probs[i])) for i in range(count)]

    def score(self, windows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """`engine.types.SpeechScorer`: one probability per (n, WINDOW) row, state carried."""
        if self._session is None:
            self.load()
        flat = np.asarray(windows, dtype=np.float32).reshape(-1)
        return np.asarray([p for _, p in self.feed(flat)], dtype=np.float32)

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
        probs = np.asarray(out, dtype=np.float32).reshape(-1)
        if not self._refresh:
            return probs
        fresh, h, c = self._session.run(
            None, {"input": rows, "h": self._fresh[0], "c": self._fresh[1]})
        self._fresh = (h, c)
        self._rows.extend(rows)
        self._levels.extend(window_levels_db(windows).tolist())
        return np.maximum(probs, np.asarray(fresh, dtype=np.float32).reshape(-1))

    def _restart_at_quietest(self) -> None:
        """Rebuild the fresh state as if the stream had started at the quietest window of the
        second half of the rows kept, and keep only the rows from there on."""
        half = len(self._levels) // 2
        quietest = half + int(np.argmin(list(self._levels)[half:]))
        for _ in range(quietest):
            self._rows.popleft()
            self._levels.popleft()
        zeros = np.zeros_like(self._h)
        _, h, c = self._session.run(
            None, {"input": np.stack(self._rows), "h": zeros, "c": zeros.copy()})
        self._fresh = (h, c)


def default_scorer() -> SileroVad | EnergyScorer:
    """Silero (loaded) when onnxruntime and the model are there; the energy detector otherwise."""
    try:
        vad = SileroVad()
        vad.load()
        return vad
    except EngineError as exc:
        log.warning("Silero VAD unavailable (%s); using the energy detector", exc)
        return EnergyScorer()


class EnergyScorer:
    """Speech probability from loudness alone: -50 dBFS and below is 0, -35 dBFS and above 1.
    The fallback when Silero is not available (close-talking microphones, clean recordings)."""

    def __init__(self, floor_db: float = -50.0, full_db: float = -35.0) -> None:
        self._floor = floor_db
        self._span = full_db - floor_db

    def score(self, windows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        levels = window_levels_db(np.asarray(windows, dtype=np.float32))
        return np.asarray(np.clip((levels - self._floor) / self._span, 0.0, 1.0), dtype=np.float32)

    def reset(self) -> None:
        """Stateless."""
