"""The transcription server on a real loopback socket with the real tiny.en model and real speech.

Covers: correct final text, concurrent sessions, kill -9 and restart mid-stream without losing
audio, auth, busy, oversize / malformed / random frames (bounded fuzz) with the server still
serving afterwards, idle timeout, rate limit, /health and /metrics; and the batching scheduler
itself with a runner that records its batches (a stand-in only for the model's timing, which a
test cannot control).
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from support.held_source import HeldSource
from support.servers import free_port, http_json, spawn_server

from bench.evaluation import ManifestEntry, error_rate
from engine.asr.ct2_decoder import Ct2Runner
from engine.asr.tensorrt import TensorRTLLMRunner
from engine.audio.sources import FileSource
from engine.errors import DependencyMissingError, TranscriptionError
from engine.events import EngineFailed, Event, FinalText, Metrics, StateChanged
from engine.remote.client import RemoteLiveEngine, RemoteOptions
from engine.server.scheduler import BatchScheduler, SchedulerOptions
from engine.server.server import ServerOptions, ServerThread, TranscriptionServer
from engine.types import SAMPLE_RATE, DecodeRequest, Transcript
from engine.wire import protocol as p

pytestmark = pytest.mark.timeout(300)
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def runner(tiny_transcriber):  # type: ignore[no-untyped-def]
    loaded = Ct2Runner(tiny_transcriber.model)  # shares the session's loaded tiny.en
    loaded.load()
    return loaded


def start_server(runner: Ct2Runner, **options: object) -> ServerThread:
    thread = ServerThread(TranscriptionServer(runner, ServerOptions(port=0, **options))) # type: ignore[arg-type]
    thread.start()
    return thread


@pytest.fixture(scope="module")
def server(runner: Ct2Runner) -> Iterator[ServerThread]:
    thread = start_server(runner, max_sessions=4, idle_timeout_s=2.0, max_frame_bytes=64 * 1024)
    yield thread
    thread.stop()


def entry(manifest: list[ManifestEntry], name: str) -> ManifestEntry:
    return next(e for e in manifest if e.path.name == name)


def transcribe(url: str, path: Path, *, realtime: bool = False, api_key: str | None = None,
               timeout: float = 120.0, **options: object) -> list[Event]:
    events: list[Event] = []
    lock = threading.Lock()

    def sink(event: Event) -> None:
        with lock:
            events.append(event)

    engine = RemoteLiveEngine(sink, url=url, api_key=api_key,
                              source=FileSource(path, realtime=realtime),
                              options=RemoteOptions(language="en", **options))  # type: ignore[arg-type]
    engine.start()
    assert engine.wait(timeout), "client did not finish"
    return events


def final_text(events: Sequence[Event]) -> str:
    return " ".join(e.text for e in events if isinstance(e, FinalText) and e.text)


def url(thread: ServerThread) -> str:
    return f"ws://127.0.0.1:{thread.port}"


# -- a session, many sessions ----------------------------------------------------------------


@pytest.mark.model
def test_session_gets_correct_final_text_and_timings(server: ServerThread, shared_audio: Path,
                                                     manifest: list[ManifestEntry]) -> None:
    clip = entry(manifest, "jfk-inaugural-1961-excerpt.wav")
    events = transcribe(url(server), clip.path)
    assert error_rate([clip.text], [final_text(events)]) < 0.2, final_text(events)
    finals = [e for e in events if isinstance(e, FinalText)]
    assert finals[0].words and finals[-1].end <= 16_000 * 12
    metrics = [e for e in events if isinstance(e, Metrics) and e.kind == "final"]
    assert metrics and all(m.decode_ms > 0 and m.network_ms is not None for m in metrics)
    assert all(m.chunk_rtt_ms >= m.network_ms for m in metrics if m.network_ms is not None)
    assert not [e for e in events if isinstance(e, EngineFailed)]
    states = [e.state for e in events if isinstance(e, StateChanged)]
    assert states[0] == "loading" and "ready" in states and states[-1] == "stopped"


@pytest.mark.model
def test_concurrent_sessions_all_correct(server: ServerThread, shared_audio: Path,
                                         manifest: list[ManifestEntry]) -> None:
    names = ("jfk-inaugural-1961-excerpt.wav", "ls-dc-2412-153948-0000.wav",
             "ls-tc-1995-1837-0001.wav")
    clips = [entry(manifest, n) for n in names]
    results: dict[str, list[Event]] = {}

    def one(clip: ManifestEntry) -> None:
        results[clip.path.name] = transcribe(url(server), clip.path)

    threads = [threading.Thread(target=one, args=(c,)) for c in clips]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    for clip in clips:
        assert error_rate([clip.text], [final_text(results[clip.path.name])]) < 0.25, clip.path.name
    stats = http_json(f"http://127.0.0.1:{server.port}/metrics.json")["scheduler"]
    assert isinstance(stats, dict) and stats["requests"] >= len(clips)
    finals = stats["finals"]
    assert isinstance(finals, dict) and finals["requests"] >= len(clips)
    assert stats["queued"] == 0  # every session has finished


# -- kill -9 mid-stream ------------------------------------------------------------------------


@pytest.mark.model
def test_kill_and_restart_mid_stream_loses_no_audio(shared_audio: Path,
                                                    manifest: list[ManifestEntry]) -> None:
    clip = entry(manifest, "ls-dc-2412-153948-0000.wav")  # 11.7 s, several pauses
    port = free_port()
    proc = spawn_server(port)
    events: list[Event] = []
    # Mid-stream is an event: the source stops at 5 s of the clip until the new server is up.
    source = HeldSource(FileSource(clip.path, realtime=True), hold_at=5 * SAMPLE_RATE)
    engine = RemoteLiveEngine(events.append, url=f"ws://127.0.0.1:{port}", source=source,
                              options=RemoteOptions(language="en", backoff_initial_s=0.1,
                                                    backoff_max_s=1.0))
    try:
        engine.start()
        assert source.reached.wait(120), "the clip never reached 5 s"  # (bounds a hang)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc = spawn_server(port)
        source.release()
        assert engine.wait(120)
    finally:
        proc.terminate()
        proc.wait(10)
    states = [e.state for e in events if isinstance(e, StateChanged)]
    assert "reconnecting" in states
    assert not [e for e in events if isinstance(e, EngineFailed)]
    assert error_rate([clip.text], [final_text(events)]) < 0.25, final_text(events)
    assert engine.buffer.dropped == 0


# -- auth, busy, limits, fuzz ------------------------------------------------------------------


@pytest.mark.model
def test_api_key_required_and_checked(runner: Ct2Runner, shared_audio: Path) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    with pytest.raises(ValueError, match="API key"):
        ServerOptions(host="0.0.0.0")
    thread = start_server(runner, api_key="s3cret-key")
    try:
        assert http_json(f"http://127.0.0.1:{thread.port}/health")["status"] == "ok"
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-key"}):
            with pytest.raises(InvalidStatus) as refused:
                connect(url(thread), additional_headers=headers, open_timeout=10)
            assert refused.value.response.status_code == 401
        with connect(url(thread), additional_headers={"Authorization": "Bearer s3cret-key"}) as ws:
            ws.send(p.encode_hello(p.Hello(session_id="a")))
            assert json.loads(ws.recv(timeout=10))["type"] == "ready"
        events = transcribe(url(thread), shared_audio / "cmusphinx-goforward.wav",
                            api_key="wrong")
        failures = [e for e in events if isinstance(e, EngineFailed)]
        assert failures and "API key" in failures[0].message and not failures[0].recoverable
    finally:
        thread.stop()


@pytest.mark.model
def test_busy_answer_past_max_sessions(runner: Ct2Runner) -> None:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    thread = start_server(runner, max_sessions=1)
    try:
        with connect(url(thread)) as first:
            first.send(p.encode_hello(p.Hello(session_id="first")))
            assert json.loads(first.recv(timeout=10))["type"] == "ready"
            with connect(url(thread)) as second:
                reply = json.loads(second.recv(timeout=10))
                assert reply["type"] == "error" and reply["code"] == p.BUSY
                with pytest.raises(ConnectionClosed) as closed:
                    second.recv(timeout=10)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
    finally:
        thread.stop()


def expect_error(address: str, frames: Sequence[str | bytes], code: str) -> int:
    """Send frames, expect one error frame with ``code`` and a close; returns the close code."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    with connect(address, max_size=None) as ws:
        try:
            for frame in frames:
                ws.send(frame)
        except ConnectionClosed:
            pass  # the server may close before every frame is out (size or rate limit)
        replies = []
        try:
            while True:
                replies.append(json.loads(ws.recv(timeout=20)))
        except ConnectionClosed as closed:
            errors = [r for r in replies if r["type"] == "error"]
            assert errors and errors[0]["code"] == code, replies
            assert closed.rcvd is not None
            return closed.rcvd.code
    raise AssertionError("unreachable")


