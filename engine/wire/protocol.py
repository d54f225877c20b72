"""Sottovoce native wire protocol v1, sans-I/O (bytes and strings in, typed messages out).

Frames (see docs/protocol.md for the full description):
- text frames are JSON objects with a ``type`` and ``v`` (protocol version);
- binary frames are audio: signed 16-bit little-endian mono PCM at 16 kHz, client to server only;
- every position is a sample count on the session's audio timeline.

Client -> server: ``hello`` (first frame), audio, ``flush`` (close the utterance in flight now, as
on push-to-talk release), ``vocabulary`` (replace the session's vocabulary), ``end`` (flush and
finish), ``cancel``.
Server -> client: ``ready``, ``partial``, ``final``, ``ack`` (audio before ``upto`` is fully
handled and may be forgotten by the client), ``error``, ``bye``.

Unknown ``type`` values are ignored so newer peers can add messages. Anything malformed turns the
connection into the ``failed`` state with a `ProtocolViolation` the caller answers with an
``error`` frame and a clean close. Nothing here touches a socket, a thread or a clock: the server
and client wrap these state machines around ``websockets`` (like websockets' own sans-I/O core).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.core.hotwords import checked_terms
from engine.types import SAMPLE_RATE, Word

PROTOCOL_VERSION = 1
MAX_TEXT_FRAME_CHARS = 64 * 1024  # control frames are small; a larger one is an attack or a bug
MAX_PROMPT_CHARS = 1000
MAX_SESSION_ID_CHARS = 128

Int16Audio = npt.NDArray[np.int16]

# Error codes carried in ``error`` frames.
BAD_MESSAGE = "bad_message"
BAD_AUDIO = "bad_audio"
UNSUPPORTED_VERSION = "unsupported_version"
UNEXPECTED = "unexpected_message"
BUSY = "busy"
UNAUTHORIZED = "unauthorized"
TOO_LARGE = "too_large"
RATE_LIMITED = "rate_limited"
IDLE_TIMEOUT = "idle_timeout"
SESSION_EXPIRED = "session_expired"
INTERNAL = "internal"


# --- messages -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Hello:
    """Opens (or resumes) a session. ``offset`` is the timeline position of the first audio
    sample that follows: 0 for a new session, the last ``ack.upto`` when resuming."""

    session_id: str
    language: str | None = None
    prompt: str | None = None
    offset: int = 0
    options: dict[str, Any] = field(default_factory=dict, compare=False)
    sample_rate: int = SAMPLE_RATE
    protocol: int = PROTOCOL_VERSION
    vocabulary: tuple[str, ...] = ()  # words and phrases decoding is biased towards


@dataclass(frozen=True)
class Vocabulary:
    """Client replaces the session's vocabulary; decodes issued after it use the new one."""

    terms: tuple[str, ...]


@dataclass(frozen=True)
class Audio:
    """PCM samples received, placed at ``start`` on the session timeline."""

    samples: Int16Audio
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.samples)


@dataclass(frozen=True)
class Flush:
    """Client asks the server to close the utterance in flight now (push-to-talk release)."""


@dataclass(frozen=True)
class End:
    """Client is done: the server decodes what is pending, sends its last ``final``, then ``bye``."""


@dataclass(frozen=True)
class Cancel:
    """Client abandons the session: the server drops pending audio and says ``bye``."""


@dataclass(frozen=True)
class Ready:
    session_id: str
    model: str
    offset: int = 0


@dataclass(frozen=True)
class Partial:
    """Running text of the utterance in flight. ``trigger`` is the timeline position whose
    arrival made the server start this decode and ``server_ms`` the server's time from that
    arrival to sending this message (queueing + decoding), so the client can split its own
    round trip into network and server time without synchronised clocks."""

    utterance_id: int
    committed: str
    tentative: str
    start: int
    end: int
    trigger: int = 0
    server_ms: float = 0.0


@dataclass(frozen=True)
class Final:
    """The text of one finished utterance; ``decode_ms`` is the model's batch decode time,
    ``trigger``/``server_ms`` as in `Partial`."""

    utterance_id: int
    text: str
    words: tuple[Word, ...]
    start: int
    end: int
    decode_ms: float
    language: str | None = None
    trigger: int = 0
    server_ms: float = 0.0


@dataclass(frozen=True)
class Ack:
    upto: int


@dataclass(frozen=True)
class Error:
    code: str
    message: str


