"""The stream core on real speech (the JFK clip) with the real Silero VAD, decodes scripted:
windowing in any block size, offsets, push-to-talk controls at sample positions, and flushes
that keep the tail shorter than a window without padding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.core import drive as drive_core

from engine.audio.decode import load_audio
from engine.core.policy import Job, PolicyOptions
from engine.core.segmenter import SegmentEnded, SegmenterOptions, SegmentStarted
from engine.core.stream import LevelMeter, Segmentation, StreamCore, StreamOptions
from engine.events import Event, FinalText, LevelChanged, SpeechEnded, SpeechStarted
from engine.types import SAMPLE_RATE, VAD_WINDOW, Segment, Transcript
from engine.vad import load_scorer


def drive(core: StreamCore, audio: np.ndarray, block: int, text: str = "words.") -> list[Event]:
    """Feed ``audio`` in blocks (10 ms of clock per block), answer every job at once. The
    default text reads neither finished nor open (`StreamCore.on_result`), so the cuts are
    the VAD's alone, whatever the block size."""
    def answer(job: Job) -> Transcript:
        return Transcript(segments=(Segment(" " + text, 0, len(job.audio)),),
                          duration=len(job.audio))

    return drive_core(core, audio, answer, block=block, tick=0.01)


def spans(events: list[Event]) -> list[tuple[str, int]]:
    return [(type(e).__name__, e.at) for e in events if isinstance(e, (SpeechStarted,
                                                                        SpeechEnded))]


@pytest.fixture(scope="module")
def jfk(jfk_wav: Path) -> np.ndarray:
    return load_audio(jfk_wav)


def test_block_size_does_not_change_where_utterances_are_cut(jfk: np.ndarray) -> None:
    options = StreamOptions(policy=PolicyOptions(partials=False))
    whole = spans(drive(StreamCore(options, load_scorer()), jfk, len(jfk)))
    assert len(whole) >= 2
    for block in (100, 512, 1300, 4096):
        assert spans(drive(StreamCore(options, load_scorer()), jfk, block)) == whole, block


def test_an_offset_moves_every_position_and_a_flush_pads_nothing(jfk: np.ndarray) -> None:
    options = StreamOptions(policy=PolicyOptions(partials=False))
    audio = jfk[:3 * SAMPLE_RATE + 123]  # ends mid-window, mid-speech
    plain = drive(StreamCore(options, load_scorer()), audio, 1000)
    core = StreamCore(options, load_scorer(), offset=48_000)
    shifted = drive(core, audio, 1000)
    assert [(k, at + 48_000) for k, at in spans(plain)] == spans(shifted)
    assert core.position == 48_000 + len(audio)
    final = [e for e in shifted if isinstance(e, FinalText)][-1]
    assert final.end == 48_000 + len(audio)  # the unscored tail is the utterance's last audio


def test_push_to_talk_controls_act_at_their_sample(jfk: np.ndarray) -> None:
    segmentation = Segmentation(SegmenterOptions(mode="ptt"), scorer=None)
    segmentation.begin(at=SAMPLE_RATE)
    segmentation.end(at=2 * SAMPLE_RATE)
    events = segmentation.feed(jfk[:3 * SAMPLE_RATE])
    started = [e for e in events if isinstance(e, SegmentStarted)]
    ended = [e for e in events if isinstance(e, SegmentEnded)]
    assert len(started) == len(ended) == 1
    options = SegmenterOptions()
    ring = (options.windows(options.preroll_ms) + options.start_windows) * VAD_WINDOW
    before = SAMPLE_RATE // VAD_WINDOW * VAD_WINDOW  # the press acts at its window's start
    assert started[0].start == before - ring
    assert ended[0].end == 2 * SAMPLE_RATE // VAD_WINDOW * VAD_WINDOW
    assert not segmentation.active and segmentation.flush() == []


def test_levels_come_once_per_interval() -> None:
    meter = LevelMeter(100)
    loud = np.full(800, 0.5, dtype=np.float32)
    events = [e for _ in range(4) for e in meter.feed(loud)]  # 200 ms
    assert len(events) == 2 and all(isinstance(e, LevelChanged) for e in events)
    assert events[0].rms_db == pytest.approx(-6.02, abs=0.01)
    assert LevelMeter(0).feed(loud) == []


def test_options_are_validated() -> None:
    with pytest.raises(ValueError):
        StreamOptions(mode="always")
    with pytest.raises(ValueError):
        StreamOptions(level_interval_ms=-1)
