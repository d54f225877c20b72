"""Decode any audio/video file PyAV can read into 16 kHz mono float32, with clear errors.

Before decoding, the container is probed: a file with no audio stream (a silent screen
recording) is refused with that reason, and the duration its header declares is kept, so a file
that ends early (truncated by a crash or a partial download) is transcribed with a warning
instead of silently.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import numpy as np

from engine.errors import AudioDecodeError, missing_dependency
from engine.types import SAMPLE_RATE, Audio

log = logging.getLogger(__name__)

# Shorter than declared by more than this is "ended early"; estimated durations (MP3 without
# a VBR header) are a few percent off, so small gaps are not worth a warning.
SHORT_TOLERANCE = 0.05
SHORT_MIN_S = 0.5


def load_audio(path: str | os.PathLike[str]) -> Audio:
    """Read ``path`` (any container/codec, rate and channel count) as 16 kHz mono float32.

    Raises AudioDecodeError naming the file when it is missing, empty, corrupt or holds no audio.
    """
    p = Path(path)
    if not p.exists():
        raise AudioDecodeError(f"{p}: no such file")
    if p.is_dir():
        raise AudioDecodeError(f"{p}: is a directory, not an audio file")
    if p.stat().st_size == 0:
        raise AudioDecodeError(f"{p}: file is empty")
    try:
        from faster_whisper.audio import decode_audio
    except ImportError as exc:
        raise missing_dependency("faster-whisper (PyAV)", "local") from exc
    declared_s = _probe(p)
    try:
        audio = decode_audio(str(p), sampling_rate=SAMPLE_RATE)
    except Exception as exc:  # noqa: BLE001 - PyAV raises many error types; translate them all
        reason = str(exc).strip() or type(exc).__name__
        raise AudioDecodeError(f"{p}: not a readable audio file ({reason})") from exc
    if audio.size == 0:
        raise AudioDecodeError(f"{p}: contains no audio samples")
    got_s = audio.size / SAMPLE_RATE
    if declared_s is not None and got_s < declared_s - max(SHORT_MIN_S,
                                                           SHORT_TOLERANCE * declared_s):
        log.warning("%s: the file ended early: %.1f s of audio where its header says %.1f s "
                    "(truncated, or still being written?); transcribing what is there",
                    p, got_s, declared_s)
    return np.ascontiguousarray(audio, dtype=np.float32)


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
