"""FileSource (real and simulated time) and the 16 kHz resampler."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from engine.audio.resample import StreamResampler, resample, to_mono
from engine.audio.sources import FileSource
from engine.errors import AudioDecodeError

SR = 16000


def drain(source: FileSource) -> np.ndarray:
    blocks = []
    while not source.finished:
        block = source.read(0.5)
        if block is not None:
            blocks.append(block)
    return np.concatenate(blocks)


def test_simulated_file_source_delivers_everything_with_silences(jfk_wav: Path) -> None:
    source = FileSource(jfk_wav, lead_silence_s=0.5, tail_silence_s=1.0, block_ms=32)
    assert source.simulated
    source.start()
    out = drain(source)
    assert len(out) == source.duration == source.position == source.captured
    assert not out[: SR // 2].any() and not out[-SR:].any() and out[SR // 2:-SR].any()
    assert source.read(0.1) is None and source.dropped == 0


def test_real_time_source_paces_blocks_and_stops_early() -> None:
    audio = np.ones(SR, dtype=np.float32)
    source = FileSource(audio=audio, realtime=True, block_ms=100)
    source.start()
    first = source.read(1.0)
    assert first is not None and len(first) == SR // 10
    assert source.captured >= source.position
    threading.Timer(0.15, source.stop).start()
    rest = drain(source)
    assert len(rest) < SR - len(first)  # stop() ended playback before the file's end
    assert source.finished


def test_file_source_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        FileSource()
    with pytest.raises(ValueError):
        FileSource(tmp_path / "a.wav", audio=np.zeros(1, np.float32))
    with pytest.raises(ValueError):
        FileSource(audio=np.zeros(1, np.float32), block_ms=0)
    with pytest.raises(AudioDecodeError, match="no such file"):
        FileSource(tmp_path / "missing.wav").start()


def test_streaming_resampler_matches_one_shot_and_keeps_a_tone() -> None:
    rate = 48000
    t = np.arange(rate) / rate
    tone = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    whole = resample(tone, rate)
    stream = StreamResampler(rate)
    pieces = [stream.process(tone[i:i + 1234]) for i in range(0, len(tone), 1234)]
    pieces.append(stream.process(np.zeros(0, np.float32), last=True))
    streamed = np.concatenate(pieces)
    assert abs(len(streamed) - SR) <= 2 and abs(len(whole) - SR) <= 2
    n = min(len(whole), len(streamed)) - 200
    assert np.allclose(whole[200:n], streamed[200:n], atol=1e-3)
    spectrum = np.abs(np.fft.rfft(streamed[:SR]))
    assert abs(int(np.argmax(spectrum)) - 440) <= 1  # 1 Hz bins: the tone survived


def test_same_rate_and_mono_are_pass_through() -> None:
    audio = np.arange(10, dtype=np.float32)
    assert StreamResampler(SR).process(audio) is not None
    assert np.array_equal(resample(audio, SR), audio)
    assert np.array_equal(to_mono(np.stack([audio, audio * 3], axis=1)), audio * 2)
    assert to_mono(audio).dtype == np.float32
    with pytest.raises(ValueError):
        StreamResampler(0)
