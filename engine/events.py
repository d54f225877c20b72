"""Events a live engine emits, in order, to one `EventSink` (a plain callable).

The UI turns them into queued Qt signals (ui.bridge); the CLI prints them; the server serialises
them to the wire. Times are sample counts on the session's audio timeline (16 kHz), latencies in
milliseconds measured on the emitting process's monotonic clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeAlias

from engine.types import Word


@dataclass(frozen=True)
class StateChanged:
    """Engine lifecycle: "loading", "ready", "listening", "stopped", "reconnecting"."""

    state: str
    detail: str = ""


@dataclass(frozen=True)
class SpeechStarted:
    utterance_id: int
    at: int
    source: str = ""  # the caption source's label when there are several ("You", "Them")


@dataclass(frozen=True)
class SpeechEnded:
    utterance_id: int
    at: int


@dataclass(frozen=True)
class PartialText:
    """Running text of the utterance in flight: `committed` is stable (LocalAgreement),
    `tentative` may still change (shown grey)."""

    utterance_id: int
    committed: str
    tentative: str
    start: int
    source: str = ""


@dataclass(frozen=True)
class FinalText:
    """The final text of one utterance. `latency_ms` is the chunk round trip (request sent to
    result received); `after_speech_end_ms` is end of speech to this event. `stages`: when it
    passed each step on the emitting process's clock (seconds): "speech_end", "ended" (the
    utterance was closed), "queued" (its final decode was issued: before "ended" when it was
    decoded speculatively), "decode_start", "decoded", "emitted"; a driver may add its own.
    ``source``: the caption source's label ("You", "Them") when captions have several."""

    utterance_id: int
    text: str
    words: tuple[Word, ...]
    start: int
    end: int
    latency_ms: float
    after_speech_end_ms: float = 0.0
    language: str | None = None
    stages: tuple[tuple[str, float], ...] = ()
    source: str = ""


@dataclass(frozen=True)
class Translation:
    """The English translation of a final (captions with translation below the original),
    which it follows: same ``source`` and ``utterance_id``; ``language``: the original's."""

    utterance_id: int
    source: str
    text: str
    language: str | None = None


@dataclass(frozen=True)
class LevelChanged:
    """Input level of the last audio block, dBFS (-100 for digital silence); ``end``: the
    stream position (samples) just after the block, -1 where unknown. Levels are delivered
    after the audio, so a reader that must not count audio from before some moment (a press)
    compares positions, not arrival times."""

    rms_db: float
    peak_db: float
    end: int = -1


@dataclass(frozen=True)
class Metrics:
    """Per decode. `network_ms` is None for local backends (round trip minus server decode)."""

    chunk_rtt_ms: float
    decode_ms: float
    network_ms: float | None
    lag_ms: float
    rtf: float
    dropped_frames: int
    kind: str = "final"  # "partial" | "final"


@dataclass(frozen=True)
class EngineFailed:
    """Something went wrong. `recoverable` False means the engine stopped."""

    message: str
    recoverable: bool = False


Event: TypeAlias = (StateChanged | SpeechStarted | SpeechEnded | PartialText | FinalText
                    | Translation | LevelChanged | Metrics | EngineFailed)
EventSink = Callable[[Event], None]


class LiveEngine(Protocol):
    """What the app drives: local (mic -> VAD -> policy -> local model) or remote (mic -> VAD ->
    WebSocket server). Both emit the events above to the sink given at construction.

    `start()` opens the audio source and begins capture (and, in "vad" mode, segmentation).
    In "ptt" (push-to-talk) mode nothing is transcribed until `begin_utterance()`; capture keeps a
    pre-roll ring so the first word spoken just before the key press is kept; `end_utterance()`
    flushes the tail and produces the final text. `stop()` flushes any utterance in flight, emits
    its final, then releases the source. All methods return quickly (no decoding on the caller's
    thread) and are safe to call from the GUI thread.

    `set_vocabulary(terms)` replaces the words and phrases decoding is biased towards (names,
    jargon; () for none): decodes issued after the call use them, the utterance being decoded
    keeps what it started with at the latest from its next decode. No model reload.
    """

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def begin_utterance(self) -> int | None: ...

    def end_utterance(self) -> None: ...

    def set_vocabulary(self, terms: tuple[str, ...]) -> None: ...
