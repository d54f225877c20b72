"""Cut a whole recording into decodable chunks at silences.

Silero VAD scores every 512-sample window of the file once (`engine.vad.piecewise_probabilities`,
on the same loader as the live paths); `plan_chunks` then works on those probabilities alone, so
the cutting policy is a pure function that tests can drive with synthetic probability curves.

Silero is stateful, and over a long stream its state drifts towards the voice it has been
hearing: a new speaker or microphone after a while of another scores far lower than the same
audio heard fresh (known upstream: snakers4/silero-vad#725), so a file scored as one sequence
loses most of the words of a speaker who comes in late. So the file is scored in pieces of at
most `VAD_PIECE_S`, each from a fresh state and each starting at the quietest window (lowest
level) of the second half of the span before it, where a pause or a new voice starts: that wins
the late speaker back at the same VAD cost and reads better than fixed pieces with a re-read
for warm-up, while on a single speaker, where nothing drifts, chunk borders only move a little
(figures: docs/evidence.md).

The pieces are scored through the shared loader, as the live path is; faster-whisper's loader
(the same ONNX file) would zero the last 64 samples of each call's last window in the caller's
array, while the shared one scores that window whole (the switch changed no chunk plan).

Policy:
- speech regions come from hysteresis on the probabilities (on at ``threshold``, off below
  ``neg_threshold``: `engine.core.voice.speech_regions`), padded a little on each side so word
  onsets and tails are kept;
- consecutive regions are packed into one chunk while the chunk stays within ``max_chunk_s``
  and the pause between them is shorter than ``long_silence_s``; longer pauses are dropped;
- a region longer than a chunk is split at its quietest window (lowest smoothed speech
  probability) in the last part of the allowed span (`engine.core.voice.split_at_quiet`), never
  at a fixed offset, so cuts fall between words rather than inside one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine.core.voice import speech_regions
from engine.core.voice import split_at_quiet as split_at_quiet  # re-exported: the pipeline's
from engine.types import SAMPLE_RATE, Audio
from engine.types import VAD_WINDOW as VAD_WINDOW  # re-exported for the pipeline and its tests
from engine.vad import VAD_PIECE_S as VAD_PIECE_S
from engine.vad import piecewise_probabilities
from engine.vad import vad_pieces as vad_pieces

Probabilities = npt.NDArray[np.float32]


@dataclass(frozen=True)
class ChunkingOptions:
    """How speech is found and packed into chunks.

    Attributes:
      threshold: speech probability that starts a speech region.
      neg_threshold: probability below which a region ends (hysteresis keeps short dips in).
      min_gap_s: pauses shorter than this do not end a region (breaths, stop consonants).
      min_speech_s: regions shorter than this are treated as clicks and dropped.
      speech_pad_s: audio kept before and after each region (onsets, trailing consonants).
      max_chunk_s: hard limit of one chunk; Whisper's window is 30 s.
      target_chunk_s: a chunk is closed at the first pause after it reaches this length;
        shorter chunks suit the unpadded (short-context) encoder, whose cost grows faster than
        linearly with length.
      long_silence_s: pauses at least this long end a chunk and are not decoded.
    """

    threshold: float = 0.5
    neg_threshold: float = 0.35
    min_gap_s: float = 0.1
    min_speech_s: float = 0.1
    speech_pad_s: float = 0.2
    max_chunk_s: float = 30.0
    target_chunk_s: float = 30.0
    long_silence_s: float = 2.0

    def __post_init__(self) -> None:
        if not 0.0 < self.neg_threshold <= self.threshold < 1.0:
            raise ValueError("need 0 < neg_threshold <= threshold < 1")
        if not 1.0 <= self.max_chunk_s <= 30.0:
            raise ValueError("max_chunk_s must be within 1..30 s (Whisper's window)")
        if not 0.5 <= self.target_chunk_s <= self.max_chunk_s:
            raise ValueError("target_chunk_s must be within 0.5 s..max_chunk_s")
        if min(self.min_gap_s, self.min_speech_s, self.speech_pad_s) < 0:
            raise ValueError("durations must not be negative")
        if self.long_silence_s <= self.min_gap_s:
            raise ValueError("long_silence_s must exceed min_gap_s")


@dataclass(frozen=True)
class Chunk:
    """A contiguous span ``[start, end)`` of the file, in samples, decoded as one unit."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.end:
            raise ValueError(f"empty or negative chunk [{self.start}, {self.end})")

    @property
    def samples(self) -> int:
        return self.end - self.start

    @property
    def seconds(self) -> float:
        return self.samples / SAMPLE_RATE


