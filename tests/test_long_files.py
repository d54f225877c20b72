"""Long files in bounded memory (issue 15, item 12): files are decoded piece by piece and
planned a section at a time, with the same VAD and chunks as the whole file; absurd headers
are refused before anything is decoded. No Whisper model: a scripted runner stands in."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.asr.fake import ScriptedRunner
from engine.audio.decode import MAX_CHANNELS, MAX_RATE, MIN_RATE, load_audio, open_audio
from engine.errors import AudioDecodeError
from engine.files import FileOptions, Progress, transcribe_file
from engine.longform.chunking import ChunkingOptions, plan_chunks, speech_probabilities
from engine.longform.sections import section_cut, sections
from engine.types import SAMPLE_RATE, VAD_WINDOW, Segment

av = pytest.importorskip("av")
pytestmark = pytest.mark.timeout(300)

AUDIO = Path(__file__).parent / "audio"
CHUNKING = FileOptions().chunking


def wav_bytes(rate: int, channels: int, frames: int = 2000) -> bytes:
    data = (np.random.default_rng(0).standard_normal(frames * channels) * 1000).astype("<i2")
    raw = data.tobytes()
    fmt = struct.pack("<IHHIIHH", 16, 1, channels, rate, (rate * 2 * channels) & 0xFFFFFFFF,
                      (2 * channels) & 0xFFFF, 16)
    return (b"RIFF" + struct.pack("<I", 36 + len(raw)) + b"WAVEfmt " + fmt + b"data"
            + struct.pack("<I", len(raw)) + raw)


def speech_with_pauses(pauses_s: list[float]) -> np.ndarray:
    clips = [load_audio(p) for p in sorted(AUDIO.glob("*.flac"))
             if "long" not in p.name and "reallylong" not in p.name][:8]
    parts = []
    for i, pause in enumerate(pauses_s):
        parts += [clips[i % len(clips)], np.zeros(int(pause * SAMPLE_RATE), dtype=np.float32)]
    return np.concatenate(parts)


def write_flac(path: Path, audio: np.ndarray) -> Path:
    with av.open(str(path), "w") as container:
        stream = container.add_stream("flac", rate=SAMPLE_RATE)
        stream.layout = "mono"
        pcm = (np.clip(audio, -1, 1) * 32767).astype(np.int16)
        for i in range(0, len(pcm), 60 * SAMPLE_RATE):
            frame = av.AudioFrame.from_ndarray(pcm[None, i:i + 60 * SAMPLE_RATE],
                                               format="s16", layout="mono")
            frame.sample_rate = SAMPLE_RATE
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


# -- absurd headers ---------------------------------------------------------------------------

def test_a_wav_claiming_2_hz_is_refused_not_decoded(tmp_path: Path) -> None:
    """A 40 KB WAV whose header says 2 Hz needed over 3.5 GB (ENOMEM): the resampler was
    asked for 8000x its samples."""
    path = tmp_path / "2hz.wav"
    path.write_bytes(wav_bytes(2, 1, frames=20_000))
    with pytest.raises(AudioDecodeError, match="sample rate of 2 Hz") as refused:
        open_audio(path)
    assert str(path) in str(refused.value)
    with pytest.raises(AudioDecodeError, match="sample rate"):
        transcribe_file(path, ScriptedRunner())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rate=st.one_of(st.integers(1, 4000), st.integers(4000, 2_000_000),
                      st.sampled_from([0, 2**31, 2**32 - 1])),
       channels=st.one_of(st.integers(1, 8), st.integers(9, 300)))
def test_any_wav_header_decodes_within_bounds_or_is_refused(tmp_path: Path, rate: int,
                                                            channels: int) -> None:
    path = tmp_path / "header.wav"
    path.write_bytes(wav_bytes(rate, channels, frames=400))
    sane = MIN_RATE <= rate <= MAX_RATE and channels <= MAX_CHANNELS
    try:
        samples = sum(len(piece) for piece in open_audio(path))
    except AudioDecodeError as refused:
        assert str(path) in str(refused)
        # A sane header may still hold too little to decode (400 frames at 290 kHz).
        assert not sane or "not a readable" in str(refused) or "no audio samples" in str(refused)
        return
    assert sane, (rate, channels)
    assert samples <= 400 * SAMPLE_RATE / MIN_RATE + SAMPLE_RATE  # at most 16x the frames


# -- decoding in pieces -----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["jfk-inaugural-1961-excerpt.flac",
                                  "long-ljspeech-LJ001-0001-0032.flac"])
def test_pieces_are_exactly_the_whole_decode(name: str) -> None:
    from faster_whisper.audio import decode_audio

    whole = decode_audio(str(AUDIO / name), sampling_rate=SAMPLE_RATE)
    reader = open_audio(AUDIO / name, piece_s=5.0)
    pieces = list(reader)
    assert np.array_equal(np.concatenate(pieces), whole)
    assert max(len(p) for p in pieces) <= 10 * SAMPLE_RATE  # a piece plus one decoded group
    assert reader.samples == len(whole)


def test_length_within_reads_ahead_only_that_far() -> None:
    reader = open_audio(AUDIO / "long-ljspeech-LJ001-0001-0032.flac", piece_s=5.0)
    assert reader.length_within(20.0) is None  # a 231 s file
    assert reader.samples <= 40 * SAMPLE_RATE
    assert sum(len(p) for p in reader) == reader.samples == len(
        load_audio(AUDIO / "long-ljspeech-LJ001-0001-0032.flac"))
    short = open_audio(AUDIO / "jfk-inaugural-1961-excerpt.flac")
    assert short.length_within(120.0) == len(load_audio(AUDIO / "jfk-inaugural-1961-excerpt.flac"))


# -- sections: the whole file's VAD and chunks -------------------------------------------------

def test_sections_give_the_whole_files_probabilities_and_chunks() -> None:
    audio = speech_with_pauses([0.3, 1.0, 2.5, 4.0, 0.2, 3.5] * 5)
    whole = speech_probabilities(audio, workers=2)
    chunks = plan_chunks(whole, len(audio), CHUNKING)
    pieces = [audio[i:i + 7 * SAMPLE_RATE] for i in range(0, len(audio), 7 * SAMPLE_RATE)]
    parts = list(sections(pieces, CHUNKING, workers=2, section_s=30, max_section_s=60))
    assert len(parts) >= 3 and parts[-1].last and not parts[0].last
    assert max(len(s.audio) for s in parts) <= 67 * SAMPLE_RATE  # a section plus a piece
    assert np.array_equal(np.concatenate([s.probs for s in parts]), whole)
    assert np.array_equal(np.concatenate([s.audio for s in parts]), audio)
    planned = [(c.start + s.start, c.end + s.start) for s in parts
               for c in plan_chunks(s.probs, len(s.audio), CHUNKING)]
    assert planned == [(c.start, c.end) for c in chunks]


runs = st.lists(st.tuples(st.booleans(), st.integers(1, 400)), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(runs=runs, after_windows=st.integers(0, 3000), noise=st.floats(0.0, 0.3))
def test_a_section_cut_never_changes_the_chunk_plan(
        runs: list[tuple[bool, int]], after_windows: int, noise: float) -> None:
    """Wherever `section_cut` ends a section (without force), planning the two sides apart
    gives the whole file's chunks: any speech/pause layout, any threshold-crossing noise."""
    rng = np.random.default_rng(len(runs))
    probs = np.concatenate([np.full(n, 0.9 if speech else 0.05, dtype=np.float32)
                            for speech, n in runs])
    probs = np.clip(probs + rng.uniform(-noise, noise, len(probs)), 0, 1).astype(np.float32)
    total = len(probs) * VAD_WINDOW
    cut = section_cut(probs, CHUNKING, after_windows * VAD_WINDOW, force=False)
    if cut is None:
        return
    assert cut % VAD_WINDOW == 0 and after_windows * VAD_WINDOW <= cut < total
    left = plan_chunks(probs[:cut // VAD_WINDOW], cut, CHUNKING)
    right = plan_chunks(probs[cut // VAD_WINDOW:], total - cut, CHUNKING)
    apart = [(c.start, c.end) for c in left] + [(c.start + cut, c.end + cut) for c in right]
    assert apart == [(c.start, c.end) for c in plan_chunks(probs, total, CHUNKING)]


def test_without_a_long_pause_a_section_is_cut_at_the_quietest_window_when_forced() -> None:
    probs = np.full(4000, 0.9, dtype=np.float32)
    probs[2995:3005] = 0.0  # a breath, far shorter than a long pause
    assert section_cut(probs, ChunkingOptions(), 0, force=False) is None
    assert section_cut(probs, ChunkingOptions(), 0, force=True) in range(2995 * VAD_WINDOW, 3005 * VAD_WINDOW)


# -- a long file end to end --------------------------------------------------------------------

def test_a_long_file_is_transcribed_in_bounded_memory(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """12 minutes (46 MB as float32, more than the bound below) in sections of 2-3 minutes:
    the run holds about a section, never the file. Before, the path was decoded whole first
    (the array, plus the decoder's s16 buffer and its float copy: over 200 MB traced for 30
    minutes)."""
    monkeypatch.setattr("engine.longform.sections.SECTION_S", 120.0)
    monkeypatch.setattr("engine.longform.sections.MAX_SECTION_S", 180.0)
    block = speech_with_pauses([3.0, 1.0, 2.5, 0.5])
    reps = int(12 * 60 * SAMPLE_RATE // len(block)) + 1
    path = write_flac(tmp_path / "long.flac", np.tile(block, reps))
    runner = ScriptedRunner(["one two three four"])
    tracemalloc.start()
    try:
        run = transcribe_file(path, runner, FileOptions(batch_size=8))
        events = list(run)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    segments = [e for e in events if isinstance(e, Segment)]
    progress = [e for e in events if isinstance(e, Progress)]
    assert run.info.duration == reps * len(block) and progress[-1].done == run.info.duration
    assert all(a.end <= b.start for a, b in zip(segments, segments[1:], strict=False))
    assert segments[-1].end > run.info.duration - 60 * SAMPLE_RATE  # text to the end
    assert peak < 40 * 2**20, f"{peak / 2**20:.0f} MB traced"
