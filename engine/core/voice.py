"""The voice-activity toolkit's pure parts: window levels, the quietest cut, hysteresis, and the
energy fallback scorer (sans-I/O; Silero itself, which needs onnxruntime, is `engine.vad`).

Everything works on whole `VAD_WINDOW` (512-sample, 32 ms) windows and the per-window values
(speech probabilities or levels) computed from them:
- `window_levels_db`: the loudness of each window, where a cut is looked for;
- `quietest` / `split_at_quiet`: where to cut a span that is too long: at its quietest window,
  never at a fixed offset, so cuts fall between words rather than inside one. The streaming
  segmenter splits an over-long utterance there, the live Silero rebuilds its fresh state from
  there, and the long-form planner cuts both its chunks and its VAD pieces there;
- `Onset` / `Hysteresis` / `speech_regions`: speech starts after a run of windows at or above
  the lower (end) threshold with one of them at or above the start threshold, and continues
  while windows stay at or above the end threshold (short dips in a soft voice are kept, a
  click does not start speech). The live segmenter and the long-form planner both decide so;
- `EnergyVad`: a `SpeechScorer` from loudness alone, for when Silero cannot be loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from engine.types import VAD_WINDOW

Values = npt.NDArray[np.float32]  # one value per window: a probability or a level


def window_levels_db(windows: npt.NDArray[np.float32]) -> Values:
    """The level (mean power, dB full scale; -100 for digital silence) of each row of
    ``windows`` (shape ``(n, VAD_WINDOW)``; a single window may be passed as ``(VAD_WINDOW,)``)."""
    rows = np.atleast_2d(windows)
    power = np.mean(np.square(rows, dtype=np.float64), axis=1)
    return np.asarray(10 * np.log10(power + 1e-10), dtype=np.float32)


def quietest(values: npt.ArrayLike, lo: int, hi: int, *, smooth: bool = False) -> int:
    """Index of the lowest of ``values[lo:hi]`` (the first one on a tie).

    ``smooth``: take a three-window moving average first, so a single low window inside a word
    does not win (the long-form planner's cuts; its ends average with zeros, as they always did).
    """
    span = np.asarray(values)[lo:hi]
    if span.size == 0:
        raise ValueError(f"no window to choose from in [{lo}, {hi})")
    if smooth and span.size >= 3:
        kernel = np.ones(3, dtype=np.float32) / 3
        span = np.convolve(span, kernel, mode="same").astype(np.float32)
    return lo + int(np.argmin(span))


def split_at_quiet(values: Values, start: int, end: int, max_len: int) -> list[tuple[int, int]]:
    """Split the sample span ``[start, end)`` into pieces of at most ``max_len`` samples, each
    cut at the quietest (smoothed) window of the second half of what it may hold.

    ``values`` has one entry per window of the whole stream (speech probabilities, or levels in
    dB: the quietest window wins either way). Searching only the second half keeps pieces long
    (fewer decodes, fewer state restarts) while still landing in a pause where there is one.
    """
    pieces: list[tuple[int, int]] = []
    while end - start > max_len:
        lo = (start + max_len // 2) // VAD_WINDOW + 1
        hi = (start + max_len) // VAD_WINDOW
        if hi > lo and lo < len(values):
            cut = quietest(values, lo, hi, smooth=True) * VAD_WINDOW
        else:
            cut = start + max_len
        cut = min(max(cut, start + 1), start + max_len)
        pieces.append((start, cut))
        start = cut
    pieces.append((start, end))
    return pieces


@dataclass
class Onset:
    """The start of a run: ``windows`` consecutive windows that each *sustain* it, at least one
    of which *peaks*. With probabilities: sustain = at or above the end threshold, peak = at or
    above the start threshold; the segmenter's soft path uses loudness for both."""

    windows: int = 1
    run: int = field(default=0, init=False)  # consecutive sustaining windows so far
    peaked: bool = field(default=False, init=False)  # ... one of which peaked

    def __post_init__(self) -> None:
        if self.windows < 1:
            raise ValueError("an onset needs at least one window")

    def push(self, sustained: bool, peak: bool) -> bool:
        """One window; True once the run is long enough and has peaked."""
        self.run = self.run + 1 if sustained else 0
        self.peaked = (self.peaked and self.run > 0) or peak
        return self.run >= self.windows and self.peaked

    def clear(self) -> None:
        self.run = 0
        self.peaked = False


@dataclass
class Hysteresis:
    """Speech on/off decisions over per-window speech probabilities (module notes).

    `starts(p)` while idle: True when the windows so far (``onset.run`` of them, this one
    included) start speech. `holds(p)` while in speech: whether this window keeps it going;
    how many windows that do not hold end it is the caller's rule (the planner: the first; the
    segmenter: a silence long enough)."""

    start_threshold: float = 0.5
    end_threshold: float = 0.35
    start_windows: int = 1
    onset: Onset = field(init=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.end_threshold <= self.start_threshold < 1.0:
            raise ValueError("need 0 < end_threshold <= start_threshold < 1")
        self.onset = Onset(self.start_windows)

    def starts(self, probability: float) -> bool:
        return self.onset.push(probability >= self.end_threshold,
                               probability >= self.start_threshold)

    def holds(self, probability: float) -> bool:
        return probability >= self.end_threshold

    def clear(self) -> None:
        self.onset.clear()


def speech_regions(probs: Values, start_threshold: float,
                   end_threshold: float) -> list[tuple[int, int]]:
    """Window spans ``[first, stop)`` of speech in a whole array of probabilities: each starts
    at a window at or above ``start_threshold`` and stops at the first one below
    ``end_threshold`` (or the end of the array)."""
    gate = Hysteresis(start_threshold, end_threshold)
    regions: list[tuple[int, int]] = []
    first: int | None = None
    # Each element is compared as the array's own type (float32), as the planner always did.
    for i, p in enumerate(probs):
        if first is None:
            if gate.starts(p):
                first = i
        elif not gate.holds(p):
            regions.append((first, i))
            first = None
            gate.clear()
    if first is not None:
        regions.append((first, len(probs)))
    return regions


class EnergyVad:
    """A `SpeechScorer` from loudness alone: -50 dBFS and below scores 0, -35 dBFS and above 1.

    The fallback when Silero (`engine.vad`) cannot be loaded: good enough for close-talking
    microphones and clean recordings; noisy rooms need Silero. Stateless.
    """

    def __init__(self, floor_db: float = -50.0, full_db: float = -35.0) -> None:
        if full_db <= floor_db:
            raise ValueError("full_db must exceed floor_db")
        self._floor = floor_db
        self._span = full_db - floor_db

    def score(self, windows: npt.NDArray[np.float32]) -> Values:
        rows = np.asarray(windows, dtype=np.float32).reshape(-1, VAD_WINDOW)
        rms = np.sqrt(np.mean(np.square(rows, dtype=np.float64), axis=1))
        db = 20 * np.log10(np.maximum(rms, 1e-10))
        return np.asarray(np.clip((db - self._floor) / self._span, 0.0, 1.0), dtype=np.float32)

    def reset(self) -> None:
        """Nothing to forget: each window is scored on its own."""
