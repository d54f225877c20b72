"""Silero VAD v6 on onnxruntime (the only module importing onnxruntime; no torch): one loader,
the streaming scorer the live paths use, the piecewise scorer long-form uses, and the factory
that falls back to the energy detector.

The ONNX model (`resources/silero_vad_v6.onnx`, byte for byte the file faster-whisper ships)
takes a batch of 576-sample rows = 64 samples of context (the tail of the previous window) + a
512-sample window, plus the LSTM state ``h``/``c`` (1, 1, 128); the rows of one call are
processed in order as a sequence, so several windows can be scored in one call with the state
carried. It returns one speech probability per row. One session per model file serves every
scorer of the process (`load_model`): onnxruntime's ``run`` is thread-safe, and the state lives
in the callers.

Silero's state drifts towards the voice it has been hearing: a new speaker after a minute of
another scores far lower than the same audio heard fresh (snakers4/silero-vad#725: the shared
"cold" recording after a minute of the LJ reading lost most of its words through the live
engine). Yet the same adaptation helps within one speaker: on the cold recording alone, a
state restarted every few seconds scored fewer of its windows as speech and the live engine
lost words on it (figures: docs/evidence.md). So the streaming `SileroVad` scores every window with
two states and takes the higher probability: the continuous one, and a *fresh* one that every
`REFRESH_S` of audio is rebuilt as if the stream had started at the quietest window of the
second half of that span, where a pause or a new voice starts (the windows since then are
scored again from a zero state; their new scores only build the state). Long-form, which sees
whole files, scores pieces cut the same way with fresh states only (`piecewise_probabilities`;
the numbers behind that are in docs/evidence.md).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.core.voice import EnergyVad, quietest, split_at_quiet, window_levels_db
from engine.errors import EngineError, missing_dependency
from engine.types import SAMPLE_RATE, VAD_WINDOW, Audio, SpeechScorer

log = logging.getLogger(__name__)

CONTEXT = 64  # samples of the previous window in front of each row
MODEL_NAME = "silero_vad_v6.onnx"
REFRESH_S = 8.0  # the live fresh state is rebuilt at least this often (module notes); 0: off
VAD_PIECE_S = 8.0  # long-form: each piece scored from a fresh state is at most this long

Probabilities = npt.NDArray[np.float32]
State = tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]  # the LSTM's h and c


def default_model_path() -> Path:
    from resources import resource_path

    return resource_path(MODEL_NAME)


def zero_state() -> State:
    return np.zeros((1, 1, 128), dtype=np.float32), np.zeros((1, 1, 128), dtype=np.float32)


def model_rows(windows: npt.NDArray[np.float32], context: Audio) -> npt.NDArray[np.float32]:
    """The model's input for ``windows`` (n, 512): each row is the last `CONTEXT` samples of the
    window before it (``context`` for the first) followed by the window."""
    previous = np.concatenate([context[None, :], windows[:-1, -CONTEXT:]], axis=0)
    return np.ascontiguousarray(np.concatenate([previous, windows], axis=1), dtype=np.float32)


class SileroModel:
    """One onnxruntime session over the Silero ONNX file (stateless: callers keep the state)."""

    def __init__(self, path: Path) -> None:
        try:
            import onnxruntime
        except ImportError as exc:
            raise missing_dependency("onnxruntime", "client") from exc
        opts = onnxruntime.SessionOptions()
        # One thread: a window costs well under a millisecond, and the cores belong to Whisper.
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 3
        try:
            self._session: Any = onnxruntime.InferenceSession(
                str(path), providers=["CPUExecutionProvider"], sess_options=opts)
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own untyped errors
            raise EngineError(f"could not load the VAD model {path}: {exc}") from exc
        self.path = path
        log.debug("loaded Silero VAD from %s", path)

    def run(self, rows: npt.NDArray[np.float32], state: State) -> tuple[Probabilities, State]:
        """Score ``rows`` (`model_rows`) in order from ``state``; the state after the last."""
        out, h, c = self._session.run(None, {"input": rows, "h": state[0], "c": state[1]})
        return np.asarray(out, dtype=np.float32).reshape(-1), (h, c)

    def score_fresh(self, windows: npt.NDArray[np.float32]) -> Probabilities:
        """``windows`` as a stream of their own: zero state, zero context."""
        if len(windows) == 0:
            return np.zeros(0, dtype=np.float32)
        rows = model_rows(windows, np.zeros(CONTEXT, dtype=np.float32))
        return self.run(rows, zero_state())[0]


_models: dict[Path, SileroModel] = {}
_models_lock = threading.Lock()


def load_model(path: str | Path | None = None) -> SileroModel:
    """The process's one session over ``path`` (default: the bundled model), loaded once."""
    resolved = Path(path) if path else default_model_path()
    with _models_lock:
        model = _models.get(resolved)
        if model is None:
            model = _models[resolved] = SileroModel(resolved)
        return model


