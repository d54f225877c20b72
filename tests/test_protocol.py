"""Native protocol v1, sans-I/O: every message round-trips, every malformed input is a clean
violation, state machines refuse out-of-order frames. No sockets, no model."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from engine.types import Word
from engine.wire import protocol as p


def hello_frame(**overrides: object) -> str:
    data: dict[str, object] = {"type": "hello", "protocol": 1, "session_id": "s1",
                               "sample_rate": 16000, "language": "en", "prompt": None,
                               "offset": 0, "options": {}}
    data.update(overrides)
    return json.dumps(data)


def open_server(**overrides: object) -> p.ServerConnection:
    conn = p.ServerConnection()
    [hello] = conn.receive_text(hello_frame(**overrides))
    assert isinstance(hello, p.Hello)
    return conn


def test_client_hello_round_trips_through_server() -> None:
    client = p.ClientConnection()
    frame = client.hello(p.Hello(session_id="abc", language="de", prompt="Hallo", offset=320,
                                 options={"beam_size": 1}))
    assert json.loads(frame)["v"] == p.PROTOCOL_VERSION
    server = p.ServerConnection()
    [hello] = server.receive_text(frame)
    assert hello == p.Hello(session_id="abc", language="de", prompt="Hallo", offset=320)
    assert isinstance(hello, p.Hello) and hello.options == {"beam_size": 1}
    assert server.state == "open" and server.position == 320


def test_audio_positions_continue_from_offset() -> None:
    server = open_server(offset=1000)
    client = p.ClientConnection()
    client.hello(p.Hello(session_id="s", offset=1000))
    samples = np.arange(-5, 5, dtype=np.int16)
    [first] = server.receive_bytes(client.audio(samples))
    [second] = server.receive_bytes(client.audio(samples[:4]))
    assert isinstance(first, p.Audio) and isinstance(second, p.Audio)
    assert (first.start, first.end, second.start, second.end) == (1000, 1010, 1010, 1014)
    np.testing.assert_array_equal(first.samples, samples)
    assert client.position == server.position == 1014


def test_pcm_conversion_clips_and_round_trips() -> None:
    audio = np.array([0.0, 0.5, -0.5, 2.0, -2.0], dtype=np.float32)
    pcm = np.frombuffer(p.float_to_pcm16(audio), dtype="<i2")
    assert list(pcm) == [0, 16384, -16384, 32767, -32767]
    back = p.pcm16_to_float(pcm.astype(np.int16))
    assert back.dtype == np.float32 and np.allclose(back[:3], audio[:3], atol=1e-4)


@pytest.mark.parametrize("message", [
    p.Ready(session_id="s", model="tiny.en", offset=5),
    p.Partial(utterance_id=2, committed="hello", tentative=" world", start=10, end=20),
    p.Partial(utterance_id=2, committed="", tentative="", start=0, end=0, trigger=7,
              server_ms=3.25),
    p.Final(utterance_id=3, text="Hi there.", words=(Word(" Hi", 0, 5, 0.5),
                                                     Word(" there.", 5, 9, 0.25)),
            start=0, end=9, decode_ms=12.5, language="en", trigger=9, server_ms=20.5),
    p.Final(utterance_id=0, text="", words=(), start=0, end=0, decode_ms=0.0),
    p.Ack(upto=48000),
    p.Error(code=p.BUSY, message="server busy"),
    p.Bye(upto=7),
])
def test_server_messages_round_trip(message: p.ServerMessage) -> None:
    client = p.ClientConnection()
    client.hello(p.Hello(session_id="s"))
    frame = p.encode_server(message)
    assert json.loads(frame)["v"] == p.PROTOCOL_VERSION
    assert client.receive_text(frame) == [message]


def test_client_state_follows_ready_error_and_bye() -> None:
    client = p.ClientConnection()
    client.hello(p.Hello(session_id="s"))
    client.receive_text(p.encode_server(p.Ready("s", "m")))
    assert client.state == "open"
    client.receive_text(p.encode_server(p.Ack(10)))
    assert client.state == "open"
    json.loads(client.end())
    client.receive_text(p.encode_server(p.Bye()))
    assert client.state == "closed"
    assert client.receive_text(p.encode_server(p.Ack(1))) == []
    assert client.receive_bytes(b"xx") == []
    failed = p.ClientConnection()
    failed.hello(p.Hello(session_id="s"))
    failed.receive_text(p.encode_server(p.Error("busy", "full")))
    assert failed.state == "failed"
    assert failed.receive_text(p.encode_server(p.Ack(1))) == []


def test_client_refuses_misuse_and_binary_from_server() -> None:
    client = p.ClientConnection()
    with pytest.raises(RuntimeError):
        client.audio(np.zeros(4, dtype=np.int16))
    client.hello(p.Hello(session_id="s"))
    with pytest.raises(RuntimeError):
        client.hello(p.Hello(session_id="s"))
    assert json.loads(client.cancel())["type"] == "cancel"
    fresh = p.ClientConnection()
    fresh.hello(p.Hello(session_id="s"))
    [violation] = fresh.receive_bytes(b"\x00\x01")
    assert isinstance(violation, p.ProtocolViolation) and fresh.state == "failed"


def test_unknown_types_are_ignored_both_ways() -> None:
    server = open_server()
    assert server.receive_text('{"type": "future_feature", "x": 1}') == []
    assert server.receive_text(p.ClientConnection().keepalive()) == []
    assert server.state == "open"
    client = p.ClientConnection()
    client.hello(p.Hello(session_id="s"))
    assert client.receive_text('{"type": "stats", "v": 2}') == []
    assert client.state == "hello_sent"


def test_end_then_repeated_end_then_audio_is_a_violation() -> None:
    server = open_server()
    assert server.receive_text('{"type":"end"}') == [p.End()]
    assert server.receive_text('{"type":"end"}') == []
    [violation] = server.receive_bytes(b"\x00\x00")
    assert isinstance(violation, p.ProtocolViolation) and violation.code == p.UNEXPECTED
    assert server.receive_text('{"type":"end"}') == []  # failed connections stay silent


def test_flush_is_passed_on_until_end() -> None:
    server = open_server()
    client = p.ClientConnection()
    assert server.receive_text(client.flush()) == [p.Flush()]
    assert server.state == "open"
    server.receive_text('{"type":"end"}')
    assert server.receive_text('{"type":"flush"}') == []


def test_cancel_closes() -> None:
    server = open_server()
    assert server.receive_text('{"type":"cancel"}') == [p.Cancel()]
    assert server.state == "closed"
    assert server.receive_bytes(b"\x00\x00") == []
    server2 = open_server()
    server2.close()
    assert server2.receive_text('{"type":"end"}') == []


@pytest.mark.parametrize("frame,code", [
    ("not json", p.BAD_MESSAGE),
    ("[1, 2]", p.BAD_MESSAGE),
    ('{"no_type": 1}', p.BAD_MESSAGE),
    ('{"type": 5}', p.BAD_MESSAGE),
    ('{"type": "end"}', p.UNEXPECTED),
    ("[" * 100_000, p.TOO_LARGE),
    ("[" * 10_000 + "]" * 10_000, p.BAD_MESSAGE),
    (hello_frame(protocol=2), p.UNSUPPORTED_VERSION),
    (hello_frame(protocol=None), p.UNSUPPORTED_VERSION),
    (hello_frame(sample_rate=8000), p.BAD_MESSAGE),
    (hello_frame(session_id=7), p.BAD_MESSAGE),
    (hello_frame(session_id="x" * 500), p.BAD_MESSAGE),
    (hello_frame(language="e1"), p.BAD_MESSAGE),
    (hello_frame(language=3), p.BAD_MESSAGE),
    (hello_frame(prompt=["a"]), p.BAD_MESSAGE),
    (hello_frame(offset=-1), p.BAD_MESSAGE),
    (hello_frame(offset=True), p.BAD_MESSAGE),
    (hello_frame(offset=1.5), p.BAD_MESSAGE),
    (hello_frame(options=[]), p.BAD_MESSAGE),
])
def test_malformed_first_frames_fail_cleanly(frame: str, code: str) -> None:
    server = p.ServerConnection()
    [violation] = server.receive_text(frame)
    assert isinstance(violation, p.ProtocolViolation)
    assert violation.code == code and violation.message
    assert server.state == "failed"
    assert server.receive_text(hello_frame()) == []


def test_audio_before_hello_hello_twice_and_odd_bytes() -> None:
    server = p.ServerConnection()
    [v1] = server.receive_bytes(b"\x00\x00")
    assert isinstance(v1, p.ProtocolViolation) and v1.code == p.UNEXPECTED
    server = open_server()
    [v2] = server.receive_text(hello_frame())
    assert isinstance(v2, p.ProtocolViolation) and v2.code == p.UNEXPECTED
    server = open_server()
    [v3] = server.receive_bytes(b"\x00\x00\x00")
    assert isinstance(v3, p.ProtocolViolation) and v3.code == p.BAD_AUDIO


@pytest.mark.parametrize("frame", [
    '{"type": "ready"}',
    '{"type": "ready", "session_id": "s", "offset": -3}',
    '{"type": "partial", "utterance_id": 1, "start": 10, "end": 5}',
    '{"type": "final", "utterance_id": 1, "text": "x", "start": 0, "end": 1, "words": {}}',
    '{"type": "final", "utterance_id": 1, "text": "x", "start": 0, "end": 1, "words": [1]}',
    '{"type": "final", "utterance_id": 1, "text": "x", "start": 0, "end": 1,'
    ' "words": [{"word": "a", "start": 0, "end": 1, "p": "high"}]}',
    '{"type": "final", "utterance_id": 1, "text": "x", "start": 0, "end": 1, "decode_ms": NaN}',
    '{"type": "ack"}',
    '{"type": "error", "message": "no code"}',
    '{"type": "bye", "upto": "x"}',
    "{",
])
def test_malformed_server_frames_fail_the_client(frame: str) -> None:
    client = p.ClientConnection()
    client.hello(p.Hello(session_id="s"))
    [violation] = client.receive_text(frame)
    assert isinstance(violation, p.ProtocolViolation)
    assert client.state == "failed"


def test_random_frames_never_raise() -> None:
    """Fuzz: random text and bytes give messages or violations, never exceptions."""
    rng = random.Random(1234)
    alphabet = '{}[]":,0123456789.-eE truefalsnl\\u"typehelloendcancel'
    for _ in range(2000):
        server = open_server() if rng.random() < 0.5 else p.ServerConnection()
        client = p.ClientConnection()
        client.hello(p.Hello(session_id="s"))
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        blob = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 9)))
        for result in (server.receive_text(text), server.receive_bytes(blob),
                       client.receive_text(text)):
            assert all(isinstance(m, (p.ProtocolViolation, p.Hello, p.Audio, p.Flush, p.End, p.Cancel,
                                      p.Ready, p.Partial, p.Final, p.Ack, p.Error, p.Bye))
                       for m in result)
