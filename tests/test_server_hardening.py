"""Hostile clients and bad start-up input for the server (issue 15, items 6, 7, 9, 10), on a real
loopback socket. The model is a stand-in that returns empty transcripts: these cases are about
frames, headers and errors, never about text."""

from __future__ import annotations

import argparse
import json
import math
import socket
import ssl
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.runners import QuietScorer, SilentRunner

from engine.server.connection import CLOSE_REASON_BYTES, close_reason
from engine.server.server import ServerOptions, ServerThread, TranscriptionServer, host_port
from engine.wire import protocol as p

pytestmark = pytest.mark.timeout(120)


def start(**options: object) -> ServerThread:
    server = TranscriptionServer(SilentRunner(), ServerOptions(port=0, **options),  # type: ignore[arg-type]
                                 scorer_factory=QuietScorer)
    thread = ServerThread(server)
    thread.start()
    return thread


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    thread = start(max_frame_bytes=64 * 1024, api_key="k")
    yield thread
    thread.stop()


def replies_and_close(thread: ServerThread, frames: Sequence[str | bytes]
                      ) -> tuple[list[dict[str, object]], int | None]:
    """Send frames; every reply until the close, and the close code the server sent."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    replies: list[dict[str, object]] = []
    with connect(f"ws://127.0.0.1:{thread.port}", max_size=None,
                 additional_headers={"Authorization": "Bearer k"}, open_timeout=10) as ws:
        try:
            for frame in frames:
                ws.send(frame)
        except ConnectionClosed:
            pass
        try:
            while True:
                replies.append(json.loads(ws.recv(timeout=20)))
        except ConnectionClosed as closed:
            return replies, closed.rcvd.code if closed.rcvd else None
    raise AssertionError("unreachable")


# -- item 6: close reasons are cut by bytes ------------------------------------------------------

def test_a_non_ascii_value_echoed_in_an_error_closes_with_one_error_frame(
        server: ServerThread, caplog: pytest.LogCaptureFixture) -> None:
    """The issue's repro: 'é' * 80 made a 160-byte reason, a second `internal` error and a
    30-line traceback in the log."""
    hello = json.dumps({"type": "hello", "v": 1, "protocol": "é" * 80, "session_id": "s",
                        "sample_rate": 16000, "offset": 0})
    errors_before = server.server.counters["errors"]
    replies, code = replies_and_close(server, [hello])
    assert [r["type"] for r in replies] == ["error"] and code == 1008
    assert replies[0]["code"] in (p.UNSUPPORTED_VERSION, p.BAD_MESSAGE)
    assert server.server.counters["errors"] == errors_before
    assert "Traceback" not in caplog.text and "connection failed" not in caplog.text


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=200))
def test_close_reason_always_fits_a_close_frame(message: str) -> None:
    reason = close_reason(message)
    assert len(reason.encode("utf-8")) <= CLOSE_REASON_BYTES <= 123
    assert message.startswith(reason)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(field=st.sampled_from(["protocol", "session_id", "sample_rate", "language", "offset",
                              "type"]),
       value=st.text(alphabet=st.characters(min_codepoint=0x80), min_size=40, max_size=120))
@example(field="session_id", value="\x80" * 39 + "\ud800")  # a lone surrogate: no UTF-8 reply
def test_any_non_ascii_field_value_gets_one_error_frame(server: ServerThread, field: str,
                                                        value: str) -> None:
    hello = {"type": "hello", "v": 1, "protocol": 1, "session_id": "s", "sample_rate": 16000,
             "offset": 0}
    hello[field] = value
    errors_before = server.server.counters["errors"]
    replies, code = replies_and_close(server, [json.dumps(hello), "{}"])
    assert server.server.counters["errors"] == errors_before
    assert all(r["code"] != p.INTERNAL for r in replies if r["type"] == "error")


# -- item 7: two Authorization headers ---------------------------------------------------------

def raw_status(thread: ServerThread, headers: Sequence[tuple[str, str]],
               path: str = "/") -> int:
    request = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{thread.port}", "Upgrade: websocket",
               "Connection: Upgrade", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
               "Sec-WebSocket-Version: 13"] + [f"{k}: {v}" for k, v in headers]
    with socket.create_connection(("127.0.0.1", thread.port), timeout=10) as sock:
        sock.sendall(("\r\n".join(request) + "\r\n\r\n").encode())
        status_line = sock.makefile("rb").readline().decode()
    return int(status_line.split()[1])


@pytest.mark.parametrize("values", [("Bearer k", "Bearer k"), ("Bearer k", "Bearer x"),
                                    ("Bearer x", "Bearer k"), ("", "")])
@pytest.mark.parametrize("path", ["/", "/metrics"])
def test_two_authorization_headers_get_400_not_500(server: ServerThread,
                                                   caplog: pytest.LogCaptureFixture,
                                                   values: tuple[str, str], path: str) -> None:
    status = raw_status(server, [("Authorization", v) for v in values], path)
    assert status == 400
    assert "Traceback" not in caplog.text
    assert raw_status(server, [("Authorization", "Bearer k")]) == 101  # still serving


# -- item 10: documented frame limits and frames after `end` -----------------------------------

def test_frames_over_the_limit_get_too_large_and_far_over_it_close_1009(
        server: ServerThread) -> None:
    hello = p.encode_hello(p.Hello(session_id="big"))
    replies, code = replies_and_close(server, [hello, b"\x00" * (64 * 1024 + 2)])
    assert [r.get("code") for r in replies if r["type"] == "error"] == [p.TOO_LARGE]
    assert code == 1009
    # Over twice the limit the WebSocket layer refuses the frame before reading it: close 1009
    # without an error frame, as docs/protocol.md says (memory stays bounded).
    replies, code = replies_and_close(server, [hello, b"\x00" * (2 * 64 * 1024 + 2)])
    assert not [r for r in replies if r["type"] == "error"] and code == 1009


def test_frames_after_end_are_not_read(server: ServerThread) -> None:
    hello = p.encode_hello(p.Hello(session_id="late"))
    end = json.dumps({"type": "end", "v": 1})
    replies, code = replies_and_close(server, [hello, b"\x00\x00" * 1600, end,
                                               b"\x00\x00" * 1600, "{not json"])
    assert [r["type"] for r in replies][-2:] == ["ack", "bye"] and code == 1000
    assert not [r for r in replies if r["type"] == "error"]
    docs = (Path(__file__).resolve().parents[1] / "docs" / "protocol.md").read_text()
    assert "Frames after `end` are not read" in docs
    assert "twice `max_frame_bytes`" in docs


# -- item 9: serve's start-up errors -----------------------------------------------------------

@pytest.mark.parametrize("changes", [{"port": 70000}, {"port": -1}, {"idle_timeout_s": math.nan},
                                     {"idle_timeout_s": math.inf}, {"rate_audio_x": math.nan},
                                     {"burst_audio_s": math.nan}])
def test_server_options_refuse_impossible_ports_and_nan(changes: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ServerOptions(**changes)  # type: ignore[arg-type]


def serve_args(*argv: str) -> argparse.Namespace:
    from app.commands import serve

    parser = argparse.ArgumentParser()
    serve.add_parser(parser.add_subparsers())
    return parser.parse_args(["serve", *argv])


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records model loads: every start-up error must come before one."""
    import engine.asr.ct2_decoder as runner_module

    calls: list[str] = []

    class RecordingCt2Runner(SilentRunner):
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def load(self) -> None:
            calls.append("load")
            raise AssertionError("the model was loaded before the start-up checks")

    monkeypatch.setattr(runner_module, "Ct2Runner", RecordingCt2Runner)
    return calls


