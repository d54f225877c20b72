"""Decode any audio/video file PyAV can read into 16 kHz mono float32, with clear errors."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from engine.errors import AudioDecodeError, missing_dependency
from engine.types import SAMPLE_RATE, Audio


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
    try:
        audio = decode_audio(str(p), sampling_rate=SAMPLE_RATE)
    except Exception as exc:  # noqa: BLE001 - PyAV raises many error types; translate them all
        reason = str(exc).strip() or type(exc).__name__
        raise AudioDecodeError(f"{p}: not a readable audio file ({reason})") from exc
    if audio.size == 0:
        raise AudioDecodeError(f"{p}: contains no audio samples")
    return np.ascontiguousarray(audio, dtype=np.float32)
