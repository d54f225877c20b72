"""A recording planned and decoded a section at a time, so memory stays bounded however long
it is (a file decoded whole held memory in proportion to its length; issue 15, item 12).

Audio arrives in pieces (`engine.audio.decode.open_audio`). Two things would differ from
planning the whole file at once, and neither does:

- VAD: the file is scored in pieces of at most `VAD_PIECE_S`, each from a fresh state, each
  cut at the quietest window of the second half of the span before it (`engine.vad`). A piece
  depends only on the audio from its start to at most `VAD_PIECE_S` later, so every piece
  that audio already read cannot move is scored as soon as it is known, and the
  probabilities equal the whole file's, window for window.
- Chunks: a section ends in the middle of a pause long enough that the whole-file plan would
  end a chunk there too (`long_silence_s` plus both pads and a margin): the regions, pads and
  packing on either side are then the same as the whole file's. Only a section that finds no
  such pause by `MAX_SECTION_S` is cut at its quietest window (a chunk border moves there).

A section holds at most about `MAX_SECTION_S` of audio (29 MB at 7.5 min); the probabilities of
the whole file are kept (one float per 32 ms).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from engine.core.voice import quietest, split_at_quiet, window_levels_db
from engine.longform.chunking import ChunkingOptions, Probabilities, _speech_regions
from engine.types import SAMPLE_RATE, VAD_WINDOW, Audio
from engine.vad import VAD_PIECE_S, load_model

# A section's audio is held beside the decode buffers for as long as it decodes: 19 MB at
# 5 min, 29 at 7.5 (dense speech, with no long pause, always runs to the latter).
SECTION_S = 300.0  # a section is cut at the first long pause after this much audio
MAX_SECTION_S = 450.0  # no such pause by then: cut at the quietest window


@dataclass(frozen=True)
class Section:
    """``audio`` starting at sample ``start`` of the file (a whole number of windows), with
    the speech probability of each of its windows (the last one padded when ``last``)."""

    start: int
    audio: Audio
    probs: Probabilities
    last: bool


class _Vad:
    """Piecewise Silero scoring of a growing buffer: `score` takes every piece no later audio
    can change; `finish` the rest, padded to a whole window, as the whole-file scorer does."""

    def __init__(self, workers: int) -> None:
        self._model = load_model()
        # One pool for the whole file: a pool per call started new threads every piece, and
        # each new thread left onnxruntime memory behind (RSS grew with the file's length).
        self._pool = ThreadPoolExecutor(workers, "vad") if workers > 1 else None
        self._piece = int(VAD_PIECE_S * SAMPLE_RATE) // VAD_WINDOW * VAD_WINDOW

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def score(self, audio: Audio, final: bool) -> Probabilities:
        """Probabilities of ``audio``'s leading pieces (all of them when ``final``)."""
        if final:
            audio = np.pad(audio, (0, (-audio.size) % VAD_WINDOW))
        windows = audio[:audio.size // VAD_WINDOW * VAD_WINDOW].reshape(-1, VAD_WINDOW)
        if not len(windows):
            return np.zeros(0, dtype=np.float32)
        spans = split_at_quiet(window_levels_db(windows), 0, len(windows) * VAD_WINDOW,
                               self._piece)
        if not final:
            spans = spans[:-1]  # the last piece may still grow (or move its cut)
        spans = [(a, b) for a, b in spans if b > a]
        if not spans:
            return np.zeros(0, dtype=np.float32)

        def one(span: tuple[int, int]) -> Probabilities:
            return self._model.score_fresh(windows[span[0] // VAD_WINDOW:span[1] // VAD_WINDOW])

        if self._pool is None or len(spans) == 1:
            return np.concatenate([one(span) for span in spans])
        return np.concatenate(list(self._pool.map(one, spans)))


def sections(pieces: Iterable[Audio], chunking: ChunkingOptions, *, workers: int = 1,
             section_s: float | None = None, max_section_s: float | None = None
             ) -> Iterator[Section]:
    """The recording in ``pieces`` as sections, in order (see the module notes). Audio is
    copied once into its section; what is held between sections is the pieces read past the
    last cut."""
    after = int((section_s or SECTION_S) * SAMPLE_RATE)
    most = int((max_section_s or MAX_SECTION_S) * SAMPLE_RATE)
    vad = _Vad(workers)
    try:
        yield from _cut(pieces, chunking, vad, after, most)
    finally:
        vad.close()


def _cut(pieces: Iterable[Audio], chunking: ChunkingOptions, vad: _Vad, after: int,
         most: int) -> Iterator[Section]:
    start = 0
    held: list[Audio] = []  # pieces from `start` on
    length = 0
    probs = np.zeros(0, dtype=np.float32)  # of the windows from `start`, up to a piece cut
    for piece in pieces:
        held.append(np.asarray(piece, dtype=np.float32))
        length += len(piece)
        unscored = _tail(held, length - len(probs) * VAD_WINDOW)
        probs = np.concatenate([probs, vad.score(unscored, False)])
        if length < after:
            continue
        cut = section_cut(probs, chunking, after, force=length >= most)
        if cut is None:
            continue
        audio = np.concatenate(held)
        held = [audio[cut:].copy()]
        section = Section(start, audio[:cut], probs[:cut // VAD_WINDOW], False)
        del audio  # the section's view keeps its part alive; the rest was copied out
        start, length = start + cut, length - cut
        probs = probs[cut // VAD_WINDOW:].copy()
        yield section
    audio = np.concatenate(held) if held else np.zeros(0, dtype=np.float32)
    held = []
    rest = vad.score(audio[len(probs) * VAD_WINDOW:], True)
    yield Section(start, audio, np.concatenate([probs, rest]), True)


def _tail(pieces: list[Audio], samples: int) -> Audio:
    """The last ``samples`` of the pieces, as one array (a copy of those only)."""
    out: list[Audio] = []
    need = samples
    for piece in reversed(pieces):
        if need <= 0:
            break
        out.append(piece[-need:] if need < len(piece) else piece)
        need -= len(piece)
    return np.concatenate(out[::-1]) if out else np.zeros(0, dtype=np.float32)


def section_cut(probs: Probabilities, chunking: ChunkingOptions, after: int, *,
                force: bool) -> int | None:
    """Where to end a section (samples, a whole window): the middle of the last pause at or
    after ``after`` samples in which the whole-file plan would end a chunk too; with
    ``force``, the quietest window of the second half when there is no such pause."""
    regions = _speech_regions(probs, chunking)
    # A pause must outlast long_silence_s between the *padded* regions, with a window to spare.
    pad = int(chunking.speech_pad_s * SAMPLE_RATE)
    need = int(chunking.long_silence_s * SAMPLE_RATE) + 2 * pad + 2 * VAD_WINDOW
    cut = None
    # The last region may still grow or be dropped as a click: only pauses before it count.
    for (_, end), (nxt, _) in zip(regions[:-1], regions[1:-1], strict=False):
        middle = (end + nxt) // 2 // VAD_WINDOW * VAD_WINDOW
        if nxt - end >= need and middle >= after:
            cut = middle
    if not regions:  # no speech yet: leave a pause's worth after the cut for speech to start
        scored = (len(probs) * VAD_WINDOW - need) // VAD_WINDOW * VAD_WINDOW
        cut = scored if scored >= after else None
    if cut is None and force and len(probs) > 2:
        cut = quietest(probs, len(probs) // 2, len(probs), smooth=True) * VAD_WINDOW
    return cut or None
