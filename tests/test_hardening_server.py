"""One client cannot blank the others (issue 30, case 1 and 9): a real `sottovoce serve --model
base` on 127.0.0.1, one client sending every kind of bad session option in both protocols while
another streams the JFK sample; and the scheduler's batch retry on the real model.

Before: a session with ``language: "zz"`` (ours) or ``{"language": "qq"}`` (WhisperLive's) was
accepted; every batch holding its request failed (``ValueError`` from the tokenizer), so the
English client got empty finals and neither was told. A WhisperLive ``audio_format`` list gave a
``TypeError`` traceback and close 1008 "internal server error".
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.servers import free_port

from engine.audio.sources import FileSource
from engine.events import EngineFailed, Event, FinalText
from engine.remote.client import RemoteLiveEngine, RemoteOptions

pytestmark = [pytest.mark.model, pytest.mark.timeout(600)]
REPO = Path(__file__).resolve().parents[1]

# Each is the first frame of its own connection; every one must be refused, alone.
NATIVE = {"protocol": 1, "type": "hello", "session_id": "bad", "sample_rate": 16000}
BAD_NATIVE: list[tuple[dict[str, Any], str]] = [
    ({"language": "zz"}, "bad_message"),  # letters, but no language the model knows
    ({"language": "qq"}, "bad_message"),
    ({"language": "e1"}, "bad_message"),
    ({"language": 5}, "bad_message"),
    ({"language": ["en"]}, "bad_message"),
    ({"protocol": 2}, "unsupported_version"),
    ({"sample_rate": 8000}, "bad_message"),
    ({"sample_rate": "16000"}, "bad_message"),
    ({"offset": -1}, "bad_message"),
    ({"offset": True}, "bad_message"),
    ({"prompt": "x" * 2000}, "bad_message"),
    ({"prompt": {"text": "x"}}, "bad_message"),
    ({"vocabulary": "Kubernetes"}, "bad_message"),
    ({"vocabulary": [1, 2]}, "bad_message"),
    ({"vocabulary": ["term"] * 0 + [f"t{i}" for i in range(300)]}, "bad_message"),
    ({"options": []}, "bad_message"),
    ({"session_id": "s" * 500}, "bad_message"),
    ({"session_id": None}, "bad_message"),
]
BAD_WHISPERLIVE: list[dict[str, Any]] = [
    {"language": "qq"},
    {"language": "zz"},
    {"language": 7},
    {"audio_format": ["x"]},
    {"audio_format": "float64"},
    {"audio_format": {"x": 1}},
    {"task": ["transcribe"]},
    {"model": [1]},
    {"uid": 5},
    {"uid": ""},
    {"send_last_n_segments": "ten"},
    {"no_speech_thresh": [0.5]},
    {"same_output_threshold": None, "vad_parameters": "strict"},
    {"vad_parameters": {"threshold": "high"}},
    {"vad_parameters": {"min_silence_duration_ms": [1]}},
    {"hotwords": 5},
    {"initial_prompt": {"a": 1}},
]


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """`sottovoce serve --model base` as a user starts it; its log in a file."""
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--model", "base", "--port", str(port),
             "--idle-timeout", "30"], cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    line = proc.stdout.readline()  # once the model is loaded and the port bound
    assert line.startswith("listening"), line + log.read_text()
    yield port, log
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


def english_finals(port: int, clip: Path) -> tuple[list[str], list[Event]]:
    events: list[Event] = []
    lock = threading.Lock()

    def sink(event: Event) -> None:
        with lock:
            events.append(event)

    engine = RemoteLiveEngine(sink, url=f"ws://127.0.0.1:{port}",
                              source=FileSource(clip, realtime=False),
                              options=RemoteOptions(language="en"))
    engine.start()
    assert engine.wait(240), "the English client did not finish"
    return [e.text for e in events if isinstance(e, FinalText)], events


def first_replies(port: int, frame: str) -> tuple[list[Any], int | None]:
    """The replies to one first frame, up to the close, and the close code."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    replies: list[Any] = []
    with connect(f"ws://127.0.0.1:{port}", open_timeout=20) as ws:
        ws.send(frame)
        try:
            while True:
                replies.append(json.loads(ws.recv(timeout=30)))
        except ConnectionClosed as closed:
            return replies, closed.rcvd.code if closed.rcvd else None


