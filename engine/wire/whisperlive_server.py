"""The WhisperLive wire format, server side, sans-I/O: what `sottovoce serve` needs to accept
WhisperLive's own clients (its Python ``TranscriptionClient``, browser extensions, OBS...).

The message shapes are WhisperLive 0.10's (see `engine.wire.whisperlive_protocol` for the
client side). This module only parses and builds frames:

- `is_whisperlive_options` tells a WhisperLive first frame (a JSON object with ``uid`` and no
  ``type``) from our protocol v1 ``hello`` (which always has ``type``), so both share one port;
- `parse_options` validates the options frame into `WlOptions` and says which options this
  server cannot honour (`WlOptions.warnings`);
- `WlServerConnection` turns later frames into audio or the end of the stream and builds the
  replies (``SERVER_READY``, ``WAIT``, ``ERROR``/``WARNING``, ``DISCONNECT``, the language
  message, ``segments``);
- `SegmentWindow` keeps the completed segments and builds each ``segments`` list the way
  WhisperLive does: the last ``send_last_n_segments`` completed ones, then the one in progress.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.core.hotwords import MAX_TERM_CHARS, MAX_TERMS, checked_terms
from engine.types import SAMPLE_RATE, Word
from engine.wire.protocol import MAX_PROMPT_CHARS, MAX_TEXT_FRAME_CHARS, ProtocolViolation
from engine.wire.whisperlive_protocol import END_OF_AUDIO

# What the ready message announces: it tells the client which segment format to expect
# (faster_whisper: start/end/completed; tensorrt: text only), and ours is faster_whisper's.
# WhisperLive's own Python client keeps a transcript only when the backend says so.
BACKEND = "faster_whisper"
AUDIO_FORMATS = {"float32": ("<f4", 4), "int16": ("<i2", 2), "uint8": ("u1", 1)}
VAD_KEYS = {"threshold", "neg_threshold", "min_silence_duration_ms", "max_speech_duration_s"}


@dataclass(frozen=True)
class WlOptions:
    """A WhisperLive client's options, validated; ``warnings``: what is not honoured, why."""

    uid: str
    language: str | None = None
    task: str = "transcribe"
    model: str | None = None
    use_vad: bool = True
    send_last_n_segments: int = 10
    no_speech_thresh: float = 0.45
    same_output_threshold: int = 10
    prompt: str | None = None  # initial_prompt
    vocabulary: tuple[str, ...] = ()  # hotwords, split at commas (engine.core.hotwords)
    word_timestamps: bool = False
    vad: dict[str, float] = field(default_factory=dict)
    audio_format: str = "float32"
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class WlAudio:
    samples: npt.NDArray[np.float32]


@dataclass(frozen=True)
class WlEnd:
    pass


WlClientMessage = WlOptions | WlAudio | WlEnd


def is_whisperlive_options(frame: str | bytes) -> bool:
    """True for a WhisperLive options frame: a JSON object with a ``uid`` and no ``type``."""
    if not isinstance(frame, str) or len(frame) > MAX_TEXT_FRAME_CHARS:
        return False
    try:
        data = json.loads(frame)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and "uid" in data and "type" not in data


def _number(data: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = data.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"'{key}' must be a number")
    return min(high, max(low, float(value)))


def _text(data: dict[str, Any], key: str, limit: int) -> str | None:
    value = data.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"'{key}' must be a string")
    return value[:limit]


def parse_options(text: str) -> WlOptions | ProtocolViolation:
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return _options(data)
    except (ValueError, RecursionError) as exc:
        return ProtocolViolation("bad_message", f"WhisperLive options: {exc}")
    except TypeError as exc:  # a safety net: every option's type is checked in `_options`
        return ProtocolViolation("bad_message", f"WhisperLive options: wrong type ({exc})")


def _options(data: dict[str, Any]) -> WlOptions:
    uid = data.get("uid")
    if not isinstance(uid, str) or not 0 < len(uid) <= 128:
        raise ValueError("'uid' must be a string of 1-128 characters")
    warnings: list[str] = []
    language = _text(data, "language", 16)
    language = language.lower() if language else None  # Whisper's codes are lower case
    task = _text(data, "task", 64) or "transcribe"
    if task not in ("transcribe", "translate"):
        warnings.append(f"task {task!r} is unknown: transcribing")
        task = "transcribe"
    audio_format = _text(data, "audio_format", 64) or "float32"
    if audio_format not in AUDIO_FORMATS:
        raise ValueError(f"unsupported audio_format {audio_format!r} (float32, int16 or uint8)")
    use_vad = data.get("use_vad", True) is not False
    if not use_vad:
        warnings.append("use_vad=false is ignored: this server always cuts speech with its VAD")
    prompt = _text(data, "initial_prompt", MAX_PROMPT_CHARS) or ""
    # faster-whisper's hotwords (one string) is the session's vocabulary, as far as it fits.
    hotwords = (_text(data, "hotwords", MAX_PROMPT_CHARS) or "").split(",")
    vocabulary = checked_terms([t[:MAX_TERM_CHARS] for t in hotwords][:MAX_TERMS])
    for key, what in (("enable_translation", "translation"),
                      ("enable_diarization", "speaker diarization")):
        if data.get(key):
            warnings.append(f"{what} is not supported by this server: {key} is ignored")
    return WlOptions(
        uid=uid, language=language, task=task, model=_text(data, "model", 256),
        use_vad=use_vad,
        send_last_n_segments=int(_number(data, "send_last_n_segments", 10, 1, 100)),
        no_speech_thresh=_number(data, "no_speech_thresh", 0.45, 0.0, 1.0),
        same_output_threshold=int(_number(data, "same_output_threshold", 10, 1, 100)),
        prompt=prompt[-MAX_PROMPT_CHARS:] or None, vocabulary=vocabulary,
        word_timestamps=data.get("word_timestamps") is True,
        vad=_vad(data.get("vad_parameters"), warnings), audio_format=audio_format,
        warnings=tuple(warnings))