@pytest.mark.model
def test_oversize_malformed_idle_and_rate_limited(server: ServerThread, runner: Ct2Runner) -> None:
    address = url(server)
    hello = p.encode_hello(p.Hello(session_id="x"))
    assert expect_error(address, [hello, b"\x00" * (64 * 1024 + 2)], p.TOO_LARGE) == 1009
    assert expect_error(address, ["{not json"], p.BAD_MESSAGE) == 1008
    assert expect_error(address, [b"\x00\x00"], p.UNEXPECTED) == 1008
    assert expect_error(address, [hello, b"\x00\x00\x00"], p.BAD_AUDIO) == 1008
    assert expect_error(address, [hello.replace('"protocol":1', '"protocol":9')],
                        p.UNSUPPORTED_VERSION) == 1008
    assert expect_error(address, [hello], p.IDLE_TIMEOUT) == 1000  # idle_timeout_s=2
    limited = start_server(runner, rate_frames_per_s=5.0)
    try:
        assert expect_error(url(limited), [hello] + [b"\x00\x00"] * 40, p.RATE_LIMITED) == 1008
    finally:
        limited.stop()


@pytest.mark.model
def test_random_frames_never_break_the_server(server: ServerThread, shared_audio: Path,
                                              manifest: list[ManifestEntry]) -> None:
    """Bounded fuzz (60 connections, 30 s at most); then a normal session must still work."""
    from websockets.exceptions import ConnectionClosed, InvalidMessage
    from websockets.sync.client import connect

    rng = random.Random(5)
    hello = p.encode_hello(p.Hello(session_id="fuzz"))
    deadline = time.monotonic() + 30
    for _ in range(60):
        if time.monotonic() > deadline:
            break
        frames: list[str | bytes] = [hello] if rng.random() < 0.7 else []
        for _ in range(rng.randint(1, 6)):
            kind = rng.random()
            if kind < 0.4:
                frames.append(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 3000))))
            elif kind < 0.8:
                frames.append("".join(rng.choice('{}[]":,01aeltyp\\ ') for _ in range(40)))
            else:
                frames.append(json.dumps({"type": rng.choice(["hello", "end", "cancel", "x"]),
                                          "protocol": rng.choice([1, "1", None]),
                                          "session_id": rng.choice(["s", 5, None])}))
        try:
            with connect(url(server), open_timeout=10, close_timeout=2) as ws:
                for frame in frames:
                    ws.send(frame)
                ws.send(p.encode_server(p.Bye()))  # a server message from a client: ignored
        except (ConnectionClosed, InvalidMessage, OSError, TimeoutError):
            pass
    health = http_json(f"http://127.0.0.1:{server.port}/health")
    assert health["status"] == "ok"
    clip = entry(manifest, "cmusphinx-goforward.wav")
    events = transcribe(url(server), clip.path)
    assert error_rate([clip.text], [final_text(events)]) < 0.5, final_text(events)


