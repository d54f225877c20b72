"""Decode any audio/video file PyAV can read into 16 kHz mono float32, with clear errors, as
pieces (`open_audio`: memory bounded whatever the length) or whole (`load_audio`).

Before decoding, the container is probed: a file with no audio stream (a silent screen
recording) is refused with that reason, and the duration its header declares is kept, so a file
that ends early (truncated by a crash or a partial download) is transcribed with a warning
instead of silently.

Stereo whose channels cancel out (the right one the left inverted, a wiring or export
mistake) would mix down to silence and an empty transcript: the first stretch loud enough to
tell decides, and such a file has its right channel flipped back before the mix, with a warning.
"""

from __future__ import annotations

import itertools
import logging
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.errors import AudioDecodeError, missing_dependency
from engine.types import SAMPLE_RATE, Audio

log = logging.getLogger(__name__)

# Shorter than declared by more than this is "ended early"; estimated durations (MP3 without
# a VBR header) are a few percent off, so small gaps are not worth a warning.
SHORT_TOLERANCE = 0.05
SHORT_MIN_S = 0.5


# What a real recording can hold. A header outside these is damaged or hostile: a 40 KB WAV
# claiming 2 Hz asked the resampler for 8000x its samples (over 3.5 GB, then ENOMEM).
MIN_RATE = 1_000
MAX_RATE = 768_000
MAX_CHANNELS = 64
PIECE_S = 30.0  # audio decoded and handed on at a time
# Stereo channels this anti-correlated cancel when mixed to mono (-1: one is the other
# inverted); judged once a stretch has both channels above ANTI_PHASE_MIN_RMS (about -50 dBFS).
ANTI_PHASE_CORRELATION = -0.9
ANTI_PHASE_MIN_RMS = 10 ** (-50 / 20)


def load_audio(path: str | os.PathLike[str]) -> Audio:
    """Read ``path`` (any container/codec, rate and channel count) as 16 kHz mono float32.

    Raises AudioDecodeError naming the file when it is missing, empty, corrupt or holds no audio.
    Holds the whole recording: long files go through `open_audio` piece by piece instead.
    """
    pieces = list(open_audio(path))
    return np.ascontiguousarray(np.concatenate(pieces), dtype=np.float32)


def open_audio(path: str | os.PathLike[str], piece_s: float = PIECE_S) -> AudioReader:
    """``path`` checked and probed now (AudioDecodeError when it cannot be read), decoded when
    iterated, in 16 kHz mono float32 pieces of about ``piece_s``: memory does not grow with the
    length of the recording."""
    p = Path(path)
    if not p.exists():
        raise AudioDecodeError(f"{p}: no such file")
    if p.is_dir():
        raise AudioDecodeError(f"{p}: is a directory, not an audio file")
    if p.stat().st_size == 0:
        raise AudioDecodeError(f"{p}: file is empty")
    try:
        import av  # noqa: F401 - PyAV comes with faster-whisper
    except ImportError as exc:
        raise missing_dependency("faster-whisper (PyAV)", "local") from exc
    return AudioReader(p, _probe(p), piece_s)


