"""Files that are not what they claim (issue 15, item 15): a video with no audio stream says so;
a file that ends before its header says is transcribed with a warning, never silently."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.audio.decode import load_audio
from engine.errors import AudioDecodeError

av = pytest.importorskip("av")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, shared_audio: Path) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("decode")
    wav = shared_audio / "cmusphinx-goforward.wav"  # 2.79 s
    made = {"wav": wav}
    video = folder / "silent-screen.mp4"
    with av.open(str(video), "w") as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        frame = av.VideoFrame.from_ndarray(np.zeros((64, 64, 3), dtype=np.uint8), format="rgb24")
        for _ in range(10):
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    made["video"] = video
    mp3 = folder / "speech.mp3"
    samples = (load_audio(wav) * 32767).astype(np.int16)
    with av.open(str(mp3), "w") as container:
        stream = container.add_stream("mp3", rate=16000)
        frame = av.AudioFrame.from_ndarray(samples[None, :], format="s16", layout="mono")
        frame.sample_rate = 16000
        for packet in [*stream.encode(frame), *stream.encode()]:
            container.mux(packet)
    made["mp3"] = mp3
    for name in ("wav", "mp3"):
        data = made[name].read_bytes()
        cut = folder / f"cut.{name}"
        cut.write_bytes(data[:len(data) // 2])
        made[f"cut-{name}"] = cut
    return made


def test_a_video_without_audio_says_no_audio_stream(files: dict[str, Path]) -> None:
    """Said "tuple index out of range"."""
    with pytest.raises(AudioDecodeError, match="no audio stream") as refused:
        load_audio(files["video"])
    assert "video" in str(refused.value) and "tuple index" not in str(refused.value)


@pytest.mark.parametrize("name", ["cut-wav", "cut-mp3"])
def test_a_truncated_file_is_transcribed_with_a_warning(files: dict[str, Path], name: str,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="engine.audio.decode"):
        audio = load_audio(files[name])
    assert 1.0 < len(audio) / 16000 < 1.6
    assert "ended early" in caplog.text and "2.8 s" in caplog.text


@pytest.mark.parametrize("name", ["wav", "mp3"])
def test_a_whole_file_gives_no_warning(files: dict[str, Path], name: str,
                                       caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="engine.audio.decode"):
        load_audio(files[name])
    assert "ended early" not in caplog.text


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(keep=st.floats(0.0, 1.0), name=st.sampled_from(["wav", "mp3"]))
def test_a_file_cut_anywhere_is_refused_or_read_and_never_silently_short(
        files: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture,
        keep: float, name: str) -> None:
    data = files[name].read_bytes()
    cut = tmp_path / f"any-cut.{name}"
    cut.write_bytes(data[:int(len(data) * keep)])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="engine.audio.decode"):
        try:
            audio = load_audio(cut)
        except AudioDecodeError:
            return  # a clear refusal (empty, no header, nothing decodable) is fine
    if len(audio) / 16000 < 2.786 * 0.95 - 0.5:
        assert "ended early" in caplog.text, (keep, len(audio))