# -- the scheduler and runners -------------------------------------------------------------------


class RecordingRunner:
    """Returns an empty transcript per request and records batch sizes; the first batch waits
    for ``release`` so later requests pile up behind it, as they do behind a real decode."""

    def __init__(self, fail: bool = False,
                 on_batch: Callable[[int], None] | None = None) -> None:
        self.batches: list[int] = []
        self.tags: list[list[object]] = []
        self.on_batch = on_batch  # called on the inference thread with the batch's index
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail = fail

    @property
    def info(self):  # type: ignore[no-untyped-def]
        from engine.types import ModelInfo

        return ModelInfo("recording", "cpu", "none", False)

    @property
    def streams(self) -> int:
        return 1

    @property
    def device(self) -> str:
        return "cpu"

    def load(self) -> None:
        pass

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        if not self.batches:
            self.entered.set()
            self.release.wait(10)
        if self.on_batch is not None:
            self.on_batch(len(self.batches))
        self.batches.append(len(requests))
        self.tags.append([r.tag for r in requests])
        if self.fail:
            raise RuntimeError("boom")
        return [Transcript(segments=(), duration=len(r.audio)) for r in requests]


def run_requests(scheduler: BatchScheduler, runner: RecordingRunner, n: int) -> list[object]:
    async def main() -> list[object]:
        request = DecodeRequest(audio=np.zeros(1600, dtype=np.float32))
        tasks = [asyncio.ensure_future(scheduler.decode(request))]
        await asyncio.to_thread(runner.entered.wait, 10)  # the first batch is decoding now
        tasks += [asyncio.ensure_future(scheduler.decode(request)) for _ in range(n - 1)]
        await asyncio.sleep(0)  # let them reach the queue while the first batch is held
        runner.release.set()
        return list(await asyncio.gather(*tasks, return_exceptions=True))

    scheduler.start()
    try:
        return asyncio.run(main())
    finally:
        scheduler.stop()


