"""WhisperLive compatibility: the wire format (sans-I/O, always run) and our client against the
REAL `whisper-live` server from PyPI on 127.0.0.1, faster-whisper backend, local tiny.en model.

The server runs from a separate venv (.venv-whisperlive, built by .ci/whisperlive-venv.sh) so its
dependencies (torch...) never enter the app's environment. Tests marked ``whisperlive`` skip,
with the reason, when that venv cannot be built.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support.servers import free_port, venv_python

from bench.evaluation import ManifestEntry, error_rate
from engine.audio.sources import FileSource
from engine.events import EngineFailed, Event, FinalText, StateChanged
from engine.remote.client import Endpoint, RemoteLiveEngine, RemoteOptions
from engine.wire import whisperlive_protocol as wl
from engine.wire.protocol import ProtocolViolation

REPO = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("SOTTOVOCE_WHISPERLIVE_VENV", REPO / ".venv-whisperlive"))


# -- wire format, sans-I/O ---------------------------------------------------------------


def test_options_audio_and_end_frames() -> None:
    conn = wl.WhisperLiveConnection("u1")
    first = json.loads(conn.options(language="en", model="tiny.en", use_vad=False,
                                    send_last_n_segments=5))
    assert first == {"uid": "u1", "language": "en", "task": "transcribe", "model": "tiny.en",
                     "use_vad": False, "send_last_n_segments": 5}
    samples = np.array([0.0, 0.5, -1.0], dtype=np.float32)
    assert np.array_equal(np.frombuffer(conn.audio(samples), dtype="<f4"), samples)
    assert conn.end() == b"END_OF_AUDIO" and conn.state == "ended"


@pytest.mark.parametrize("frame,expected", [
    ('{"uid": "u1", "message": "SERVER_READY", "backend": "faster_whisper"}',
     wl.WlReady("faster_whisper")),
    ('{"uid": "u1", "status": "WAIT", "message": 2.5}', wl.WlWait(2.5)),
    ('{"uid": "u1", "status": "WAIT", "message": "soon"}', wl.WlWait(0.0)),
    ('{"uid": "u1", "status": "WARNING", "message": "reverting"}',
     wl.WlStatus("WARNING", "reverting")),
    ('{"uid": "u1", "language": "de", "language_prob": 0.9}', wl.WlLanguage("de", 0.9)),
    ('{"uid": "u1", "segments": [{"start": "0.000", "end": "1.500", "text": " Hi",'
     ' "completed": true}, {"text": " there"}]}',
     wl.WlSegments((wl.WlSegment(" Hi", 0.0, 1.5, True), wl.WlSegment(" there", None, None,
                                                                        None)))),
    ('{"uid": "u1", "segments": [" text only"]}',
     wl.WlSegments((wl.WlSegment(" text only", None, None, None),))),
])
def test_server_messages_parse(frame: str, expected: wl.WlMessage) -> None:
    conn = wl.WhisperLiveConnection("u1")
    conn.options(language=None, model="m")
    assert conn.receive_text(frame) == [expected]


def test_state_transitions_and_ignored_messages() -> None:
    conn = wl.WhisperLiveConnection("u1")
    conn.options(language=None, model="m")
    assert conn.receive_text('{"uid": "other", "message": "SERVER_READY"}') == []
    assert conn.receive_text('{"uid": "u1", "translated_segments": []}') == []
    conn.receive_text('{"uid": "u1", "message": "SERVER_READY", "backend": "x"}')
    assert conn.state == "ready"
    conn.receive_text('{"uid": "u1", "message": "DISCONNECT"}')
    assert conn.state == "closed"
    assert conn.receive_text('{"uid": "u1", "segments": []}') == []
    failed = wl.WhisperLiveConnection("u1")
    failed.receive_text('{"uid": "u1", "status": "ERROR", "message": "no model"}')
    assert failed.state == "failed"


@pytest.mark.parametrize("frame", [
    "nope", "[]", '{"uid": "u1", "segments": {}}', '{"uid": "u1", "segments": [5]}',
    '{"uid": "u1", "segments": [{"text": "a", "start": "x"}]}',
    '{"uid": "u1", "segments": [{"text": "a", "start": -1}]}',
    '{"uid": "u1", "segments": [{"text": "a", "completed": "yes"}]}',
    '{"uid": "u1", "segments": [{"text": 7}]}',
])
def test_malformed_replies_are_violations(frame: str) -> None:
    conn = wl.WhisperLiveConnection("u1")
    [violation] = conn.receive_text(frame)
    assert isinstance(violation, ProtocolViolation) and conn.state == "failed"


def test_tracker_emits_each_completed_segment_once() -> None:
    tracker = wl.SegmentTracker(offset=16_000)
    seg = wl.WlSegment
    finals, partial = tracker.update((seg(" Hello", 0.0, 1.0, False),))
    assert finals == [] and partial == wl.TrackedPartial("Hello", 16_000, 32_000)
    finals, partial = tracker.update((seg(" Hello there.", 0.0, 1.2, True),
                                      seg(" How", 1.2, 1.5, False)))
    assert finals == [wl.TrackedFinal("Hello there.", 16_000, 35_200)]
    finals, _ = tracker.update((seg(" Hello there.", 0.0, 1.2, True),
                                seg(" How are you", 1.2, 2.0, False)))
    assert finals == []  # repeated completed segment
    assert tracker.finish() == wl.TrackedFinal("How are you", 35_200, 48_000)
    assert tracker.finish() is None
    text_only = wl.SegmentTracker()
    text_only.update((seg("words", None, None, None),))
    final = text_only.finish()
    assert final is not None and final.text == "words"


def test_whisperlive_urls() -> None:
    assert Endpoint.parse("whisperlive://10.0.0.2:9090") == Endpoint("whisperlive",
                                                                     "ws://10.0.0.2:9090/")
    assert Endpoint.parse("wss://host/x").kind == "native"
    with pytest.raises(Exception, match="unsupported"):
        Endpoint.parse("http://host")


# -- against the real WhisperLive server ------------------------------------------------------


def start_whisperlive(python: Path, port: int, max_clients: int = 4) -> subprocess.Popen[bytes]:
    from engine.models import resolve_model

    model_dir = str(resolve_model("tiny.en").path)
    code = ("from whisper_live.server import TranscriptionServer; TranscriptionServer().run("
            f"'127.0.0.1', {port}, backend='faster_whisper', "
            f"faster_whisper_custom_model_path={model_dir!r}, single_model=True, "
            f"max_clients={max_clients})")
    proc = subprocess.Popen([str(python), "-c", code], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"WhisperLive server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            time.sleep(0.2)  # waiting for another process to bind; no event to wait on
    proc.kill()
    pytest.fail("WhisperLive server did not start within 120 s")


@pytest.fixture(scope="module")
def whisperlive() -> Iterator[int]:
    python = venv_python()
    port = free_port()
    proc = start_whisperlive(python, port, max_clients=1)
    yield port
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.mark.whisperlive
@pytest.mark.timeout(300)
def test_client_transcribes_through_real_whisperlive(whisperlive: int,
                                                     manifest: list[ManifestEntry]) -> None:
    clip = next(e for e in manifest if e.path.name == "jfk-inaugural-1961-excerpt.wav")
    events: list[Event] = []
    lock = threading.Lock()

    def sink(event: Event) -> None:
        with lock:
            events.append(event)

    engine = RemoteLiveEngine(sink, url=f"whisperlive://127.0.0.1:{whisperlive}",
                              source=FileSource(clip.path),
                              options=RemoteOptions(language="en"))
    engine.start()
    assert engine.wait(240)
    assert not [e for e in events if isinstance(e, EngineFailed)]
    finals = [e for e in events if isinstance(e, FinalText)]
    text = " ".join(f.text for f in finals)
    assert error_rate([clip.text], [text]) < 0.3, text
    assert all(b.start >= a.start for a, b in zip(finals, finals[1:], strict=False))
    assert finals[-1].end <= int(clip.duration_s * 16_000) + 16_000
    assert any(isinstance(e, StateChanged) and "WhisperLive" in e.detail for e in events)


@pytest.mark.whisperlive
@pytest.mark.timeout(120)
def test_full_whisperlive_answers_wait(whisperlive: int) -> None:
    """max_clients=1: with one client connected, the next gets WAIT, which we parse."""
    from websockets.sync.client import connect

    with connect(f"ws://127.0.0.1:{whisperlive}") as first:
        first_conn = wl.WhisperLiveConnection("first")
        first.send(first_conn.options(language="en", model="tiny.en"))
        ready = first_conn.receive_text(str(first.recv(timeout=60)))
        assert ready and isinstance(ready[0], wl.WlReady)
        with connect(f"ws://127.0.0.1:{whisperlive}") as second:
            conn = wl.WhisperLiveConnection("second")
            second.send(conn.options(language="en", model="tiny.en"))
            [message] = conn.receive_text(str(second.recv(timeout=30)))
            assert isinstance(message, wl.WlWait) and message.minutes >= 0
        first.send(first_conn.end())


if __name__ == "__main__":  # pragma: no cover - manual: python tests/test_whisperlive.py
    sys.exit(pytest.main([__file__, "-v"]))
