"""`engine.files.transcribe_file`, the one entry point for files: segments come out final and in
file order while the file is still being decoded, and a cancel keeps a prefix of the result."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from engine.asr.fake import ScriptedTranscriber
from engine.audio.decode import load_audio
from engine.evaluation import error_rate
from engine.files import FileOptions, Progress, transcribe_file
from engine.types import SAMPLE_RATE, DecodeRequest, Segment, Transcript

# The shared corpus's long reading, cut to its first 90 s (about ten chunks): long enough for
# several waves, short enough for the test lane.
LONG_FILE = "long-ljspeech-LJ001-0001-0032.wav"
SECONDS = 90
RAMP = FileOptions(first_batch=1)  # as the app imports: waves of 1, 2, 4... chunks per stream


class _Scripted:
    """The scripted fake as a `Runner` (one stream, CPU)."""

    streams = 1
    device = "cpu"

    def __init__(self, texts: list[str]) -> None:
        self.fake = ScriptedTranscriber(texts)

    def decode_batch(self, requests: list[DecodeRequest]) -> list[Transcript]:
        return [self.fake.transcribe(r.audio, r.options) for r in requests]


@pytest.fixture(scope="module")
def runner():  # type: ignore[no-untyped-def]
    from engine.files import local_runner

    runner = local_runner("tiny.en", device="cpu")
    runner.load()
    return runner


@pytest.fixture(scope="module")
def audio(shared_audio) -> np.ndarray:  # type: ignore[no-untyped-def]
    return load_audio(shared_audio / LONG_FILE)[: SECONDS * SAMPLE_RATE]


def test_events_without_speech_are_progress_from_zero_to_the_end() -> None:
    run = transcribe_file(np.zeros(3 * SAMPLE_RATE, np.float32), _Scripted(["Thank you."]))
    assert list(run) == [Progress(0, 3 * SAMPLE_RATE), Progress(3 * SAMPLE_RATE, 3 * SAMPLE_RATE)]
    assert run.transcript().segments == () and run.info.chunks == 0
    with pytest.raises(RuntimeError):
        iter(run)  # a run is consumed once


def test_options_validate_the_batch_ramp() -> None:
    with pytest.raises(ValueError):
        FileOptions(first_batch=0)
    with pytest.raises(ValueError):
        FileOptions(batch_size=0)


@pytest.mark.model
def test_segments_arrive_in_order_before_the_file_is_done(runner, audio, manifest):  # type: ignore[no-untyped-def]
    total = len(audio)
    run = transcribe_file(audio, runner, RAMP)
    events = list(run)
    assert events[0] == Progress(0, total) and events[-1] == Progress(total, total)
    done = [e.done for e in events if isinstance(e, Progress)]
    assert done == sorted(done) and len(done) >= 4  # several waves reported
    first = next(i for i, e in enumerate(events) if isinstance(e, Segment))
    before = [e for e in events[:first] if isinstance(e, Progress)]
    after = [e for e in events[first:] if isinstance(e, Progress)]
    assert before[-1].done == 0 and after[0].done < total  # text while work remains
    segments = [e for e in events if isinstance(e, Segment)]
    # Each segment lies before the progress reported after it, in time order, as collected.
    for i, event in enumerate(events):
        if isinstance(event, Segment):
            later = next(e for e in events[i:] if isinstance(e, Progress))
            assert event.end <= later.done
    starts = [s.start for s in segments]
    assert starts == sorted(starts)
    transcript = run.transcript()
    assert list(transcript.segments) == segments and run.info.cancelled is False
    assert run.info.language == "en" and run.info.streams == runner.streams
    reference = next(e.text for e in manifest if e.path.name == LONG_FILE)
    words = reference.split()[: len(transcript.text.split())]
    assert error_rate([" ".join(words)], [transcript.text]) < 0.15, transcript.text


@pytest.mark.model
def test_cancel_mid_file_yields_a_prefix_of_the_full_result(runner, audio):  # type: ignore[no-untyped-def]
    full = transcribe_file(audio, runner, RAMP).transcript().segments
    cancel = threading.Event()
    run = transcribe_file(audio, runner, RAMP, cancel=cancel)
    segments: list[Segment] = []
    for event in run:
        if isinstance(event, Segment):
            segments.append(event)
            cancel.set()  # at the first text: the wave in flight is the last
    assert run.info.cancelled is True
    assert 0 < len(segments) < len(full)
    assert tuple(segments) == full[: len(segments)]
    assert run.transcript().segments == tuple(segments)