def test_scheduler_batches_requests_waiting_behind_a_decode() -> None:
    runner = RecordingRunner()
    results = run_requests(BatchScheduler(runner, SchedulerOptions(max_batch=8)), runner, 6)
    assert all(isinstance(r, Transcript) for r in results)
    assert runner.batches[0] == 1 and sum(runner.batches) == 6 and max(runner.batches[1:]) > 1


def test_scheduler_without_batching_and_with_failures() -> None:
    runner = RecordingRunner()
    run_requests(BatchScheduler(runner, SchedulerOptions(max_batch=1)), runner, 4)
    assert runner.batches == [1, 1, 1, 1]
    failing = RecordingRunner(fail=True)
    scheduler = BatchScheduler(failing, SchedulerOptions(max_batch=4))
    results = run_requests(scheduler, failing, 3)
    assert all(isinstance(r, TranscriptionError) for r in results)
    assert scheduler.stats.errors == 3
    with pytest.raises(ValueError):
        SchedulerOptions(max_batch=0)


def test_finals_go_before_partials_queued_earlier_and_stale_partials_are_withdrawn() -> None:
    runner = RecordingRunner()
    scheduler = BatchScheduler(runner, SchedulerOptions(max_batch=8))

    def request(tag: str) -> DecodeRequest:
        return DecodeRequest(audio=np.zeros(1600, dtype=np.float32), tag=tag)

    async def main() -> list[object]:
        first = scheduler.submit(request("p0"))
        await asyncio.to_thread(runner.entered.wait, 10)  # p0 is decoding now
        tickets = [scheduler.submit(request(t)) for t in ("p1", "p2", "p3")]
        tickets += [scheduler.submit(request(t), urgent=True) for t in ("f1", "f2")]
        assert not scheduler.withdraw(first)  # already decoding: too late
        assert scheduler.withdraw(tickets[1]) and not scheduler.withdraw(tickets[1])
        runner.release.set()
        return list(await asyncio.gather(first.future, *(t.future for t in tickets)))

    scheduler.start()
    try:
        results = asyncio.run(main())
    finally:
        scheduler.stop()
    assert runner.tags == [["p0"], ["f1", "f2"], ["p1", "p3"]]
    assert isinstance(results[2], Transcript) and results[2].extra["path"] == "withdrawn"
    stats = scheduler.stats.as_dict()
    assert stats["withdrawn"] == 1 and stats["requests"] == 5
    finals, partials = stats["finals"], stats["partials"]
    assert isinstance(finals, dict) and finals["requests"] == 2
    assert isinstance(partials, dict) and partials["requests"] == 3