def make_cert(folder: Path, name: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def test_serve_start_up_errors_are_one_line_before_the_model_loads(
        tmp_path: Path, loads: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from app.commands import serve

    cert_a, key_a = make_cert(tmp_path, "a")
    _, key_b = make_cert(tmp_path, "b")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    cases = {
        "port must be 0-65535": ["--port", "70000"],
        "--idle-timeout must be a finite number": ["--idle-timeout", "nan"],
        "--max-pad-ratio must be a finite number": ["--max-pad-ratio", "nan"],
        "--batch-window-ms must be a finite number": ["--batch-window-ms", "inf"],
        "timeouts and rates must be finite": ["--idle-timeout", "-1"],
        "TLS file not found": ["--tls-cert", str(tmp_path / "missing.pem"),
                               "--tls-key", str(key_a)],
        "cannot use --tls-cert": ["--tls-cert", str(cert_a), "--tls-key", str(key_b)],
        "cannot listen on 127.0.0.1:": ["--port", str(busy.getsockname()[1])],
        "cannot listen on nonexistent.invalid": ["--host", "nonexistent.invalid",
                                                 "--api-key-env", "HOME"],
    }
    try:
        for expected, argv in cases.items():
            assert serve.run(serve_args(*argv)) == 2, argv
            err = capsys.readouterr().err
            assert err.startswith("error: ") and expected in err, err
            assert err.count("\n") == 1 and "Traceback" not in err, err
    finally:
        busy.close()
    assert loads == []
    assert ssl.OPENSSL_VERSION  # the TLS cases ran against a real OpenSSL


def test_ipv6_hosts_are_written_with_brackets() -> None:
    assert host_port("::1", 18766) == "[::1]:18766"
    assert host_port("127.0.0.1", 1) == "127.0.0.1:1"
    assert host_port("example.org", 443) == "example.org:443"


# -- item 11: certificate errors are fatal at once -----------------------------------------------

def run_client(address: str, timeout: float = 60.0) -> tuple[list[object], float]:
    import threading
    import time

    from engine.audio.sources import FileSource
    from engine.remote.client import RemoteLiveEngine, RemoteOptions

    events: list[object] = []
    lock = threading.Lock()

    def sink(event: object) -> None:
        with lock:
            events.append(event)

    engine = RemoteLiveEngine(sink, url=address, options=RemoteOptions(connect_timeout_s=5),
                              source=FileSource(audio=np.zeros(16_000, dtype=np.float32)))
    began = time.monotonic()
    engine.start()
    assert engine.wait(timeout), "the client kept retrying"
    return events, time.monotonic() - began


@pytest.mark.parametrize("trusted, host", [(False, "localhost"), (True, "127.0.0.1")],
                         ids=["unknown-issuer", "wrong-host"])
def test_a_certificate_that_fails_verification_is_fatal_and_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trusted: bool, host: str) -> None:
    """Was retried for about 2.5 min (30 attempts), silently: SSLCertVerificationError is an
    OSError. Now the first attempt ends the session with a message naming the certificate."""
    from engine.events import EngineFailed, FinalText

    cert, key = make_cert(tmp_path, "server")
    if trusted:
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    thread = start(tls_cert=str(cert), tls_key=str(key))
    try:
        events, took = run_client(f"wss://{host}:{thread.port}")
        failures = [e for e in events if isinstance(e, EngineFailed)]
        assert len(failures) == 1 and not failures[0].recoverable
        assert "TLS certificate was rejected" in failures[0].message
        assert took < 15
        assert thread.server.counters["sessions"] == 0
        # The same server with its certificate trusted and the right name: the stream works.
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        events, _ = run_client(f"wss://localhost:{thread.port}")
        assert not [e for e in events if isinstance(e, EngineFailed)]
        assert thread.server.counters["sessions"] == 1
        assert all(not isinstance(e, FinalText) or e.text == "" for e in events)
    finally:
        thread.stop()


def test_the_idle_limit_counts_the_servers_frames_too() -> None:
    """A client waiting for the results of what it sent is not idle: WhisperLive's client sends
    END_OF_AUDIO 15 s after the last result it got, and a busy server's last result may come
    seconds after the last audio (a 20 s limit that counted only the client's frames closed
    such a session in CI). The limit ends a connection when neither side has sent a frame."""
    import asyncio

    from engine.server.connection import Connection, TokenBucket, _Closing

    class QuietClient:  # sends nothing; records what the server sends
        def __init__(self) -> None:
            self.sent: list[str] = []

        async def recv(self) -> str:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        async def send(self, frame: str) -> None:
            self.sent.append(frame)

    def connection(ws: QuietClient) -> Connection:
        bucket = TokenBucket(1.0, 1.0, lambda: 0.0)
        return Connection(ws, None, session_options=None, scorer=None,  # type: ignore[arg-type]
                          clock=lambda: 0.0, max_frame_bytes=1 << 16, idle_timeout_s=1.0,
                          audio_bucket=bucket, frame_bucket=bucket, model="m", counters={})

    async def closed_after(result_at: float | None) -> tuple[float, str, list[str]]:
        """Seconds until the idle limit closes a quiet client's connection, its error code,
        and the frames the server sent (one result ``result_at`` s in, if not None)."""
        loop = asyncio.get_running_loop()
        ws = QuietClient()
        conn = connection(ws)
        if result_at is not None:
            loop.call_later(result_at, lambda: asyncio.ensure_future(
                conn._send_frames(['{"type": "final"}'])))
        start = loop.time()
        with pytest.raises(_Closing) as closing:
            await conn._next_frame()
        return loop.time() - start, closing.value.code, ws.sent

    quiet, code, sent = asyncio.run(closed_after(None))
    assert code == p.IDLE_TIMEOUT and sent == [] and quiet >= 1.0
    waited, code, sent = asyncio.run(closed_after(0.6))
    assert code == p.IDLE_TIMEOUT and sent == ['{"type": "final"}']
    assert waited >= 0.6 + 1.0  # a full idle limit after the server's result, not after 1 s

    async def closed_while_owed(owed_s: float) -> tuple[float, str, list[str]]:
        """The same, with a decode out for ``owed_s`` (longer than the limit), then its
        result: a busy server's client is not idle (a Realtime session was closed so once)."""
        loop = asyncio.get_running_loop()
        ws = QuietClient()
        conn = connection(ws)
        conn._queued = (object(), object())  # type: ignore[assignment]

        def answered() -> None:
            conn._queued = None
            asyncio.ensure_future(conn._send_frames(['{"type": "final"}']))

        loop.call_later(owed_s, answered)
        start = loop.time()
        with pytest.raises(_Closing) as closing:
            await conn._next_frame()
        return loop.time() - start, closing.value.code, ws.sent

    waited, code, sent = asyncio.run(closed_while_owed(1.5))
    assert code == p.IDLE_TIMEOUT and sent == ['{"type": "final"}'] and waited >= 1.5 + 1.0