class SileroVad:
    """Streaming Silero, a `SpeechScorer`: call `load()` once, then `score()` windows in order.

    ``refresh_s``: how often the fresh state is rebuilt from the last pause (module notes;
    0: one continuous state only).
    """

    def __init__(self, model_path: str | Path | None = None, *,
                 refresh_s: float = REFRESH_S) -> None:
        if refresh_s < 0:
            raise ValueError("refresh_s must not be negative")
        self._model_path = model_path
        self._model: SileroModel | None = None
        self._refresh = int(refresh_s * SAMPLE_RATE) // VAD_WINDOW
        self._state = zero_state()
        self._fresh = zero_state()  # the refreshed state
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        # The model's input rows and levels (dB) since the fresh state last started from zero.
        self._rows: deque[npt.NDArray[np.float32]] = deque()
        self._levels: deque[float] = deque()

    def load(self) -> None:
        if self._model is None:
            self._model = load_model(self._model_path)

    def reset(self) -> None:
        """Forget the state (a new, unrelated stream)."""
        self._state = zero_state()
        self._fresh = zero_state()
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._rows.clear()
        self._levels.clear()

    def score(self, windows: npt.NDArray[np.float32]) -> Probabilities:
        """Speech probability of each row of ``windows`` (n, `VAD_WINDOW`), the stream's next."""
        if self._model is None:
            raise EngineError("VAD not loaded: call load() first")
        windows = np.asarray(windows, dtype=np.float32)
        if windows.ndim != 2 or windows.shape[1] != VAD_WINDOW:
            raise ValueError(f"windows must be (n, {VAD_WINDOW}), got {windows.shape}")
        probs: list[Probabilities] = [np.zeros(0, dtype=np.float32)]
        done, count = 0, len(windows)
        while done < count:  # in runs that end where the fresh state is due to be rebuilt
            room = self._refresh - len(self._rows) if self._refresh else count
            take = max(1, min(count - done, room))
            probs.append(self._run(self._model, windows[done:done + take]))
            done += take
            if self._refresh and len(self._rows) >= self._refresh:
                self._restart_at_quietest(self._model)
        return np.concatenate(probs)

    def probabilities(self, audio: Audio) -> Probabilities:
        """`score` over the whole windows of ``audio`` (the tail shorter than one is dropped)."""
        count = len(audio) // VAD_WINDOW
        return self.score(np.asarray(audio[:count * VAD_WINDOW]).reshape(count, VAD_WINDOW))

    def _run(self, model: SileroModel, windows: npt.NDArray[np.float32]) -> Probabilities:
        rows = model_rows(windows, self._context)
        probs, self._state = model.run(rows, self._state)
        self._context = windows[-1, -CONTEXT:].copy()
        if not self._refresh:
            return probs
        fresh, self._fresh = model.run(rows, self._fresh)
        self._rows.extend(rows)
        self._levels.extend(window_levels_db(windows).tolist())
        return np.maximum(probs, fresh)

    def _restart_at_quietest(self, model: SileroModel) -> None:
        """Rebuild the fresh state as if the stream had started at the quietest window of the
        second half of the rows kept, and keep only the rows from there on."""
        start = quietest(list(self._levels), len(self._levels) // 2, len(self._levels))
        for _ in range(start):
            self._rows.popleft()
            self._levels.popleft()
        _, self._fresh = model.run(np.stack(self._rows), zero_state())


def load_scorer(model_path: str | Path | None = None, *,
                refresh_s: float = REFRESH_S) -> SileroVad:
    """A new streaming Silero scorer (its own state, the shared session), loaded."""
    scorer = SileroVad(model_path, refresh_s=refresh_s)
    scorer.load()
    return scorer


def default_scorer() -> SpeechScorer:
    """A new scorer for one stream: Silero when onnxruntime and the model are there, the
    energy detector (`engine.core.voice.EnergyVad`) otherwise, with a warning."""
    try:
        return load_scorer()
    except Exception as exc:  # noqa: BLE001 - any failure to load falls back, loudly
        log.warning("Silero VAD unavailable (%s); using the energy detector", exc)
        return EnergyVad()


def vad_pieces(padded: Audio) -> list[tuple[int, int]]:
    """Sample spans (whole windows, covering ``padded``) of at most `VAD_PIECE_S`, each cut at
    the quietest window of the second half of the span before it."""
    windows = padded.size // VAD_WINDOW
    level = window_levels_db(padded[:windows * VAD_WINDOW].reshape(windows, VAD_WINDOW))
    piece = int(VAD_PIECE_S * SAMPLE_RATE) // VAD_WINDOW * VAD_WINDOW
    spans = split_at_quiet(level, 0, windows * VAD_WINDOW, piece)
    return [(start, end) for start, end in spans if end > start]


def piecewise_probabilities(audio: Audio, workers: int = 1,
                            model_path: str | Path | None = None) -> Probabilities:
    """Speech probability of every window of a whole recording (the last one padded with
    zeros), scored piece by piece (`vad_pieces`), each piece from a fresh state, on ``workers``
    threads (onnxruntime releases the GIL; the session runs one thread per call)."""
    if audio.size == 0:
        return np.zeros(0, dtype=np.float32)
    model = load_model(model_path)
    padded = np.ascontiguousarray(np.pad(audio, (0, (-audio.size) % VAD_WINDOW)),
                                  dtype=np.float32)
    windows = padded.reshape(-1, VAD_WINDOW)
    pieces = vad_pieces(padded)

    def score(piece: tuple[int, int]) -> Probabilities:
        return model.score_fresh(windows[piece[0] // VAD_WINDOW:piece[1] // VAD_WINDOW])

    if workers <= 1 or len(pieces) == 1:
        return np.concatenate([score(piece) for piece in pieces])
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vad") as pool:
        return np.concatenate(list(pool.map(score, pieces)))
