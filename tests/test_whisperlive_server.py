"""`sottovoce serve` speaks WhisperLive's protocol too (issue 18).

Fast lane: the sans-I/O server side (`engine.wire.whisperlive_server`) and a real loopback
server with a scripted runner and the energy VAD, driven with WhisperLive's frames.
Model lane (``whisperlive``): WhisperLive 0.10's own `TranscriptionClient`, unmodified, from the
WhisperLive venv (tests/whisperlive_client/run_client.py; PyAudio replaced by a stand-in since
files are streamed muted), against `sottovoce serve` on tiny.en; and WhisperLive and native
clients at once on one server.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from bench.evaluation import ManifestEntry, error_rate
from engine.asr.fake import ScriptedRunner
from engine.audio.sources import FileSource
from engine.core.voice import EnergyVad
from engine.events import Event, FinalText
from engine.remote.client import RemoteLiveEngine, RemoteOptions
from engine.server.server import ServerOptions, ServerThread, TranscriptionServer
from engine.types import Word
from engine.wire import whisperlive_server as wls
from engine.wire.protocol import ProtocolViolation

pytestmark = pytest.mark.timeout(300)
REPO = Path(__file__).resolve().parents[1]
CLIENT = REPO / "tests" / "whisperlive_client"


# -- sans-I/O --------------------------------------------------------------------------------


def options_frame(**extra: object) -> str:
    return json.dumps({"uid": "u1", "language": "en", "task": "transcribe", "model": "small",
                       "use_vad": True, **extra})


def test_first_frame_tells_the_protocols_apart() -> None:
    assert wls.is_whisperlive_options(options_frame())
    hello = json.dumps({"type": "hello", "v": 1, "protocol": 1, "session_id": "s", "uid": "x"})
    for frame in (hello, b"\x00\x01", "not json", "[1]", '{"language": "en"}'):
        assert not wls.is_whisperlive_options(frame)


def test_options_are_honoured_or_warned_about() -> None:
    options = wls.parse_options(options_frame(
        use_vad=False, initial_prompt="Sottovoce, CTranslate2.", hotwords="Kubernetes, Helm ,",
        send_last_n_segments=3, no_speech_thresh=0.6, same_output_threshold=5,
        word_timestamps=True, enable_translation=True, enable_diarization=True,
        vad_parameters={"threshold": 0.6, "min_silence_duration_ms": 300, "speech_pad_ms": 1},
        audio_format="int16"))
    assert isinstance(options, wls.WlOptions)
    assert options.prompt == "Sottovoce, CTranslate2."
    assert options.vocabulary == ("Kubernetes", "Helm")
    assert (options.send_last_n_segments, options.no_speech_thresh,
            options.same_output_threshold, options.word_timestamps) == (3, 0.6, 5, True)
    assert options.vad == {"threshold": 0.6, "min_silence_duration_ms": 300.0}
    warnings = " | ".join(options.warnings)
    for needle in ("use_vad", "enable_translation", "enable_diarization", "speech_pad_ms"):
        assert needle in warnings
    defaults = wls.parse_options(json.dumps({"uid": "u"}))
    assert isinstance(defaults, wls.WlOptions) and defaults.warnings == ()
    assert (defaults.language, defaults.task, defaults.prompt) == (None, "transcribe", None)
    assert defaults.vocabulary == ()


@pytest.mark.parametrize("frame", [
    '{"uid": 5}', '{"uid": ""}', '{"uid": "u", "send_last_n_segments": "ten"}',
    '{"uid": "u", "no_speech_thresh": NaN}', '{"uid": "u", "initial_prompt": 3}',
    '{"uid": "u", "audio_format": "mp3"}', '{"uid": "u", "vad_parameters": [1]}', "[]",
])
def test_bad_options_are_violations(frame: str) -> None:
    conn = wls.WlServerConnection()
    [violation] = conn.receive(frame)
    assert isinstance(violation, ProtocolViolation) and conn.state == "failed"
    assert conn.receive(b"\x00\x00\x00\x00") == []


def test_audio_formats_end_of_audio_and_replies() -> None:
    conn = wls.WlServerConnection()
    [options] = conn.receive(options_frame())
    assert isinstance(options, wls.WlOptions) and conn.uid == "u1"
    samples = np.array([0.5, -0.25, np.nan, 7.0], dtype="<f4")
    [audio] = conn.receive(samples.tobytes())
    assert isinstance(audio, wls.WlAudio)
    assert audio.samples.tolist() == [0.5, -0.25, 0.0, 1.0]
    [bad] = conn.receive(b"\x00" * 6)
    assert isinstance(bad, ProtocolViolation) and bad.code == "bad_audio"
    pcm = wls.WlServerConnection()
    pcm.receive(options_frame(audio_format="int16"))
    [audio] = pcm.receive(np.array([16384, -32768], dtype="<i2").tobytes())
    assert isinstance(audio, wls.WlAudio) and audio.samples.tolist() == [0.5, -1.0]
    assert pcm.receive("some text") == []  # WhisperLive reads binary frames only
    assert pcm.receive(b"END_OF_AUDIO") == [wls.WlEnd()] and pcm.state == "ended"
    assert json.loads(pcm.ready("tiny.en")) == {
        "uid": "u1", "message": "SERVER_READY", "backend": "faster_whisper", "model": "tiny.en",
        "server": "sottovoce"}
    assert json.loads(pcm.wait(0.5)) == {"uid": "u1", "status": "WAIT", "message": 0.5}
    assert json.loads(pcm.disconnect()) == {"uid": "u1", "message": "DISCONNECT"}
    assert json.loads(pcm.language("de", None))["language"] == "de"


def test_segment_window_is_whisperlive_shaped() -> None:
    window = wls.SegmentWindow(last_n=2, word_timestamps=True)
    assert window.partial("And so", 0, 16_000) == [
        {"start": "0.000", "end": "1.000", "text": "And so", "completed": False}]
    words = (Word(" And", 0, 8000, 0.91234), Word(" so", 8000, 16_000))
    first = window.final(" And so.", 0, 20_000, words)
    assert first[0]["completed"] is True and first[0]["end"] == "1.250"
    assert first[0]["words"] == [
        {"word": " And", "start": "0.000", "end": "0.500", "probability": 0.9123},
        {"word": " so", "start": "0.500", "end": "1.000", "probability": 1.0}]
    # After a final the segment in progress is empty: the client's stale partial is replaced.
    assert first[-1] == {"start": "1.250", "end": "1.250", "text": "", "completed": False}
    window.final(" Two.", 16_000, 40_000)  # starts inside the previous one: moved to its end
    assert window.completed[-1]["start"] == "1.250"
    assert window.final("", 40_000, 48_000)[-1]["text"] == ""  # empty final: nothing completed
    window.final(" Three.", 48_000, 56_000)
    sent = window.partial("Four", 56_000, 60_000)
    assert [s["text"] for s in sent] == [" Two.", " Three.", "Four"]  # the last 2 + in progress


# -- a real server, scripted runner ---------------------------------------------------------


@pytest.fixture()
def scripted() -> Iterator[ServerThread]:
    server = TranscriptionServer(ScriptedRunner(("Hello world.",)),
                                 ServerOptions(port=0, max_sessions=1, api_key="k"),
                                 scorer_factory=EnergyVad)
    thread = ServerThread(server)
    thread.start()
    yield thread
    thread.stop()


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * 16_000)) / 16_000
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype("<f4")


def converse(port: int, frames: Sequence[str | bytes], *, path: str = "/?token=k",
             until_close: bool = True) -> tuple[list[dict[str, object]], int | None]:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    replies: list[dict[str, object]] = []
    with connect(f"ws://127.0.0.1:{port}{path}", open_timeout=10) as ws:
        for frame in frames:
            ws.send(frame)
        try:
            while until_close:
                replies.append(json.loads(ws.recv(timeout=20)))
        except ConnectionClosed as closed:
            return replies, closed.rcvd.code if closed.rcvd else None
    return replies, None


def test_a_whisperlive_session_through_our_core(scripted: ServerThread) -> None:
    """Options -> WARNING (model) + SERVER_READY; speech with no trailing silence is finished
    by the stall; END_OF_AUDIO closes with 1000; the key came as ?token=."""
    options = options_frame(same_output_threshold=5)  # stall after 0.5 s
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    replies: list[dict[str, object]] = []
    code: int | None = None
    with connect(f"ws://127.0.0.1:{scripted.port}/?token=k", open_timeout=10) as ws:
        ws.send(options)
        replies.append(json.loads(ws.recv(timeout=10)))
        replies.append(json.loads(ws.recv(timeout=10)))
        audio = np.concatenate([np.zeros(8000, dtype="<f4"), tone(1.5)])
        for start in range(0, len(audio), 4096):
            ws.send(audio[start:start + 4096].tobytes())
        deadline = time.monotonic() + 20  # the stall (0.5 s) closes the utterance
        while time.monotonic() < deadline:
            reply = json.loads(ws.recv(timeout=20))
            replies.append(reply)
            if any(s.get("completed") for s in reply.get("segments", [])):  # type: ignore[attr-defined]
                break
        ws.send(b"END_OF_AUDIO")
        try:
            while True:
                replies.append(json.loads(ws.recv(timeout=20)))
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else None
    assert replies[0]["status"] == "WARNING"
    assert "'small' is not loaded" in str(replies[0]["message"])
    assert replies[1]["message"] == "SERVER_READY" and replies[1]["backend"] == "faster_whisper"
    assert all(r["uid"] == "u1" for r in replies)
    completed = [s for r in replies for s in r.get("segments", [])  # type: ignore[attr-defined]
                 if s["completed"]]
    assert completed and completed[0]["text"].strip() == "Hello world."
    # The tone starts at 0.5 s; the utterance opens with the segmenter's 0.4 s pre-roll.
    assert 0.0 < float(completed[0]["start"]) < 0.5 < 1.9 <= float(completed[0]["end"]) <= 2.1
    assert code == 1000


def test_our_whisperlive_link_reads_the_words_sent_after_end_of_audio(
        scripted: ServerThread) -> None:
    """Speech that runs to the end of the stream is only decoded after END_OF_AUDIO; against
    `sottovoce serve` our `whisperlive://` link reads on until the close, so it keeps that final
    (against WhisperLive's own server, which drops it, the link waits before sending instead)."""
    events: list[Event] = []
    audio = np.concatenate([np.zeros(8000, dtype=np.float32), tone(1.5).astype(np.float32)])
    engine = RemoteLiveEngine(events.append, url=f"whisperlive://127.0.0.1:{scripted.port}",
                              api_key="k", source=FileSource(audio=audio, realtime=True),
                              options=RemoteOptions(end_timeout_s=30))
    engine.start()
    assert engine.wait(60)
    finals = [e.text for e in events if isinstance(e, FinalText)]
    # (Words the server's partials agreed on may come first as a final of their own,
    # PolicyOptions.commit_stable: every word arrives, once.)
    assert " ".join(finals) == "Hello world.", finals
    states = [e for e in events if type(e).__name__ == "StateChanged" and e.state == "ready"]
    assert states and "sottovoce serve" in states[0].detail


def test_full_server_answers_wait_and_native_busy(scripted: ServerThread) -> None:
    from websockets.sync.client import connect

    with connect(f"ws://127.0.0.1:{scripted.port}/?token=k", open_timeout=10) as first:
        first.send(options_frame())
        while json.loads(first.recv(timeout=10)).get("message") != "SERVER_READY":
            pass
        replies, code = converse(scripted.port, [options_frame()])
        assert replies == [{"uid": "u1", "status": "WAIT", "message": 0.5}] and code == 1013
        native, code = converse(scripted.port, [])  # v1 clients may wait for the answer
        assert native[0]["code"] == "busy" and code == 1013


def test_whisperlive_clients_need_the_key_too(scripted: ServerThread) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    for path in ("/", "/?token=wrong"):
        with pytest.raises(InvalidStatus) as refused:
            connect(f"ws://127.0.0.1:{scripted.port}{path}", open_timeout=10)
        assert refused.value.response.status_code == 401
    with connect(f"ws://127.0.0.1:{scripted.port}/", subprotocols=["bearer", "k"],  # type: ignore[list-item]
                 open_timeout=10) as ws:
        assert ws.subprotocol == "bearer"  # echoed; the key never is
        ws.send(options_frame(model="scripted"))
        assert json.loads(ws.recv(timeout=10))["message"] == "SERVER_READY"  # no warning


def test_bad_options_get_error_and_close(scripted: ServerThread) -> None:
    replies, code = converse(scripted.port, ['{"uid": "u1", "send_last_n_segments": "x"}'])
    assert replies[0]["status"] == "ERROR" and "send_last_n_segments" in str(
        replies[0]["message"]) and code == 1008


# -- WhisperLive's own client against `sottovoce serve` (tiny.en) ---------------------------


@pytest.fixture(scope="module")
def client_python() -> Path:
    from support.servers import venv_python

    python = venv_python()
    check = subprocess.run([str(python), "-c", "import whisper_live.client"],
                           env={"PYTHONPATH": str(CLIENT)}, capture_output=True, text=True,
                           timeout=120)
    if check.returncode != 0:
        pytest.skip(f"WhisperLive's client does not import: {check.stderr.strip()[-200:]}")
    return python


@pytest.fixture(scope="module")
def serve() -> Iterator[int]:
    from support.servers import free_port, spawn_server

    port = free_port()
    proc = spawn_server(port)
    yield port
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


def whisperlive_client(python: Path, port: int, audio: Path, out: Path,
                       *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(python), str(CLIENT / "run_client.py"), "127.0.0.1", str(port), str(audio),
         str(out), *args], cwd=out.parent, env={"PYTHONPATH": str(CLIENT)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def srt_text(path: Path) -> str:
    """The text lines of an SRT file WhisperLive's client wrote."""
    blocks = path.read_text(encoding="utf-8").strip().split("\n\n")
    return " ".join(" ".join(b.splitlines()[2:]).strip() for b in blocks).strip()


def finish(proc: subprocess.Popen[str]) -> dict[str, object]:
    """The client's summary; it ran without a server error. websocket-client reports the
    server's normal close after END_OF_AUDIO as an error (WhisperLive's server closes there
    too; its own StreamingTranscriptionClient ignores that one), so that one does not count."""
    output, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, output[-2000:]
    result = dict(json.loads(output.strip().splitlines()[-1]))
    assert result["backend"] == "faster_whisper", output[-2000:]
    assert not result["error"] or "closed normally (code 1000)" in str(
        result["error_message"]), output[-2000:]
    return result


def native_text(port: int, path: Path, *, realtime: bool = False) -> str:
    events: list[Event] = []
    lock = threading.Lock()

    def sink(event: Event) -> None:
        with lock:
            events.append(event)

    engine = RemoteLiveEngine(sink, url=f"ws://127.0.0.1:{port}",
                              source=FileSource(path, realtime=realtime),
                              options=RemoteOptions(language="en"))
    engine.start()
    assert engine.wait(240)
    return " ".join(e.text for e in events if isinstance(e, FinalText) and e.text).strip()


def clip(manifest: list[ManifestEntry], name: str) -> ManifestEntry:
    return next(e for e in manifest if e.path.name == name)


@pytest.mark.whisperlive
def test_transcription_client_matches_our_client(client_python: Path, serve: int,
                                                 manifest: list[ManifestEntry],
                                                 tmp_path: Path) -> None:
    """WhisperLive's TranscriptionClient, its defaults (15 s settle, use_vad, model 'small'),
    streams jfk in real time; the SRT it writes matches what our own client gets."""
    jfk = clip(manifest, "jfk-inaugural-1961-excerpt.wav")
    finish(whisperlive_client(client_python, serve, jfk.path, tmp_path / "out.srt"))
    theirs = srt_text(tmp_path / "out.srt")
    ours = native_text(serve, jfk.path)
    assert error_rate([ours], [theirs]) <= 0.1, (ours, theirs)
    assert error_rate([jfk.text], [theirs]) <= 0.2, theirs


@pytest.mark.whisperlive
def test_whisperlive_and_native_clients_at_once(client_python: Path, serve: int,
                                                manifest: list[ManifestEntry],
                                                tmp_path: Path) -> None:
    names = ["ls-tc-1995-1837-0001.wav", "ls-dc-1272-128104-0000.wav",
             "ljs-LJ050-0131.wav", "jfk-inaugural-1961-excerpt.wav"]
    clips = [clip(manifest, n) for n in names]
    outs = [tmp_path / f"{i}" / "out.srt" for i in range(2)]
    for out in outs:
        out.parent.mkdir()
    procs = [whisperlive_client(client_python, serve, c.path, out)
             for c, out in zip(clips[:2], outs, strict=True)]
    native: dict[int, str] = {}
    threads = [threading.Thread(target=lambda i=i: native.__setitem__(
        i, native_text(serve, clips[i].path, realtime=True))) for i in (2, 3)]
    for thread in threads:
        thread.start()
    for proc in procs:
        finish(proc)
    for thread in threads:
        thread.join(240)
    for c, out in zip(clips[:2], outs, strict=True):
        assert error_rate([c.text], [srt_text(out)]) <= 0.25, srt_text(out)
    for i in (2, 3):
        assert error_rate([clips[i].text], [native[i]]) <= 0.25, native[i]
    from support.servers import http_json

    metrics = http_json(f"http://127.0.0.1:{serve}/metrics.json")
    counters = metrics["counters"]
    assert isinstance(counters, dict) and counters["whisperlive"] >= 2


# -- option mapping on the server ----------------------------------------------------------


def test_vad_parameters_map_onto_the_segmenter() -> None:
    from engine.server.session import SessionOptions
    from engine.server.whisperlive import _with_vad

    warnings: list[str] = []
    mapped = _with_vad(SessionOptions(), {"threshold": 0.6, "min_silence_duration_ms": 300,
                                          "max_speech_duration_s": 99}, warnings)
    seg = mapped.segmenter
    assert (seg.start_threshold, seg.end_threshold, seg.min_silence_ms, seg.max_ms) == (
        0.6, pytest.approx(0.45), 300, 30_000)
    assert warnings == []
    unchanged = _with_vad(SessionOptions(), {"threshold": 0.2, "neg_threshold": 0.5}, warnings)
    assert unchanged == SessionOptions() and "vad_parameters ignored" in warnings[0]


class EnglishOnly(ScriptedRunner):
    @property
    def info(self):  # type: ignore[no-untyped-def]
        from engine.types import ModelInfo

        return ModelInfo(name="tiny.en", device="cpu", compute_type="none", multilingual=False)


def test_english_only_model_warns_about_language_and_translation() -> None:
    thread = ServerThread(TranscriptionServer(EnglishOnly(), ServerOptions(port=0),
                                              scorer_factory=EnergyVad))
    thread.start()
    try:
        from websockets.sync.client import connect

        with connect(f"ws://127.0.0.1:{thread.port}/", open_timeout=10) as ws:
            ws.send(options_frame(language="de", task="translate", model="tiny.en"))
            replies = []
            while not replies or replies[-1].get("message") != "SERVER_READY":
                replies.append(json.loads(ws.recv(timeout=10)))
        warnings = [str(r["message"]) for r in replies if r.get("status") == "WARNING"]
        assert len(warnings) == 2, warnings  # the model asked for is the one loaded: no warning
        assert "language 'de'" in warnings[0] and "translate" in warnings[1]
    finally:
        thread.stop()


def test_no_speech_thresh_empties_finals_the_model_calls_silence() -> None:
    from engine.server.connection import TokenBucket
    from engine.server.session import SessionOptions
    from engine.server.whisperlive import WhisperLiveConnection
    from engine.types import Segment, Transcript
    from engine.wire import protocol as p

    bucket = TokenBucket(1.0, 1.0, time.monotonic)
    conn = WhisperLiveConnection(
        None, None, multilingual=True, session_options=SessionOptions(), scorer=EnergyVad(),
        clock=time.monotonic, max_frame_bytes=1 << 16, idle_timeout_s=30.0, audio_bucket=bucket,
        frame_bucket=bucket, model="m", counters={})
    conn._messages(options_frame(no_speech_thresh=0.5))
    final = p.Final(utterance_id=1, text=" Thank you.", words=(), start=0, end=16_000,
                    decode_ms=1.0, language="en", trigger=0, server_ms=0.0)

    def sent(*probs: float) -> str:
        segments = tuple(Segment(" Thank you.", 0, 16_000, no_speech_prob=x) for x in probs)
        [out] = conn._results(None, Transcript(segments=segments), [final])  # type: ignore[arg-type]
        assert isinstance(out, p.Final)
        return out.text

    assert sent(0.9) == "" and sent(0.9, 0.6) == ""
    assert sent(0.9, 0.2) == " Thank you." and sent(0.5) == " Thank you."
