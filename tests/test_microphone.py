"""MicrophoneSource on a real PulseAudio virtual microphone (a null sink's monitor), and the
errors a missing or silent device gives.

Each test that records gets its own null sink, so parallel tests playing into the shared
``vspk`` cannot leak into it; libpulse's PULSE_SOURCE points the "pulse" ALSA device at it.
Skipped (with the reason printed) only when no PulseAudio server is reachable; .ci/desktop.sh
starts one.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from support.pulse import play

from engine.audio.decode import load_audio
from engine.audio.sources import MicrophoneSource, resolve_input_device
from engine.errors import AudioDeviceError
from engine.events import EngineFailed, Event, FinalText, StateChanged
from engine.live import LiveOptions, LocalLiveEngine

GO_FORWARD = "cmusphinx-goforward.wav"


def envelope(audio: np.ndarray, hop: int = 800) -> np.ndarray:
    return np.array([np.abs(audio[i:i + hop]).mean() for i in range(0, len(audio) - hop, hop)])


def test_records_what_is_played(virtual_mic: str, shared_audio: Path) -> None:
    wav = shared_audio / GO_FORWARD
    reference = load_audio(wav)
    source = MicrophoneSource("pulse")
    source.start()
    player = play(virtual_mic, wav)
    chunks = []
    deadline, give_up = None, time.monotonic() + 60
    # Record until the player is done (plus what is still in the pipes), however slow it ran.
    while deadline is None or time.monotonic() < deadline:
        block = source.read(0.5)
        if block is not None:
            chunks.append(block)
        if deadline is None and player.poll() is not None:
            deadline = time.monotonic() + 0.7
        assert time.monotonic() < give_up, "paplay never finished"
    source.stop()
    while (block := source.read(0.1)) is not None:  # blocks captured before stop() still count
        chunks.append(block)
    assert source.finished
    assert player.wait(timeout=10) == 0
    recorded = np.concatenate(chunks)
    assert source.position == len(recorded) and source.dropped == 0
    # The device runs at its own rate (44.1/48 kHz); what comes out is 16 kHz speech that
    # follows the file's loudness contour.
    rec_env, ref_env = envelope(recorded), envelope(reference)
    rec_env = np.pad(rec_env, (0, max(0, len(ref_env) - len(rec_env))))
    lag = int(np.argmax(np.correlate(rec_env, ref_env, "valid")))
    corr = np.corrcoef(rec_env[lag:lag + len(ref_env)], ref_env)[0, 1]
    print("envelope correlation", corr, float(np.abs(recorded).max()))
    assert corr > 0.75  # measured 0.85-0.95: block-level alignment is coarse
    assert abs(float(np.abs(recorded).max()) - float(np.abs(reference).max())) < 0.05


def test_live_engine_through_the_virtual_mic(virtual_mic: str, shared_audio: Path, manifest,
                                             tiny_transcriber) -> None:  # type: ignore[no-untyped-def]
    """The live engine on the virtual microphone: a played clip comes out as finals that read
    it (WER against its reference, 2 words of 4 as margin)."""
    from bench.evaluation import error_rate

    events: queue.Queue[Event] = queue.Queue()
    engine = LocalLiveEngine(events.put, source=MicrophoneSource("pulse"),
                             runner=tiny_transcriber, options=LiveOptions(journal=False))
    engine.start()
    while (event := events.get(timeout=60)) != StateChanged("listening"):
        assert not isinstance(event, EngineFailed), event
    player = play(virtual_mic, shared_audio / GO_FORWARD)
    heard: list[Event] = []
    while not any(isinstance(e, FinalText) and e.text for e in heard):  # the first final
        heard.append(events.get(timeout=60))  # (the timeout only bounds a hang)
        assert not isinstance(heard[-1], EngineFailed), heard[-1]
    assert player.wait(timeout=60) == 0
    engine.stop()  # (what is still open is flushed)
    assert engine.wait(timeout=60)
    while not events.empty():
        heard.append(events.get_nowait())
    text = " ".join(e.text for e in heard if isinstance(e, FinalText) and e.text)
    said = next(e.text for e in manifest if e.path.name == GO_FORWARD)
    assert error_rate([said], [text]) <= 0.5, text


def test_a_bad_device_name_is_a_clear_error() -> None:
    with pytest.raises(AudioDeviceError, match="no-such-microphone|no audio input device|PortAudio"):
        MicrophoneSource("no-such-microphone").start()


def test_a_bad_device_stops_the_engine_with_an_error_not_a_hang(tiny_transcriber) -> None:  # type: ignore[no-untyped-def]
    events: list[Event] = []
    engine = LocalLiveEngine(events.append, source=MicrophoneSource("no-such-microphone"),
                             runner=tiny_transcriber, options=LiveOptions(journal=False))
    engine.start()
    assert engine.wait(timeout=60)
    failures = [e for e in events if isinstance(e, EngineFailed)]
    assert len(failures) == 1 and not failures[0].recoverable
    assert events[-1] == StateChanged("stopped")


def test_device_by_index(virtual_mic: str) -> None:
    index, name, rate = resolve_input_device("pulse")
    assert resolve_input_device(index) == (index, name, rate)
    assert resolve_input_device(str(index))[0] == index
    assert resolve_input_device(None)[0] >= 0


def test_overflow_drops_the_oldest_block_and_counts_it() -> None:
    source = MicrophoneSource(block_ms=10, max_queue_s=0.02)  # room for 2 blocks
    source._queue = queue.Queue(maxsize=2)
    for value in (1.0, 2.0, 3.0):
        source._callback(np.full((160, 1), value, dtype=np.float32), 160, None, None)
    assert source.dropped == 160
    # What was dropped never reaches `position`, so `captured` (the push-to-talk clock) leaves
    # it out too; otherwise press/release boundaries would land late after every overflow.
    assert source.captured == 2 * 160
    assert [source._queue.get_nowait()[1][0] for _ in range(2)] == [2.0, 3.0]  # (resampler, block)


def test_a_silent_device_is_an_error_not_a_hang() -> None:
    source = MicrophoneSource(stall_timeout_s=0.05)
    source.device_name = "test"
    source._last_block_at = time.monotonic() - 1.0
    with pytest.raises(AudioDeviceError, match="no audio from input device"):
        source.read(0.01)
    source._last_block_at = time.monotonic()
    source._on_finished()  # PortAudio ended the stream without stop(): unplugged
    with pytest.raises(AudioDeviceError, match="stopped delivering"):
        source.read(0.01)
    source.stop()
    assert source.read(0.01) is None and source.finished


def gil_holder(at_least_s: float) -> Callable[[], tuple[float, float]]:
    """A call that holds the GIL for at least at_least_s in one piece, as a blocking Qt call
    does (a clipboard read waiting out a hung owner, say): list.sort never lets it go. The list
    is built beforehand (that part lets other threads in). The call returns how long it held and
    when it let go."""
    # Sized by the fastest of three timed sorts: a busy machine that pauses this process only
    # makes a sort look slower, so the fastest is the nearest to what the list costs (and a
    # pause in the stall itself only makes it longer).
    per_item = float("inf")
    for seed in (1, 3, 4):
        sample = np.random.default_rng(seed).random(1_000_000).tolist()
        started = time.monotonic()
        sample.sort()
        per_item = min(per_item, (time.monotonic() - started) / len(sample))
    data = np.random.default_rng(2).random(int(1.5 * at_least_s / per_item)).tolist()

    def hold() -> tuple[float, float]:
        started = time.monotonic()
        data.sort()
        ended = time.monotonic()  # (taken at once: a busy machine may pause this thread after)
        return ended - started, ended
    return hold


def read_until_failure(source: MicrophoneSource, done: threading.Event,
                       failures: list[tuple[float, AudioDeviceError]], got: list[int]) -> None:
    try:
        while not done.is_set():
            block = source.read(0.05)
            if block is not None:
                got.append(len(block))
    except AudioDeviceError as exc:
        failures.append((time.monotonic(), exc))


def test_a_stall_of_the_whole_process_is_not_blamed_on_the_device() -> None:
    # A device that delivers nothing: the error must come one grace period after the stall
    # ends, not at once (the stall alone is longer than the grace period).
    source = MicrophoneSource(stall_timeout_s=0.3)
    source.device_name = "test"
    hold = gil_holder(0.6)
    source._last_block_at = time.monotonic()
    done, failures, got = threading.Event(), [], []
    reader = threading.Thread(target=read_until_failure, args=(source, done, failures, got))
    reader.start()
    time.sleep(0.1)
    held, stall_ended = hold()
    assert held >= 0.6
    reader.join(10)
    done.set()
    assert failures, "a silent device must still fail after the stall"
    failed_at, error = failures[0]
    assert "no audio from input device" in str(error)
    assert failed_at - stall_ended >= 0.25, f"failed {failed_at - stall_ended:.2f} s after a {held:.2f} s stall"


def test_the_microphone_survives_a_stall_of_the_whole_process(virtual_mic: str) -> None:
    hold = gil_holder(1.5)
    source = MicrophoneSource("pulse", stall_timeout_s=1.0)  # room for the stream's start
    source.start()
    done, failures, got = threading.Event(), [], []
    reader = threading.Thread(target=read_until_failure, args=(source, done, failures, got))
    reader.start()
    try:
        time.sleep(0.5)
        assert hold()[0] >= 1.5
        before = sum(got)
        # Audio keeps coming after the stall: half a second of it, however late (the deadline
        # only bounds a hang); the reader never failed meanwhile.
        deadline = time.monotonic() + 30
        while sum(got) - before < 0.5 * 16000 and not failures:
            assert time.monotonic() < deadline, "audio must keep coming after the stall"
            time.sleep(0.05)
        assert not failures, failures
    finally:
        done.set()
        reader.join(10)
        source.stop()


def test_reads_are_thread_safe_with_the_callback() -> None:
    source = MicrophoneSource(block_ms=10, max_queue_s=10)
    source._queue = queue.Queue(maxsize=1000)
    from engine.audio.resample import StreamResampler

    source._resampler = StreamResampler(16000)
    feeder = threading.Thread(target=lambda: [
        source._callback(np.zeros((160, 1), np.float32), 160, None, None) for _ in range(200)])
    feeder.start()
    got = 0
    while got < 200 * 160:
        block = source.read(1.0)
        assert block is not None
        got += len(block)
    feeder.join()
    assert source.position == got and source.captured == got
