"""ServerSession without sockets: real speech in, wire messages out, simulated clock.

Decode results come from a scripted transcript (the model is exercised in test_server.py);
what is checked here is the session's own logic: timeline offsets, flushes, acks.
"""

from __future__ import annotations

import gc
import types
from collections import deque
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.audio.decode import load_audio
from engine.core.voice import EnergyVad
from engine.server.session import ServerSession, SessionOptions
from engine.types import Segment, Transcript, Word
from engine.wire import protocol as p


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def pcm(audio: np.ndarray) -> np.ndarray:
    return np.frombuffer(p.float_to_pcm16(audio), dtype="<i2").astype(np.int16)


def feed_all(session: ServerSession, samples: np.ndarray, clock: Clock, start: int,
             block: int = 512) -> list[p.ServerMessage]:
    out: list[p.ServerMessage] = []
    for i in range(0, len(samples), block):
        clock.now += block / 16_000
        out += session.feed(p.Audio(samples[i:i + block], start + i))
    return out


def scripted(request_audio_len: int, text: str) -> Transcript:
    words = tuple(Word(" " + w, i * 1000, (i + 1) * 1000) for i, w in enumerate(text.split()))
    return Transcript(segments=(Segment(" " + text, 0, request_audio_len, words=words,
                                        avg_logprob=-0.1),), language="en", decode_ms=12.0)


def run_decodes(session: ServerSession, clock: Clock, text: str) -> list[p.ServerMessage]:
    out: list[p.ServerMessage] = []
    while (request := session.next_request()) is not None:
        clock.now += 0.05
        out += session.on_result(request, scripted(len(request.audio), text))
    return out


def test_silence_is_acked_and_yields_no_text() -> None:
    clock = Clock()
    session = ServerSession(p.Hello("s"), SessionOptions(), EnergyVad(), clock)
    out = feed_all(session, np.zeros(3 * 16_000, dtype=np.int16), clock, 0)
    acks = [m for m in out if isinstance(m, p.Ack)]
    assert acks and all(b.upto - a.upto >= 4000 for a, b in zip(acks, acks[1:], strict=False))
    assert acks[-1].upto >= 3 * 16_000 - 16_000  # all but the pre-roll ring
    assert session.next_request() is None and session.idle
    assert not [m for m in out if isinstance(m, (p.Final, p.Partial))]


def test_speech_gives_final_on_the_wire_timeline(jfk_wav: Path) -> None:
    clock = Clock()
    offset = 48_000
    session = ServerSession(p.Hello("s", offset=offset), SessionOptions(), EnergyVad(), clock)
    samples = pcm(load_audio(jfk_wav))[: 5 * 16_000 + 100]  # not a whole number of windows
    out = feed_all(session, samples, clock, offset)
    out += run_decodes(session, clock, "and so my fellow")
    out += session.flush()
    assert session.position == offset + len(samples)  # the tail is kept as it is, unpadded
    out += run_decodes(session, clock, "And so my fellow Americans.")
    finals = [m for m in out if isinstance(m, p.Final)]
    assert finals and finals[-1].text == "And so my fellow Americans."
    assert all(offset <= f.start < f.end <= offset + len(samples) for f in finals)
    assert finals[-1].words[0].start >= finals[-1].start
    assert finals[-1].decode_ms == 12.0 and finals[-1].trigger <= offset + len(samples)
    partials = [m for m in out if isinstance(m, p.Partial)]
    assert all(m.start >= offset for m in partials)
    assert isinstance(out[-1], p.Ack)  # an ack follows every final
    assert session.idle and session.final_ack() == offset + len(samples)


def test_a_partial_goes_stale_when_its_utterance_ends(jfk_wav: Path) -> None:
    clock = Clock()
    session = ServerSession(p.Hello("s"), SessionOptions(), EnergyVad(), clock)
    feed_all(session, pcm(load_audio(jfk_wav))[:3 * 16_000], clock, 0)
    partial = session.next_request()
    assert partial is not None and partial.kind == "partial"
    assert not session.is_stale(partial)  # still being spoken
    session.flush()  # the utterance ends while the partial is out
    assert session.is_stale(partial)
    # Withdrawn, the partial comes back empty and costs nothing; the final is asked for next.
    assert session.on_result(partial, Transcript(segments=(), duration=len(partial.audio))) == []
    final = session.next_request()
    assert final is not None and final.kind == "final" and not session.is_stale(final)


def test_cancel_forgets_everything(jfk_wav: Path) -> None:
    clock = Clock()
    session = ServerSession(p.Hello("s", prompt="previous words"), SessionOptions(),
                            EnergyVad(), clock)
    feed_all(session, pcm(load_audio(jfk_wav))[:3 * 16_000], clock, 0)
    session.flush()
    session.cancel()
    assert session.next_request() is None