def speech_probabilities(audio: Audio, workers: int = 1) -> Probabilities:
    """Silero VAD speech probability of every 512-sample window of ``audio`` (last one padded),
    scored in pieces of at most `VAD_PIECE_S` from fresh states (module notes) on ``workers``
    threads."""
    return piecewise_probabilities(audio, workers)


def plan_chunks(
    probs: Probabilities, total_samples: int, options: ChunkingOptions | None = None
) -> list[Chunk]:
    """Chunks (in file order, non-overlapping, each at most ``max_chunk_s``) covering the speech."""
    opts = options or ChunkingOptions()
    regions = _speech_regions(probs, opts)
    regions = _pad_regions(regions, total_samples, opts)
    max_len = int(opts.max_chunk_s * SAMPLE_RATE)
    pieces: list[tuple[int, int]] = []
    for start, end in regions:
        pieces.extend(split_at_quiet(probs, start, end, max_len))
    return _pack(pieces, opts)


def _speech_regions(probs: Probabilities, opts: ChunkingOptions) -> list[tuple[int, int]]:
    """Hysteresis over windows; returns sample spans, short gaps bridged, clicks dropped."""
    regions = [(first * VAD_WINDOW, stop * VAD_WINDOW)
               for first, stop in speech_regions(probs, opts.threshold, opts.neg_threshold)]
    min_gap = int(opts.min_gap_s * SAMPLE_RATE)
    bridged: list[tuple[int, int]] = []
    for start, end in regions:
        if bridged and start - bridged[-1][1] < min_gap:
            bridged[-1] = (bridged[-1][0], end)
        else:
            bridged.append((start, end))
    min_speech = int(opts.min_speech_s * SAMPLE_RATE)
    return [(s, e) for s, e in bridged if e - s >= min_speech]


def _pad_regions(
    regions: list[tuple[int, int]], total: int, opts: ChunkingOptions
) -> list[tuple[int, int]]:
    """Widen each region by the pad, never past the file or the middle of the pause to the next."""
    pad = int(opts.speech_pad_s * SAMPLE_RATE)
    padded: list[tuple[int, int]] = []
    for i, (start, end) in enumerate(regions):
        lo = 0 if i == 0 else (regions[i - 1][1] + start) // 2
        hi = total if i == len(regions) - 1 else (end + regions[i + 1][0]) // 2
        new_start, new_end = max(lo, start - pad), min(hi, end + pad)
        if new_end > new_start:
            padded.append((new_start, new_end))
    return padded


def _pack(pieces: list[tuple[int, int]], opts: ChunkingOptions) -> list[Chunk]:
    max_len = int(opts.max_chunk_s * SAMPLE_RATE)
    target = int(opts.target_chunk_s * SAMPLE_RATE)
    long_gap = int(opts.long_silence_s * SAMPLE_RATE)
    chunks: list[Chunk] = []
    current: tuple[int, int] | None = None
    for start, end in pieces:
        if current is not None:
            fits = end - current[0] <= max_len and start - current[1] < long_gap
            if fits and current[1] - current[0] < target:
                current = (current[0], end)
                continue
            chunks.append(Chunk(*current))
        current = (start, end)
    if current is not None:
        chunks.append(Chunk(*current))
    return chunks