@dataclass(frozen=True)
class Bye:
    upto: int = 0


@dataclass(frozen=True)
class ProtocolViolation:
    """The peer broke the protocol; answer with ``error{code, message}`` and close."""

    code: str
    message: str


ClientMessage = Hello | Audio | Flush | Vocabulary | End | Cancel
ServerMessage = Ready | Partial | Final | Ack | Error | Bye


class _Malformed(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


# --- field helpers ------------------------------------------------------------------------


def _load_object(text: str) -> dict[str, Any]:
    if len(text) > MAX_TEXT_FRAME_CHARS:
        raise _Malformed(TOO_LARGE, f"control frame over {MAX_TEXT_FRAME_CHARS} characters")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _Malformed(BAD_MESSAGE, f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _Malformed(BAD_MESSAGE, "a control frame must be a JSON object")
    if not isinstance(data.get("type"), str):
        raise _Malformed(BAD_MESSAGE, "a control frame needs a string 'type'")
    return data


def _int(data: dict[str, Any], key: str, default: int | None = None, *, minimum: int = 0) -> int:
    value = data.get(key, default)
    # bool is an int subclass in Python; true/false is never a valid position.
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise _Malformed(BAD_MESSAGE, f"'{key}' must be an integer >= {minimum}")
    return value


def _number(data: dict[str, Any], key: str, default: float) -> float:
    value = data.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise _Malformed(BAD_MESSAGE, f"'{key}' must be a finite number")
    return float(value)


def _str(data: dict[str, Any], key: str, default: str | None = None, *,
         optional: bool = False, max_len: int = MAX_TEXT_FRAME_CHARS) -> str | None:
    value = data.get(key, default)
    if value is None and optional:
        return None
    if not isinstance(value, str) or len(value) > max_len:
        raise _Malformed(BAD_MESSAGE, f"'{key}' must be a string of at most {max_len} chars")
    # JSON can escape a lone surrogate (\ud800), which no UTF-8 frame can carry back.
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _Malformed(BAD_MESSAGE, f"'{key}' must be Unicode text (a lone surrogate)") from None
    return value


def _req_str(data: dict[str, Any], key: str, default: str | None = None, **kw: Any) -> str:
    value = _str(data, key, default, **kw)
    assert value is not None  # _str raises unless optional
    return value


def _words(raw: object) -> tuple[Word, ...]:
    if not isinstance(raw, list):
        raise _Malformed(BAD_MESSAGE, "'words' must be a list")
    words = []
    for item in raw:
        if not isinstance(item, dict):
            raise _Malformed(BAD_MESSAGE, "each word must be an object")
        start = _int(item, "start")
        words.append(Word(text=_req_str(item, "word"), start=start,
                          end=_int(item, "end", minimum=start),
                          probability=_number(item, "p", 1.0)))
    return tuple(words)


def _vocabulary(data: dict[str, Any]) -> tuple[str, ...]:
    try:
        return checked_terms(data.get("vocabulary", []))
    except ValueError as exc:
        raise _Malformed(BAD_MESSAGE, str(exc)) from None


def _hello(data: dict[str, Any]) -> Hello:
    version = data.get("protocol")
    if version != PROTOCOL_VERSION:
        raise _Malformed(UNSUPPORTED_VERSION,
                         f"protocol {version!r} not supported; this server speaks {PROTOCOL_VERSION}")
    rate = _int(data, "sample_rate", SAMPLE_RATE)
    if rate != SAMPLE_RATE:
        raise _Malformed(BAD_MESSAGE, f"sample_rate must be {SAMPLE_RATE}")
    language = _str(data, "language", optional=True, max_len=8)
    if language is not None and not language.isalpha():
        raise _Malformed(BAD_MESSAGE, "'language' must be an ISO 639-1 code")
    language = language.lower() if language is not None else None  # Whisper's codes
    options = data.get("options", {})
    if not isinstance(options, dict):
        raise _Malformed(BAD_MESSAGE, "'options' must be an object")
    return Hello(
        session_id=_req_str(data, "session_id", max_len=MAX_SESSION_ID_CHARS),
        language=language,
        prompt=_str(data, "prompt", optional=True, max_len=MAX_PROMPT_CHARS),
        offset=_int(data, "offset", 0), options=options, sample_rate=rate,
        vocabulary=_vocabulary(data),
    )


# --- encoding -----------------------------------------------------------------------------


def _frame(type_: str, **fields: Any) -> str:
    return json.dumps({"type": type_, "v": PROTOCOL_VERSION, **fields}, ensure_ascii=False,
                      separators=(",", ":"), allow_nan=False)


def encode_server(message: ServerMessage) -> str:
    """One server message as a JSON text frame."""
    if isinstance(message, Ready):
        return _frame("ready", session_id=message.session_id, model=message.model,
                      offset=message.offset)
    if isinstance(message, Partial):
        return _frame("partial", utterance_id=message.utterance_id, committed=message.committed,
                      tentative=message.tentative, start=message.start, end=message.end,
                      trigger=message.trigger, server_ms=round(message.server_ms, 2))
    if isinstance(message, Final):
        words = [{"word": w.text, "start": w.start, "end": w.end, "p": round(w.probability, 4)}
                 for w in message.words]
        return _frame("final", utterance_id=message.utterance_id, text=message.text, words=words,
                      start=message.start, end=message.end,
                      decode_ms=round(message.decode_ms, 2), language=message.language,
                      trigger=message.trigger, server_ms=round(message.server_ms, 2))
    if isinstance(message, Ack):
        return _frame("ack", upto=message.upto)
    if isinstance(message, Error):
        return _frame("error", code=message.code, message=message.message)
    return _frame("bye", upto=message.upto)


def encode_hello(hello: Hello) -> str:
    return _frame("hello", protocol=hello.protocol, session_id=hello.session_id,
                  sample_rate=hello.sample_rate, language=hello.language, prompt=hello.prompt,
                  offset=hello.offset, options=hello.options,
                  **({"vocabulary": list(hello.vocabulary)} if hello.vocabulary else {}))


def float_to_pcm16(audio: npt.NDArray[np.float32]) -> bytes:
    """float32 in [-1, 1] -> s16le bytes (clipped, so a hot microphone cannot wrap around)."""
    clipped = np.clip(audio, -1.0, 1.0)
    return bytes((clipped * 32767.0).round().astype("<i2").tobytes())


def pcm16_to_float(samples: Int16Audio) -> npt.NDArray[np.float32]:
    return (samples.astype(np.float32) / 32768.0).astype(np.float32)


# --- state machines -----------------------------------------------------------------------


class ServerConnection:
    """The server's view of one connection: feed it frames, get typed client messages.

    States: ``awaiting_hello`` -> ``open`` -> ``ending`` (after ``end``) -> ``closed``;
    ``failed`` after a violation (every later frame is ignored). Audio positions are assigned
    here from the hello's ``offset``, so the session logic never trusts client arithmetic.
    """

    def __init__(self) -> None:
        self.state = "awaiting_hello"
        self.position = 0  # timeline position of the next audio sample
        self.hello: Hello | None = None

    def receive_text(self, text: str) -> list[ClientMessage | ProtocolViolation]:
        if self.state in ("failed", "closed"):
            return []
        try:
            return self._text(_load_object(text))
        except _Malformed as exc:
            return [self._fail(exc.code, str(exc))]

    def _text(self, data: dict[str, Any]) -> list[ClientMessage | ProtocolViolation]:
        kind = data["type"]
        if self.state == "awaiting_hello":
            if kind != "hello":
                raise _Malformed(UNEXPECTED, f"expected 'hello' first, got {kind!r}")
            self.hello = _hello(data)
            self.position = self.hello.offset
            self.state = "open"
            return [self.hello]
        if kind == "hello":
            raise _Malformed(UNEXPECTED, "'hello' sent twice")
        if kind == "end":
            if self.state == "ending":
                return []  # a repeated end changes nothing
            self.state = "ending"
            return [End()]
        if kind == "cancel":
            self.state = "closed"
            return [Cancel()]
        if kind == "flush":
            return [] if self.state == "ending" else [Flush()]
        if kind == "vocabulary":
            return [] if self.state == "ending" else [Vocabulary(_vocabulary(data))]
        return []  # unknown types are ignored for forward compatibility

    def receive_bytes(self, data: bytes) -> list[ClientMessage | ProtocolViolation]:
        if self.state in ("failed", "closed"):
            return []
        if self.state == "awaiting_hello":
            return [self._fail(UNEXPECTED, "audio before 'hello'")]
        if self.state == "ending":
            return [self._fail(UNEXPECTED, "audio after 'end'")]
        if len(data) % 2:
            return [self._fail(BAD_AUDIO, "audio frames hold whole 16-bit samples (even length)")]
        samples = np.frombuffer(data, dtype="<i2").astype(np.int16)
        message = Audio(samples=samples, start=self.position)
        self.position += len(samples)
        return [message]

    def close(self) -> None:
        self.state = "closed"

    def _fail(self, code: str, message: str) -> ProtocolViolation:
        self.state = "failed"
        return ProtocolViolation(code, message)


class ClientConnection:
    """The client's view: builds outgoing frames and parses the server's replies.

    States: ``new`` -> ``hello_sent`` -> ``open`` (after ``ready``) -> ``ending`` -> ``closed``
    (after ``bye``); ``failed`` after a violation or an ``error`` from the server.
    """

    def __init__(self) -> None:
        self.state = "new"
        self.position = 0  # timeline position of the next audio sample we send

    def hello(self, hello: Hello) -> str:
        if self.state != "new":
            raise RuntimeError("hello() may only be called once per connection")
        self.state = "hello_sent"
        self.position = hello.offset
        return encode_hello(hello)

    def audio(self, samples: Int16Audio) -> bytes:
        if self.state not in ("hello_sent", "open"):
            raise RuntimeError(f"cannot send audio in state {self.state}")
        self.position += len(samples)
        return bytes(np.asarray(samples, dtype="<i2").tobytes())

    def flush(self) -> str:
        return _frame("flush")

    def vocabulary(self, terms: tuple[str, ...]) -> str:
        """Replace the session's vocabulary (the server refuses more than
        `engine.core.hotwords.MAX_TERMS` terms)."""
        return _frame("vocabulary", vocabulary=list(terms))

    def keepalive(self) -> str:
        """Nothing to say, still here (the server ignores it except for its idle timer)."""
        return _frame("keepalive")

    def end(self) -> str:
        self.state = "ending"
        return _frame("end")

    def cancel(self) -> str:
        self.state = "ending"
        return _frame("cancel")

    def receive_text(self, text: str) -> list[ServerMessage | ProtocolViolation]:
        if self.state in ("failed", "closed"):
            return []
        try:
            message = self._parse(_load_object(text))
        except _Malformed as exc:
            self.state = "failed"
            return [ProtocolViolation(exc.code, str(exc))]
        if message is None:
            return []
        if isinstance(message, Ready):
            self.state = "open" if self.state == "hello_sent" else self.state
        elif isinstance(message, Error):
            self.state = "failed"
        elif isinstance(message, Bye):
            self.state = "closed"
        return [message]

    def receive_bytes(self, data: bytes) -> list[ServerMessage | ProtocolViolation]:
        if self.state in ("failed", "closed"):
            return []
        self.state = "failed"
        return [ProtocolViolation(UNEXPECTED, "the server never sends binary frames")]

    def _parse(self, data: dict[str, Any]) -> ServerMessage | None:
        kind = data["type"]
        if kind == "ready":
            return Ready(session_id=_req_str(data, "session_id", max_len=MAX_SESSION_ID_CHARS),
                         model=_req_str(data, "model", ""), offset=_int(data, "offset", 0))
        if kind == "partial":
            start = _int(data, "start")
            return Partial(utterance_id=_int(data, "utterance_id"),
                           committed=_req_str(data, "committed", ""),
                           tentative=_req_str(data, "tentative", ""), start=start,
                           end=_int(data, "end", minimum=start), trigger=_int(data, "trigger", 0),
                           server_ms=_number(data, "server_ms", 0.0))
        if kind == "final":
            start = _int(data, "start")
            return Final(utterance_id=_int(data, "utterance_id"), text=_req_str(data, "text"),
                         words=_words(data.get("words", [])), start=start,
                         end=_int(data, "end", minimum=start),
                         decode_ms=_number(data, "decode_ms", 0.0),
                         language=_str(data, "language", optional=True, max_len=8),
                         trigger=_int(data, "trigger", 0),
                         server_ms=_number(data, "server_ms", 0.0))
        if kind == "ack":
            return Ack(upto=_int(data, "upto"))
        if kind == "error":
            return Error(code=_req_str(data, "code", max_len=64),
                         message=_req_str(data, "message", ""))
        if kind == "bye":
            return Bye(upto=_int(data, "upto", 0))
        return None  # unknown types are ignored for forward compatibility
