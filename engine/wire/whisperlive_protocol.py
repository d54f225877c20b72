"""The WhisperLive wire format (client side), sans-I/O.

WhisperLive (collabora/WhisperLive) is the common open WebSocket Whisper server with faster-whisper,
OpenVINO and TensorRT-LLM backends. Its protocol, as its server speaks it:

- client -> server: a first JSON text frame ``{uid, language, task, model, use_vad, ...}``, then
  binary frames of float32 little-endian mono 16 kHz samples, then the bytes ``END_OF_AUDIO``;
- server -> client, JSON text frames, all carrying ``uid``:
  ``{"message": "SERVER_READY", "backend": ...}``; ``{"status": "WAIT", "message": minutes}``
  (server full); ``{"status": "ERROR" | "WARNING", "message": ...}``;
  ``{"message": "DISCONNECT"}``; ``{"language": ..., "language_prob": ...}``; and
  ``{"segments": [{"start": "0.000", "end": "1.520", "text": ..., "completed": bool}, ...]}`` —
  the last few segments again each time; the TensorRT backend may send text only (no times, no
  ``completed``).

`WhisperLiveConnection` builds frames and parses replies; `SegmentTracker` turns the repeated
segment lists into partial text and each completed segment's final, exactly once.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.types import SAMPLE_RATE
from engine.wire.protocol import MAX_TEXT_FRAME_CHARS, ProtocolViolation

END_OF_AUDIO = b"END_OF_AUDIO"


@dataclass(frozen=True)
class WlReady:
    """``server`` is "sottovoce" when the server is ours (it finishes the audio it has after
    ``END_OF_AUDIO`` and closes; WhisperLive's own server drops it)."""

    backend: str
    server: str = ""


@dataclass(frozen=True)
class WlWait:
    minutes: float


@dataclass(frozen=True)
class WlStatus:
    """``ERROR`` (fatal) or ``WARNING`` (informational) from the server."""

    status: str
    message: str


@dataclass(frozen=True)
class WlDisconnect:
    pass


@dataclass(frozen=True)
class WlLanguage:
    language: str
    probability: float


@dataclass(frozen=True)
class WlSegment:
    """Times in seconds from the start of this connection's audio; None when the backend sends
    text only. ``completed`` None means the backend does not say."""

    text: str
    start: float | None
    end: float | None
    completed: bool | None


@dataclass(frozen=True)
class WlSegments:
    segments: tuple[WlSegment, ...]


WlMessage = WlReady | WlWait | WlStatus | WlDisconnect | WlLanguage | WlSegments


class WhisperLiveConnection:
    """One WhisperLive connection: ``new`` -> ``options_sent`` -> ``ready`` -> ``ended``;
    ``failed`` after a malformed reply or ERROR, ``closed`` after DISCONNECT."""

    def __init__(self, uid: str) -> None:
        self.uid = uid
        self.state = "new"

    def options(self, *, language: str | None, model: str, task: str = "transcribe",
                use_vad: bool = False, **extra: Any) -> str:
        self.state = "options_sent"
        return json.dumps({"uid": self.uid, "language": language, "task": task, "model": model,
                           "use_vad": use_vad, **extra})

    def audio(self, samples: npt.NDArray[np.float32]) -> bytes:
        return bytes(np.asarray(samples, dtype="<f4").tobytes())

    def end(self) -> bytes:
        self.state = "ended"
        return END_OF_AUDIO

    def receive_text(self, text: str) -> list[WlMessage | ProtocolViolation]:
        if self.state in ("failed", "closed"):
            return []
        try:
            message = _parse(text, self.uid)
        except ValueError as exc:
            self.state = "failed"
            return [ProtocolViolation("bad_message", f"WhisperLive reply: {exc}")]
        if message is None:
            return []
        if isinstance(message, WlReady):
            self.state = "ready" if self.state == "options_sent" else self.state
        elif isinstance(message, WlStatus) and message.status == "ERROR":
            self.state = "failed"
        elif isinstance(message, WlDisconnect):
            self.state = "closed"
        return [message]


def _parse(text: str, uid: str) -> WlMessage | None:
    if len(text) > 16 * MAX_TEXT_FRAME_CHARS:
        raise ValueError("frame too large")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError("not JSON") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if data.get("uid") not in (None, uid):
        return None  # another client's message (shared-socket servers); not ours
    if "segments" in data:
        return WlSegments(tuple(_segment(s) for s in _list(data["segments"])))
    status = data.get("status")
    if status == "WAIT":
        minutes = data.get("message", 0.0)
        return WlWait(float(minutes) if _finite(minutes) else 0.0)
    if status in ("ERROR", "WARNING"):
        return WlStatus(status, str(data.get("message", "")))
    message = data.get("message")
    if message == "SERVER_READY":
        return WlReady(str(data.get("backend", "")), str(data.get("server", "")))
    if message == "DISCONNECT":
        return WlDisconnect()
    if isinstance(data.get("language"), str):
        prob = data.get("language_prob", 0.0)
        return WlLanguage(data["language"], float(prob) if _finite(prob) else 0.0)
    return None  # anything else (translations, finalizer payloads) is ignored


def _list(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError("'segments' must be a list")
    return value


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _seconds(value: object) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(str(value))  # WhisperLive sends times as strings "1.520"
    except (TypeError, ValueError):
        raise ValueError(f"bad segment time {value!r}") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"bad segment time {value!r}")
    return seconds


def _segment(raw: object) -> WlSegment:
    if isinstance(raw, str):
        return WlSegment(raw, None, None, None)  # text-only backends
    if not isinstance(raw, dict) or not isinstance(raw.get("text", ""), str):
        raise ValueError("a segment must be an object with a string 'text'")
    completed = raw.get("completed")
    if completed is not None and not isinstance(completed, bool):
        raise ValueError("'completed' must be a boolean")
    return WlSegment(raw.get("text", ""), _seconds(raw.get("start")), _seconds(raw.get("end")),
                     completed)


@dataclass(frozen=True)
class TrackedFinal:
    text: str
    start: int  # samples on the session timeline
    end: int


@dataclass(frozen=True)
class TrackedPartial:
    text: str
    start: int
    end: int


class SegmentTracker:
    """Folds WhisperLive's repeated segment lists into finals (once each) and a partial.

    ``offset`` (samples) places this connection's times on the session timeline. Segments
    without times get the end of the last final as their start.
    """

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset
        self.done_until = offset  # end of the newest final
        self._seen: set[tuple[int, str]] = set()
        self.pending: TrackedPartial | None = None

    def update(self, segments: tuple[WlSegment, ...]) -> tuple[list[TrackedFinal],
                                                               TrackedPartial | None]:
        finals: list[TrackedFinal] = []
        partial: TrackedPartial | None = None
        for segment in segments:
            start, end = self._span(segment)
            text = segment.text.strip()
            if segment.completed:
                key = (start, text)
                if key in self._seen or end <= self.done_until - SAMPLE_RATE // 10:
                    continue
                self._seen.add(key)
                finals.append(TrackedFinal(text, start, end))
                self.done_until = max(self.done_until, end)
            elif text:
                partial = TrackedPartial(text, start, end)
        self.pending = partial
        return finals, partial

    def finish(self) -> TrackedFinal | None:
        """At the end of the stream the last uncompleted text is all there will be."""
        pending, self.pending = self.pending, None
        if pending is None:
            return None
        self.done_until = max(self.done_until, pending.end)
        return TrackedFinal(pending.text, pending.start, pending.end)

    def _span(self, segment: WlSegment) -> tuple[int, int]:
        if segment.start is None:
            return self.done_until, self.done_until
        start = self.offset + int(round(segment.start * SAMPLE_RATE))
        end = self.offset + int(round((segment.end or segment.start) * SAMPLE_RATE))
        return start, max(start, end)
