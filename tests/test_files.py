"""`engine.files.transcribe_file`, the one entry point for files: segments come out final and in
file order while the file is still being decoded, and a cancel keeps a prefix of the result."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from bench.evaluation import error_rate
from engine.asr.fake import ScriptedRunner
from engine.audio.decode import load_audio
from engine.files import FileOptions, Progress, transcribe_file
from engine.types import SAMPLE_RATE, DecodeRequest, Segment, Transcript

# The shared corpus's long reading, cut to its first 150 s: long enough for several waves,
# short enough for the test lane.
LONG_FILE = "long-ljspeech-LJ001-0001-0032.wav"
SECONDS = 150  # 7 chunks of 18-24 s: waves of 1, 2 and 4 chunks on two streams
RAMP = FileOptions(first_batch=1)  # as the app imports: waves of 1, 2, 4... chunks per stream


class _Scripted:
    """The scripted fake as a `Runner` (one stream, CPU)."""

    streams = 1
    device = "cpu"

    def __init__(self, texts: list[str]) -> None:
        self.fake = ScriptedRunner(texts)

    def decode_batch(self, requests: list[DecodeRequest]) -> list[Transcript]:
        return self.fake.decode_batch(requests)


@pytest.fixture(scope="module")
def runner():  # type: ignore[no-untyped-def]
    from engine.asr import local_runner

    runner = local_runner("tiny.en", "cpu", files=True)
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


@pytest.fixture(scope="module")
def full_run(runner, audio):  # type: ignore[no-untyped-def]
    """The cut reading through the app's ramp of waves, once for the module: its events and the
    run (decoding it takes most of this module's time)."""
    run = transcribe_file(audio, runner, RAMP)
    return list(run), run


def test_options_validate_the_batch_ramp() -> None:
    with pytest.raises(ValueError):
        FileOptions(first_batch=0)
    with pytest.raises(ValueError):
        FileOptions(batch_size=0)


@pytest.mark.model
def test_segments_arrive_in_order_before_the_file_is_done(runner, audio, manifest, full_run):  # type: ignore[no-untyped-def]
    total = len(audio)
    events, run = full_run
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
def test_cancel_mid_file_yields_a_prefix_of_the_full_result(runner, audio, full_run):  # type: ignore[no-untyped-def]
    full = full_run[1].transcript().segments
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


class _Loop:
    """A stand-in for faster-whisper's own loop: scripted segments on the file's timeline."""

    def __init__(self, segments: list[Segment]) -> None:
        self.segments = segments

    def iter_segments(self, audio, options):  # type: ignore[no-untyped-def]
        return iter(self.segments), "en"


def test_short_files_go_to_the_sequential_loop_with_its_silence_rule_and_cancel() -> None:
    speech = np.sin(np.arange(4 * SAMPLE_RATE) / 10).astype(np.float32) * 0.3
    audio = np.concatenate([speech, np.zeros(2 * SAMPLE_RATE, np.float32), speech])
    loop = _Loop([Segment(" Hello.", 0, 4 * SAMPLE_RATE),
                  # Whisper's "Thank you." over digital silence: dropped.
                  Segment(" Thank you.", 4 * SAMPLE_RATE, 6 * SAMPLE_RATE, no_speech_prob=0.9),
                  Segment(" Again.", 6 * SAMPLE_RATE, 10 * SAMPLE_RATE)])
    run = transcribe_file(audio, _Scripted([]), FileOptions(), sequential=loop)
    events = list(run)
    assert [e.text for e in events if isinstance(e, Segment)] == [" Hello.", " Again."]
    assert events[-1] == Progress(len(audio), len(audio))
    transcript = run.transcript()
    assert transcript.extra["engine"] == "sequential"
    assert transcript.extra["dropped_silent_segments"] == 1
    # Over sequential_below_s: the pipeline, not the loop (the scripted runner answers).
    long_run = transcribe_file(audio, _Scripted(["piped."]), FileOptions(sequential_below_s=5),
                               sequential=loop)
    assert long_run.transcript().extra["engine"] == "longform"
    cancel = threading.Event()
    cancelled = transcribe_file(audio, _Scripted([]), sequential=loop, cancel=cancel)
    for event in cancelled:
        if isinstance(event, Segment):
            cancel.set()
    assert cancelled.info.cancelled and [s.text for s in cancelled.transcript().segments] == [
        " Hello."]


class _OneSlowStream:
    """A real two-stream runner whose first call on the calling thread is held until the other
    stream has decoded ``hold_until`` pieces (a stream that drew a chunk far harder than the
    rest; at most a minute, so a runner that never shares out fails rather than hangs); records
    who decoded how many requests per call. (A fixed one-second hold made the test depend on
    the other stream's speed: on a busy 2-core machine it took only 3 pieces meanwhile.)"""

    streams = 2
    device = "cpu"

    def __init__(self, inner, slow: int, hold_until: int) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.slow = slow
        self.hold_until = hold_until
        self.calls: list[tuple[int, int]] = []
        self.done_by_others = 0
        self._progress = threading.Condition()

    def decode_batch(self, requests: list[DecodeRequest]) -> list[Transcript]:
        me = threading.get_ident()
        with self._progress:
            self.calls.append((me, len(requests)))
        if me == self.slow:
            with self._progress:
                self._progress.wait_for(lambda: self.done_by_others >= self.hold_until, 60.0)
            return self.inner.decode_batch(requests)
        result = self.inner.decode_batch(requests)
        with self._progress:
            self.done_by_others += 1
            self._progress.notify_all()
        return result


@pytest.mark.model
def test_a_waves_batches_are_shared_out_so_a_slow_stream_does_not_hold_the_other(
        runner, audio):  # type: ignore[no-untyped-def]
    """`decode_shared`: the streams take the wave's pieces as they come free; the results are
    in batch order and the same as each batch decoded whole."""
    from concurrent.futures import ThreadPoolExecutor

    from engine.files import decode_shared

    spans = [audio[i * 5 * SAMPLE_RATE:(i + 1) * 5 * SAMPLE_RATE] for i in range(8)]
    batches = [[DecodeRequest(a, tag=i) for i, a in enumerate(spans[:4])],
               [DecodeRequest(a, tag=i) for i, a in enumerate(spans[4:], 4)]]
    # This thread's first piece is held until the other stream has decoded 6 of the other 7.
    slow = _OneSlowStream(runner, threading.get_ident(), hold_until=6)
    with ThreadPoolExecutor(1) as pool:
        shared = decode_shared(slow, batches, pool, streams=2, piece=1)
    assert all(n == 1 for _, n in slow.calls) and len(slow.calls) == 8
    mine = sum(1 for who, _ in slow.calls if who == slow.slow)
    assert mine <= 2, slow.calls  # the other stream took the rest while this one was held
    whole = [runner.decode_batch(batch) for batch in batches]
    assert [[t.text for t in b] for b in shared] == [[t.text for t in b] for b in whole]
    assert all(t.text.strip() for b in shared for t in b)