def test_a_final_arriving_during_a_partial_round_goes_before_its_remaining_runs() -> None:
    loops: list[asyncio.AbstractEventLoop] = []
    late: list[object] = []

    def submit_final(index: int) -> None:  # while the round's first run decodes
        if index == 1:
            async def submit() -> None:
                late.append(scheduler.submit(request("f1", 1.0), urgent=True))
            asyncio.run_coroutine_threadsafe(submit(), loops[0]).result(10)

    runner = RecordingRunner(on_batch=submit_final)
    scheduler = BatchScheduler(runner, SchedulerOptions(max_batch=8))

    def request(tag: str, seconds: float) -> DecodeRequest:
        return DecodeRequest(audio=np.zeros(int(seconds * 16_000), dtype=np.float32), tag=tag)

    async def main() -> None:
        loops.append(asyncio.get_running_loop())
        first = scheduler.submit(request("p0", 1.0))
        await asyncio.to_thread(runner.entered.wait, 10)
        tickets = [scheduler.submit(request("short", 1.0)), scheduler.submit(request("long", 9.0))]
        runner.release.set()
        await asyncio.gather(first.future, *(t.future for t in tickets))
        await late[0].future  # type: ignore[attr-defined]

    scheduler.start()
    try:
        asyncio.run(main())
    finally:
        scheduler.stop()
    assert runner.tags == [["p0"], ["short"], ["f1"], ["long"]]


def test_batched_requests_leave_their_prompts_out() -> None:
    from engine.server.scheduler import without_prompts
    from engine.types import DecodeOptions

    audio = np.zeros(1600, dtype=np.float32)
    requests = [DecodeRequest(audio, DecodeOptions(prompt=x, beam_size=5), tag=i)
                for i, x in enumerate(("one two three four", None))]
    batched = without_prompts(requests)
    assert [r.options.prompt for r in batched] == [None, None]
    assert [r.tag for r in batched] == [0, 1] and batched[0].audio is audio
    assert batched[0].options.beam_size == 5 and batched[1] is requests[1]


def test_batches_are_split_into_runs_of_similar_length() -> None:
    from engine.server.scheduler import Ticket, split_by_length

    loop = asyncio.new_event_loop()
    try:
        def item(seconds: float) -> Ticket:
            audio = np.zeros(int(seconds * 16_000), dtype=np.float32)
            return Ticket(DecodeRequest(audio=audio), loop.create_future(), loop)

        batch = [item(s) for s in (10.0, 1.0, 1.2, 9.0, 0.8, 11.0)]
        groups = split_by_length(batch, max_pad_ratio=1.6)
        lengths = [[len(p.request.audio) / 16_000 for p in g] for g in groups]
        assert lengths == [[0.8, 1.0, 1.2], [9.0, 10.0, 11.0]]
        assert len(split_by_length(batch, max_pad_ratio=100.0)) == 1
        assert [len(g) for g in split_by_length(batch, max_pad_ratio=1.0)] == [1] * 6
    finally:
        loop.close()


def test_tensorrt_runner_says_what_it_needs(tmp_path: Path) -> None:
    trt = TensorRTLLMRunner(tmp_path / "whisper-engine")
    try:
        import tensorrt_llm  # noqa: F401
    except ImportError:
        with pytest.raises(DependencyMissingError, match="tensorrt_llm"):
            trt.load()
    assert trt.info.device == "cuda"