class AudioReader:
    """A file's audio as an iterable of pieces (iterate once); ``declared_s`` is the duration
    its header states (None when it does not say), ``samples`` how many were decoded so far.
    `length_within` decodes ahead to tell whether the file is shorter than some length."""

    def __init__(self, path: Path, declared_s: float | None, piece_s: float) -> None:
        self.path = path
        self.declared_s = declared_s
        self.samples = 0
        self._piece_s = piece_s
        self._piece = max(1, int(piece_s * SAMPLE_RATE))
        self._ahead: list[Audio] = []  # decoded by length_within, not yet handed out
        self._pieces: Iterator[Audio] | None = None
        self._done = False

    @property
    def expected_samples(self) -> int:
        """The header's length when it states one, else what was decoded so far."""
        declared = int(self.declared_s * SAMPLE_RATE) if self.declared_s else 0
        return max(declared, self.samples)

    def length_within(self, seconds: float) -> int | None:
        """The file's length in samples when it ends within ``seconds``, else None (having
        decoded only about that much ahead; the pieces are still all handed out)."""
        pieces = self._source()
        held = sum(len(a) for a in self._ahead)
        while held <= seconds * SAMPLE_RATE and not self._done:
            piece = next(pieces, None)
            if piece is None:
                break
            self._ahead.append(piece)
            held += len(piece)
        return held if self._done and held <= seconds * SAMPLE_RATE else None

    def __iter__(self) -> Iterator[Audio]:
        pieces = self._source()
        while self._ahead:
            yield self._ahead.pop(0)
        yield from pieces

    def _source(self) -> Iterator[Audio]:
        if self._pieces is None:
            self._pieces = self._decode()
        return self._pieces

    def _decode(self) -> Iterator[Audio]:
        try:
            yield from self._pcm_pieces()
        except AudioDecodeError:
            raise
        except Exception as exc:  # noqa: BLE001 - PyAV raises many error types; translate them
            reason = str(exc).strip() or type(exc).__name__
            raise AudioDecodeError(f"{self.path}: not a readable audio file ({reason})") from exc
        finally:
            self._done = True
        if self.samples == 0:
            raise AudioDecodeError(f"{self.path}: contains no audio samples")
        got_s, declared_s = self.samples / SAMPLE_RATE, self.declared_s
        if declared_s is not None and got_s < declared_s - max(SHORT_MIN_S,
                                                               SHORT_TOLERANCE * declared_s):
            log.warning("%s: the file ended early: %.1f s of audio where its header says "
                        "%.1f s (truncated, or still being written?); transcribing what is "
                        "there", self.path, got_s, declared_s)

    def _pcm_pieces(self) -> Iterator[Audio]:
        """faster-whisper's decode (s16 mono at 16 kHz through one resampler, damaged frames
        skipped), handed on in pieces instead of gathered into one buffer."""
        import av

        resampler = av.audio.resampler.AudioResampler(format="s16", layout="mono",
                                                      rate=SAMPLE_RATE)
        held: list[npt.NDArray[np.int16]] = []
        count = 0
        with av.open(str(self.path), mode="r", metadata_errors="ignore") as container:
            stream = container.streams.audio[0]
            _check_header(self.path, stream.rate, stream.channels)
            group = min(500_000, max(1024, int(self._piece_s * (stream.rate or SAMPLE_RATE))))
            frames = _in_phase(_grouped(_valid(container.decode(audio=0)), group), self.path)
            for frame in _resampled(frames, resampler):
                pcm = frame.to_ndarray().reshape(-1)
                held.append(pcm)
                count += len(pcm)
                if count >= self._piece:
                    yield self._emit(held)
                    held, count = [], 0
        if count:
            yield self._emit(held)

    def _emit(self, held: list[npt.NDArray[np.int16]]) -> Audio:
        audio = np.concatenate(held).astype(np.float32) / 32768.0
        self.samples += len(audio)
        return audio


def _check_header(path: Path, rate: int | None, channels: int | None) -> None:
    if rate is not None and not MIN_RATE <= rate <= MAX_RATE:
        raise AudioDecodeError(f"{path}: its header claims a sample rate of {rate} Hz "
                               f"(outside {MIN_RATE}-{MAX_RATE}): damaged or not audio")
    if channels is not None and not 1 <= channels <= MAX_CHANNELS:
        raise AudioDecodeError(f"{path}: its header claims {channels} channels "
                               f"(outside 1-{MAX_CHANNELS}): damaged or not audio")


def _valid(frames: Iterator[Any]) -> Iterator[Any]:
    import av

    while True:
        try:
            yield next(frames)
        except StopIteration:
            return
        except av.error.InvalidDataError:
            continue


def _grouped(frames: Iterator[Any], samples: int) -> Iterator[Any]:
    import av

    fifo = av.audio.fifo.AudioFifo()
    for frame in frames:
        frame.pts = None  # ignore timestamp checks
        fifo.write(frame)
        if fifo.samples >= samples:
            yield fifo.read()
    if fifo.samples > 0:
        yield fifo.read()