def test_one_clients_bad_options_leave_the_other_clients_finals_exact(
        serve: tuple[int, Path], jfk_wav: Path, manifest) -> None:  # type: ignore[no-untyped-def]
    """An English client alone (its finals read the clip, by WER), then again while another
    client sends every bad option: the same finals exactly (the run alone is the oracle),
    each bad option refused with its code and a clear message, no traceback in the log."""
    from bench.evaluation import error_rate

    port, log = serve
    alone, _ = english_finals(port, jfk_wav)
    said = next(e.text for e in manifest if e.path.name == jfk_wav.name)
    assert error_rate([said], [" ".join(alone)]) <= 0.25, alone

    refused: list[tuple[str, Any, int | None]] = []

    def hostile() -> None:  # while the English client streams
        for fields, _code in BAD_NATIVE:
            replies, close = first_replies(port, json.dumps({**NATIVE, **fields}))
            refused.append(("native", replies, close))
        for options in BAD_WHISPERLIVE:
            replies, close = first_replies(port, json.dumps({"uid": "wl", **options}))
            refused.append(("whisperlive", replies, close))

    attacker = threading.Thread(target=hostile)
    attacker.start()
    together, events = english_finals(port, jfk_wav)
    attacker.join(240)
    assert not attacker.is_alive()

    assert together == alone  # exactly the same finals, none blanked
    assert not [e for e in events if isinstance(e, EngineFailed)]
    assert len(refused) == len(BAD_NATIVE) + len(BAD_WHISPERLIVE)
    for (kind, replies, close), expected in zip(
            refused, [c for _, c in BAD_NATIVE] + ["ERROR"] * len(BAD_WHISPERLIVE), strict=True):
        assert close == 1008, (kind, replies)
        [reply] = replies
        if kind == "native":
            assert reply["type"] == "error" and reply["code"] == expected, reply
        else:
            assert reply["status"] == "ERROR" and "internal" not in reply["message"], reply
    messages = [r[1][0].get("message", "") for r in refused]
    assert messages[0] == ("language 'zz' is not one the model 'base' knows: send an ISO 639-1 "
                           "code such as \"en\", \"de\" or \"fr\", or null to detect it")
    assert "language 'qq' is not one the model 'base' knows" in messages[len(BAD_NATIVE)]
    assert "audio_format" in messages[len(BAD_NATIVE) + 3]
    text = log.read_text()
    assert "Traceback" not in text and "batch of" not in text, text[-3000:]


def test_a_failed_batch_is_decoded_request_by_request(jfk_wav: Path) -> None:
    """The scheduler's own guard, for runners that cannot say which languages they take: a
    request the model refuses fails alone; the request batched with it gets its text."""
    from engine.asr.ct2_decoder import Ct2Runner
    from engine.audio.decode import load_audio
    from engine.errors import TranscriptionError
    from engine.server.scheduler import BatchScheduler, SchedulerOptions
    from engine.types import DecodeOptions, DecodeRequest

    runner = Ct2Runner("base")
    runner.load()
    audio = np.ascontiguousarray(load_audio(jfk_wav)[: 16_000 * 5])
    good = DecodeRequest(audio, DecodeOptions(language="en", beam_size=1))
    bad = DecodeRequest(audio, DecodeOptions(language="zz", beam_size=1))
    [alone] = runner.decode_batch([good])
    scheduler = BatchScheduler(runner, SchedulerOptions(window_ms=500.0))
    scheduler.start()

    async def both() -> list[Any]:
        tickets = [scheduler.submit(bad, urgent=True), scheduler.submit(good, urgent=True)]
        return await asyncio.gather(*(t.future for t in tickets), return_exceptions=True)

    try:
        failed, decoded = asyncio.run(both())
    finally:
        scheduler.stop()
    assert isinstance(failed, TranscriptionError) and "zz" in str(failed)
    assert decoded.text == alone.text and alone.text.strip()  # the same as decoded alone
    assert scheduler.stats.errors == 1 and scheduler.stats.batches == 1