def retained(root: object) -> int:
    """How much a session holds: the items of every container and array reachable from it
    (not through classes, modules or functions). Counted, not timed: a structure that grows
    with the session's age shows here whatever the machine's speed."""
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType,
                                               types.BuiltinFunctionType)):
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            total += obj.size
            continue
        if isinstance(obj, (str, bytes)):
            total += len(obj)
            continue
        if isinstance(obj, (list, tuple, dict, set, frozenset, deque)):
            total += len(obj)
        stack.extend(gc.get_referents(obj))
    return total


def flush_flood(session: ServerSession, clock: Clock, pairs: range, sent: int) -> int:
    """Audio+flush pairs of varied lengths, speech half the time, each decode answered."""
    for i in pairs:
        frame = np.full(100 + i % 700, 3000 if i % 50 < 25 else 0, dtype=np.int16)
        clock.now += len(frame) / 16_000
        session.feed(p.Audio(frame, sent))
        sent += len(frame)
        session.flush()
        assert session.position == sent
        while (job := session.next_request()) is not None:
            session.on_result(job, scripted(len(job.audio), "word"))
    return sent


def test_flushes_keep_exact_positions_and_no_state_grows_with_age() -> None:
    """A flush takes the tail shorter than a window as it is (no silence padded in), so
    positions stay the client's; and nothing the session keeps grows with the number of
    audio+flush pairs (a flood of them once cost ~12 ms a frame after 30k flushes: the old
    session kept one padding record per flush and walked them all for every frame)."""
    clock = Clock()
    session = ServerSession(p.Hello("s"), SessionOptions(), EnergyVad(), clock)
    sent = flush_flood(session, clock, range(1400), 0)  # 1400 and 2800: the same phase
    young = retained(session)
    flush_flood(session, clock, range(1400, 2800), sent)
    assert retained(session) <= young + 64, (young, retained(session))


UNBOUNDED_LIMIT = 96  # the prompt's recent texts (<= 200 chars) and a few fields

Frame = tuple[str, int, bool]  # ("audio", samples, speech) | ("flush", 0, False) | ("decode", ...)

frames_strategy = st.lists(st.one_of(
    st.tuples(st.just("audio"), st.integers(0, 3000), st.booleans()),
    st.tuples(st.just("flush"), st.just(0), st.just(False)),
    st.tuples(st.just("decode"), st.just(0), st.just(False))), min_size=1, max_size=60)


def play(session: ServerSession, clock: Clock, frames: list[Frame], sent: int) -> int:
    """Send ``frames``, checking after each that the session's position is what was sent;
    then a flush and every decode answered, so the next round starts from the same state."""
    for kind, length, speech in frames:
        if kind == "audio":
            frame = np.full(length, 3000 if speech else 0, dtype=np.int16)
            clock.now += length / 16_000
            session.feed(p.Audio(frame, sent))
            sent += length
        elif kind == "flush":
            session.flush()
        else:
            if (job := session.next_request()) is not None:
                session.on_result(job, scripted(len(job.audio), "word"))
        assert session.position == sent
    session.flush()
    while (job := session.next_request()) is not None:
        session.on_result(job, scripted(len(job.audio), "word"))
    assert session.position == sent and session.idle
    return sent


def unbounded_entries(root: object) -> int:
    """Items held in containers reachable from ``root`` that have no ``maxlen`` of their own
    (lists, dicts, sets, plain deques): a flush-by-flush record would show here."""
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType,
                                               types.BuiltinFunctionType, np.ndarray, str)):
            continue
        seen.add(id(obj))
        if isinstance(obj, (list, dict, set)) or (isinstance(obj, deque) and obj.maxlen is None):
            total += len(obj)
        stack.extend(gc.get_referents(obj))
    return total


@settings(max_examples=40, deadline=None)
@given(frames=frames_strategy, offset=st.integers(0, 10**9))
def test_any_audio_flush_sequence_keeps_positions_and_bounded_state(
        frames: list[Frame], offset: int) -> None:
    """Whatever mix of frame lengths, speech, flushes and decodes: the position is always
    the samples sent (from the hello's offset), and after each round (the mix, a flush, every
    decode answered) the session's containers without a fixed capacity hold a few items only,
    however many rounds came before (the old session kept one record per flush)."""
    clock = Clock()
    session = ServerSession(p.Hello("s", offset=offset), SessionOptions(), EnergyVad(), clock)
    sent = offset
    for _ in range(40):
        sent = play(session, clock, frames, sent)
        assert unbounded_entries(session) <= UNBOUNDED_LIMIT
