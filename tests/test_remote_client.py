"""Client pieces without a server: the resend buffer, the send log, push-to-talk gating, URL
parsing, and the keyring adapter (real `keyring` library; the backend is an in-memory one
because a test must not touch the user's real keyring)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.segmenter import SegmenterOptions
from engine.errors import EngineError
from engine.events import Event, FinalText
from engine.remote.buffer import AudioBuffer, SendLog
from engine.remote.client import Endpoint, RemoteLiveEngine, RemoteOptions, Timing


def samples(n: int, start: int = 0) -> np.ndarray:
    return (np.arange(start, start + n) % 30000).astype(np.int16)


def test_buffer_reads_acks_and_coalesces() -> None:
    buf = AudioBuffer(max_samples=10_000)
    for i in range(5):
        buf.append(samples(1000, i * 1000))
    assert buf.end == 5000 and buf.read(5000, 100) is None
    start, data = buf.read(1500, 2000)  # type: ignore[misc]
    assert start == 1500 and len(data) == 2000 and data[0] == 1500
    buf.ack(2500)
    start, data = buf.read(0, 10_000)  # type: ignore[misc]
    assert start == 2500 and len(data) == 2500 and data[0] == 2500
    buf.ack(100)  # acks never go backwards
    assert buf.acked == 2500
    buf.mark_flush()
    assert buf.flushes_after(0) == [5000]
    buf.ack(5000)
    assert buf.flushes_after(0) == [] and buf.read(0, 10) is None


def test_buffer_overflow_drops_oldest_and_counts() -> None:
    buf = AudioBuffer(max_samples=2500)
    for i in range(4):
        buf.append(samples(1000, i * 1000))
    assert buf.dropped == 2000 and buf.acked == 2000
    start, data = buf.read(0, 10_000)  # type: ignore[misc]
    assert start == 2000 and len(data) == 2000


def test_send_log_finds_the_frame_that_carried_a_sample() -> None:
    log = SendLog()
    log.sent(512, 1.0)
    log.sent(1024, 2.0)
    log.sent(1536, 3.0)
    assert log.time_of(1000) == 2.0 and log.time_of(1024) == 2.0 and log.time_of(1025) == 3.0
    assert log.time_of(5000) is None
    log.rewind(1024)
    assert log.time_of(1536) is None and log.time_of(600) == 2.0


def test_timing_splits_network_and_server_time() -> None:
    t = Timing(rtt_ms=300.0, server_ms=250.0, decode_ms=200.0, audio_ms=2000.0)
    m = t.metrics("final", dropped=3)
    assert m.network_ms == 50.0 and m.decode_ms == 200.0 and m.rtf == 0.1
    assert m.dropped_frames == 3
    assert Timing(100.0, None, 0.0, 0.0).metrics("partial", 0).network_ms is None


def test_push_to_talk_sends_only_the_pressed_span_with_preroll() -> None:
    """The gate is the stream core's segmenter in push-to-talk mode: the same pre-roll as the
    local engine (``preroll_ms`` plus the start windows), the pressed span, a flush at the
    release, and the tail shorter than a window when capture stops."""
    engine = RemoteLiveEngine(lambda e: None, url="ws://127.0.0.1:1",
                              options=RemoteOptions(mode="ptt", preroll_ms=400))
    block = np.full(512, 0.25, dtype=np.float32)  # 32 ms
    for _ in range(40):  # before the press: nothing is sent
        engine._forward(block)
    assert engine.buffer.end == 0
    engine.begin_utterance()
    for _ in range(5):
        engine._forward(block)
    engine.end_utterance()
    engine._forward(block)
    ring = SegmenterOptions().windows(400) + SegmenterOptions().start_windows
    assert engine.buffer.end == 512 * (ring + 5)  # pre-roll + pressed blocks
    assert engine.buffer.flushes_after(0) == [engine.buffer.end]
    engine.begin_utterance()
    engine._forward(block[:100])
    with engine._gate_lock:  # what the capture thread does when it stops
        assert engine._gate is not None
        engine._send_gated(engine._gate.flush())
    assert engine.buffer.end == 512 * (ring + 5) + 512 + 100  # the new pre-roll: one window
    assert engine.buffer.flushes_after(512 * (ring + 5)) == [engine.buffer.end]


def test_urls_and_options_are_validated() -> None:
    assert Endpoint.parse("ws://127.0.0.1:8765").kind == "native"
    assert Endpoint.parse("whisperlives://h:1").url == "wss://h:1/"
    with pytest.raises(EngineError):
        Endpoint.parse("ftp://x")
    with pytest.raises(EngineError):
        RemoteLiveEngine(lambda e: None, url="ws://")
    with pytest.raises(ValueError):
        RemoteOptions(mode="always")
    with pytest.raises(ValueError):
        RemoteOptions(language="e5")


def test_finals_get_sentence_form_unless_they_go_on_with_an_open_sentence() -> None:
    """Any server's finals reach the user capitalised (a WhisperLive server's too), except one
    that goes on with the sentence the last final left open: our server's policy keeps that
    one's lower-case start, and the client must not undo it (engine.core.form)."""
    events: list[Event] = []
    engine = RemoteLiveEngine(events.append, url="ws://127.0.0.1:1")
    timing = Timing(rtt_ms=100.0, server_ms=None, decode_ms=50.0, audio_ms=3000.0)
    sr = 16000
    for uid, (text, start) in enumerate([("and so, my fellow Americans,", 0),
                                         ("ask not what your country can do,", 4 * sr),
                                         ("ask what you can do.", 8 * sr),
                                         ("for your country.", 12 * sr),
                                         ("well,", 16 * sr),
                                         ("much later", 60 * sr)]):
        engine.on_final(uid, text, (), start, start + 3 * sr, timing)
    assert [e.text for e in events if isinstance(e, FinalText)] == [
        "And so, my fellow Americans,", "ask not what your country can do,",
        "ask what you can do.", "For your country.", "Well,", "Much later"]


def test_api_key_lives_in_the_keyring(monkeypatch: pytest.MonkeyPatch) -> None:
    keyring = pytest.importorskip("keyring")
    from keyring.backend import KeyringBackend
    from keyring.backends import fail

    from engine.remote import secrets

    class MemoryKeyring(KeyringBackend):
        priority = 1  # type: ignore[assignment]

        def __init__(self) -> None:
            super().__init__()
            self.store: dict[tuple[str, str], str] = {}

        def get_password(self, service: str, username: str) -> str | None:
            return self.store.get((service, username))

        def set_password(self, service: str, username: str, password: str) -> None:
            self.store[(service, username)] = password

        def delete_password(self, service: str, username: str) -> None:
            self.store.pop((service, username), None)

    memory = MemoryKeyring()
    monkeypatch.setattr(keyring, "get_keyring", lambda: memory)
    assert secrets.load_api_key("ws://h:1") is None
    secrets.store_api_key("ws://h:1", "k-123")
    assert secrets.load_api_key("ws://h:1") == "k-123"
    assert memory.store == {("sottovoce", "api-key:ws://h:1"): "k-123"}
    monkeypatch.setattr(keyring, "get_keyring", lambda: fail.Keyring())
    with pytest.raises(secrets.KeyringUnavailableError, match="keyring"):
        secrets.load_api_key("ws://h:1")