def _in_phase(frames: Iterator[Any], path: Path) -> Iterator[Any]:
    """The frames, with the right channel of anti-phase stereo flipped (module docstring)."""
    flip: bool | None = None  # undecided until a stretch is loud enough to tell
    for frame in frames:
        if flip is False or len(frame.layout.channels) != 2:
            yield frame
            continue
        data = frame.to_ndarray()
        right = data[1] if frame.format.is_planar else data[0, 1::2]
        left = data[0] if frame.format.is_planar else data[0, 0::2]
        if flip is None:
            flip = _anti_phase(_as_float(left), _as_float(right))
            if flip:
                log.warning("%s: the two channels cancel out when mixed to mono (the right is "
                            "the left inverted); transcribing with the right channel flipped "
                            "back", path)
        if not flip:
            yield frame
            continue
        right[...] = _inverted(right)
        yield _frame_like(data, frame)


def _as_float(samples: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """Samples of any PCM type as floats around 0, full scale about 1."""
    if samples.dtype.kind == "u":
        middle = (np.iinfo(samples.dtype).max + 1) / 2
        return (samples.astype(np.float64) - middle) / middle
    if samples.dtype.kind == "i":
        return samples.astype(np.float64) / (np.iinfo(samples.dtype).max + 1)
    return samples.astype(np.float64)


def _anti_phase(left: npt.NDArray[np.float64], right: npt.NDArray[np.float64]) -> bool | None:
    """Whether the channels cancel out; None while too quiet to tell."""
    left_power, right_power = float(np.mean(left * left)), float(np.mean(right * right))
    if min(left_power, right_power) < ANTI_PHASE_MIN_RMS ** 2:
        return None
    correlation = float(np.mean(left * right)) / np.sqrt(left_power * right_power)
    return bool(correlation < ANTI_PHASE_CORRELATION)


def _inverted(samples: npt.NDArray[Any]) -> npt.NDArray[Any]:
    if samples.dtype.kind == "u":
        return np.iinfo(samples.dtype).max - samples
    if samples.dtype.kind == "i":
        info = np.iinfo(samples.dtype)
        return np.clip(-samples.astype(np.int64), info.min, info.max).astype(samples.dtype)
    return -samples


def _frame_like(data: npt.NDArray[Any], like: Any) -> Any:
    """A PyAV audio frame holding ``data``, in the format, layout and rate of ``like``."""
    import av

    frame = av.AudioFrame.from_ndarray(data, format=like.format.name, layout=like.layout.name)
    frame.sample_rate = like.sample_rate
    return frame


def _resampled(frames: Iterator[Any], resampler: Any) -> Iterator[Any]:
    for frame in itertools.chain(frames, [None]):  # None flushes the resampler
        yield from resampler.resample(frame)


def _probe(path: Path) -> float | None:
    """The duration the file declares, in seconds (None when it does not say). Raises
    AudioDecodeError when the container opens but holds no audio stream; a container that does
    not open is left to the decoder, whose error says why."""
    import av

    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                kinds = sorted({s.type for s in container.streams}) or ["no streams"]
                raise AudioDecodeError(f"{path}: no audio stream (the file holds "
                                       f"{', '.join(kinds)})")
            duration = container.duration
            audio = container.streams.audio[0]
            _check_header(path, audio.rate, audio.channels)
    except av.FFmpegError:
        return None
    wav_s = _wav_declared_seconds(path)
    if wav_s is not None:  # FFmpeg sizes a WAV by the file, not by its header: ask the header
        return wav_s
    return duration / 1_000_000 if duration else None


def _wav_declared_seconds(path: Path) -> float | None:
    """Seconds of audio a RIFF/WAVE header declares in its data chunk, or None (not a WAV, a
    streamed WAV with an unknown size, a header that does not parse)."""
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    byte_rate = None
    offset = 12
    while offset + 8 <= len(head):
        chunk, size = head[offset:offset + 4], struct.unpack_from("<I", head, offset + 4)[0]
        if chunk == b"fmt " and offset + 20 <= len(head):
            byte_rate = struct.unpack_from("<I", head, offset + 16)[0]
        elif chunk == b"data":
            if not byte_rate or size in (0, 0xFFFFFFFF):
                return None
            return float(size / byte_rate)
        offset += 8 + size + (size & 1)  # chunks are padded to an even length
    return None