def _vad(raw: object, warnings: list[str]) -> dict[str, float]:
    if not raw:
        return {}
    if not isinstance(raw, dict):
        raise ValueError("'vad_parameters' must be an object")
    ignored = sorted(set(raw) - VAD_KEYS)
    if ignored:
        warnings.append(f"vad_parameters {', '.join(map(str, ignored))} ignored "
                        f"(honoured: {', '.join(sorted(VAD_KEYS))})")
    return {key: _number(raw, key, 0.0, 0.0, 1e6) for key in VAD_KEYS if key in raw}


class WlServerConnection:
    """One WhisperLive client, server side: ``awaiting_options`` -> ``open`` -> ``ended``;
    ``failed`` after a violation (later frames are ignored)."""

    def __init__(self) -> None:
        self.state = "awaiting_options"
        self.uid = ""
        self._dtype, self._width = AUDIO_FORMATS["float32"]

    def receive(self, frame: str | bytes) -> list[WlClientMessage | ProtocolViolation]:
        if self.state in ("failed", "ended"):
            return []
        if self.state == "awaiting_options":
            if not isinstance(frame, str):
                return [self._fail("unexpected_message", "send the options first")]
            options = parse_options(frame)
            if isinstance(options, ProtocolViolation):
                self.state = "failed"
                return [options]
            self.uid, self.state = options.uid, "open"
            self._dtype, self._width = AUDIO_FORMATS[options.audio_format]
            return [options]
        raw = frame.encode() if isinstance(frame, str) else frame
        if raw == END_OF_AUDIO:
            self.state = "ended"
            return [WlEnd()]
        if isinstance(frame, str):
            return []  # WhisperLive reads only binary frames after the options
        if len(raw) % self._width:
            return [self._fail("bad_audio", f"{len(raw)} bytes is not whole samples")]
        return [WlAudio(self._samples(raw))]

    def _samples(self, raw: bytes) -> npt.NDArray[np.float32]:
        values = np.frombuffer(raw, dtype=self._dtype)
        floats: npt.NDArray[np.float32]
        if self._width == 4:
            # A NaN or a huge value would poison the VAD state and the mel spectrogram.
            floats = np.clip(np.nan_to_num(values.astype(np.float32), posinf=1.0, neginf=-1.0),
                             -1.0, 1.0)
        elif self._width == 2:
            floats = values.astype(np.float32) / np.float32(32768.0)
        else:
            floats = (values.astype(np.float32) - np.float32(128.0)) / np.float32(128.0)
        return floats

    def _fail(self, code: str, message: str) -> ProtocolViolation:
        self.state = "failed"
        return ProtocolViolation(code, message)

    # -- replies -----------------------------------------------------------------------

    def _frame(self, **body: object) -> str:
        return json.dumps({"uid": self.uid, **body})

    def ready(self, model: str) -> str:
        return self._frame(message="SERVER_READY", backend=BACKEND, model=model,
                           server="sottovoce")

    def wait(self, minutes: float) -> str:
        return self._frame(status="WAIT", message=minutes)

    def status(self, level: str, message: str) -> str:
        return self._frame(status=level, message=message)

    def disconnect(self) -> str:
        return self._frame(message="DISCONNECT")

    def language(self, language: str, probability: float | None) -> str:
        """``probability`` None: the runner does not report it."""
        return self._frame(language=language, language_prob=probability)

    def segments(self, segments: list[dict[str, object]]) -> str:
        return self._frame(segments=segments)


def _seconds(samples: int) -> str:
    return f"{samples / SAMPLE_RATE:.3f}"


class SegmentWindow:
    """The segments a WhisperLive client is sent: completed ones (finals) and the one in
    progress (the running partial). Times are seconds from the start of the connection."""

    def __init__(self, last_n: int = 10, word_timestamps: bool = False) -> None:
        self.last_n = last_n
        self.word_timestamps = word_timestamps
        self.completed: list[dict[str, object]] = []
        self._done = 0  # end of the newest completed segment, samples

    def final(self, text: str, start: int, end: int,
              words: tuple[Word, ...] = ()) -> list[dict[str, object]]:
        """A final: one more completed segment (none for empty text), nothing in progress.
        The empty in-progress segment replaces the partial the client still holds, which
        WhisperLive's client would otherwise write to its transcript after the final."""
        if text.strip():
            start = max(start, self._done)  # the client drops a segment starting earlier
            segment: dict[str, object] = {"start": _seconds(start),
                                          "end": _seconds(max(start, end)), "text": text,
                                          "completed": True}
            if self.word_timestamps and words:
                segment["words"] = [{"word": w.text, "start": _seconds(w.start),
                                     "end": _seconds(w.end),
                                     "probability": round(w.probability, 4)} for w in words]
            self.completed.append(segment)
            del self.completed[:-self.last_n]
            self._done = max(start, end)
        return self._window({"start": _seconds(self._done), "end": _seconds(self._done),
                             "text": "", "completed": False})

    def partial(self, text: str, start: int, end: int) -> list[dict[str, object]]:
        start = max(start, self._done)
        return self._window({"start": _seconds(start), "end": _seconds(max(start, end)),
                             "text": text, "completed": False})

    def _window(self, in_progress: dict[str, object]) -> list[dict[str, object]]:
        return [*self.completed[-self.last_n:], in_progress]
