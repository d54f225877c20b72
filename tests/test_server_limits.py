"""Sessions cannot be held forever (issue 15, item 8): a cap on sessions per client address, a
limit on time without audio (keepalives do not count) and a session lifetime, on a real
loopback socket with a stand-in model (these cases are about slots, never about text)."""

from __future__ import annotations

import argparse
import json
import math
import socket
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.runners import QuietScorer, SilentRunner

from engine.remote.native import RETRYABLE_ERRORS
from engine.server.limits import SessionLimits
from engine.server.server import ServerOptions, ServerThread, TranscriptionServer
from engine.wire import protocol as p

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def serve() -> Iterator[Any]:
    threads: list[ServerThread] = []

    def start(**limits: Any) -> ServerThread:
        options = ServerOptions(port=0, idle_timeout_s=30.0, limits=SessionLimits(**limits))
        thread = ServerThread(TranscriptionServer(SilentRunner(), options,  # type: ignore[arg-type]
                                                  scorer_factory=QuietScorer))
        thread.start()
        threads.append(thread)
        return thread

    yield start
    for thread in threads:
        thread.stop()


@contextmanager
def open_session(thread: ServerThread, source: str = "127.0.0.1") -> Iterator[Any]:
    """A connected client that said hello, from ``source`` (any 127/8 address is this host)."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    sock = socket.create_connection(("127.0.0.1", thread.port), timeout=10,
                                    source_address=(source, 0))
    with connect(f"ws://127.0.0.1:{thread.port}", sock=sock, open_timeout=10) as ws:
        with suppress(ConnectionClosed):  # refused at once: the caller reads why
            ws.send(json.dumps({"type": "hello", "protocol": 1, "session_id": "s"}))
        yield ws


def replies_until_close(ws: Any, timeout: float) -> tuple[list[dict[str, Any]], int | None]:
    from websockets.exceptions import ConnectionClosed

    replies = []
    try:
        while True:
            replies.append(json.loads(ws.recv(timeout=timeout)))
    except ConnectionClosed:
        pass
    return replies, ws.close_code


def keep_alive_until_closed(ws: Any, seconds: float, audio: bool) -> list[dict[str, Any]]:
    """Keepalives (or silent audio) every 0.1 s for up to ``seconds``; the replies."""
    from websockets.exceptions import ConnectionClosed

    replies: list[dict[str, Any]] = []
    silence = np.zeros(1600, dtype=np.int16).tobytes()
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            ws.send(silence if audio else json.dumps({"type": "keepalive"}))
            with suppress(TimeoutError):
                replies.append(json.loads(ws.recv(timeout=0.1)))
    except ConnectionClosed:
        # A send can fail on the server's close before the error frame sent ahead of it has
        # been read: what arrived is still there to read.
        with suppress(ConnectionClosed, TimeoutError):
            while True:
                replies.append(json.loads(ws.recv(timeout=1.0)))
    return replies


def errors(replies: list[dict[str, Any]]) -> list[str]:
    return [r["code"] for r in replies if r["type"] == "error"]


def test_keepalives_alone_do_not_keep_a_session(serve: Any) -> None:
    """Before: a keepalive every 20 s reset the 30 s idle timer forever."""
    thread = serve(idle_audio_s=0.6)
    with open_session(thread) as ws:
        started = time.monotonic()
        replies = keep_alive_until_closed(ws, 10.0, audio=False)
    assert errors(replies) == [p.IDLE_TIMEOUT], replies
    assert time.monotonic() - started < 6.0 and ws.close_code == 1000  # 0.6 s + a loaded machine
    assert thread.server.metrics()["limits"]["closed_idle_audio"] == 1  # type: ignore[index]


def test_audio_keeps_a_session_until_its_lifetime(serve: Any) -> None:
    thread = serve(idle_audio_s=0.5, lifetime_s=1.5)
    with open_session(thread) as ws:
        started = time.monotonic()
        replies = keep_alive_until_closed(ws, 12.0, audio=True)
        held = time.monotonic() - started
    assert errors(replies) == [p.SESSION_EXPIRED], replies
    assert 1.3 < held < 8.0, held  # audio kept it past the idle-audio limit, not past its life
    assert p.SESSION_EXPIRED in RETRYABLE_ERRORS  # our client resumes on a new session


def test_one_client_cannot_take_every_slot(serve: Any) -> None:
    """Before: 16 sessions from one address locked everyone out (max_sessions only)."""
    thread = serve(per_client=2)
    with ExitStack() as stack:
        for _ in range(2):
            ws = stack.enter_context(open_session(thread))
            assert json.loads(ws.recv(timeout=10))["type"] == "ready"
        with open_session(thread) as refused:
            replies, code = replies_until_close(refused, 10)
        assert errors(replies) == [p.BUSY] and code == 1013
        other = stack.enter_context(open_session(thread, source="127.0.0.2"))
        assert json.loads(other.recv(timeout=10))["type"] == "ready"  # another client gets in
        limits = thread.server.metrics()["limits"]
        assert limits["refused_per_client"] == 1 and limits["clients"] == 2  # type: ignore[index]
        assert limits["most_sessions_one_client"] == 2  # type: ignore[index]
    for _ in range(50):  # the closed sessions give their slots back
        if thread.server.metrics()["limits"]["clients"] == 0:  # type: ignore[index]
            break
        time.sleep(0.1)
    with open_session(thread) as again:
        assert json.loads(again.recv(timeout=10))["type"] == "ready"


def test_metrics_report_the_limits(serve: Any) -> None:
    thread = serve(per_client=3, idle_audio_s=120.0, lifetime_s=3600.0)
    with urllib.request.urlopen(f"http://127.0.0.1:{thread.port}/metrics.json", timeout=10) as reply:
        limits = json.loads(reply.read())["limits"]
    assert limits == {"max_sessions_per_client": 3, "idle_audio_s": 120.0, "lifetime_s": 3600.0,
                      "clients": 0, "most_sessions_one_client": 0, "refused_per_client": 0,
                      "closed_idle_audio": 0, "closed_lifetime": 0}


@settings(deadline=None)  # a shared, loaded machine: no per-example time limit
@given(per_client=st.integers(-3, 5),
       idle=st.floats(allow_nan=True, allow_infinity=True),
       life=st.floats(allow_nan=True, allow_infinity=True))
def test_limits_are_finite_and_positive_or_refused(per_client: int, idle: float,
                                                   life: float) -> None:
    """NaN compares false with everything and would disable a limit silently."""
    valid = per_client >= 1 and all(math.isfinite(x) and x > 0 for x in (idle, life))
    if valid:
        assert SessionLimits(per_client, idle, life).idle_audio_s == idle
    else:
        with pytest.raises(ValueError):
            SessionLimits(per_client, idle, life)


def serve_args(*argv: str) -> argparse.Namespace:
    from app.commands import serve as command

    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers())
    return parser.parse_args(["serve", *argv])


def test_serve_takes_the_limits_and_refuses_bad_ones_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    from app.commands import serve as command

    args = serve_args("--max-sessions-per-client", "2", "--idle-audio", "90",
                      "--session-lifetime", "7200")
    assert command.session_limits(args) == SessionLimits(2, 90.0, 7200.0)
    assert command.session_limits(serve_args()) == SessionLimits()
    for argv in (["--idle-audio", "nan"], ["--session-lifetime", "inf"],
                 ["--max-sessions-per-client", "0"], ["--idle-audio", "-5"]):
        assert command.run(serve_args(*argv)) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err
