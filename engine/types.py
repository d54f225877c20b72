"""Typed results shared by every layer. Times are integer sample counts at 16 kHz."""

from __future__ import annotations

from dataclasses import dataclass, field

SAMPLE_RATE = 16_000


def samples_to_seconds(samples: int) -> float:
    return samples / SAMPLE_RATE


def seconds_to_samples(seconds: float) -> int:
    return int(round(seconds * SAMPLE_RATE))


@dataclass(frozen=True)
class Word:
    """One recognised word. `text` keeps Whisper's leading space (" hello")."""

    text: str
    start: int
    end: int
    probability: float = 1.0

    @property
    def start_s(self) -> float:
        return samples_to_seconds(self.start)

    @property
    def end_s(self) -> float:
        return samples_to_seconds(self.end)


@dataclass(frozen=True)
class Segment:
    """A decoded span of text with its quality statistics.

    `flags` names the hallucination checks this segment failed (empty when it passed);
    exporters keep flagged segments but JSON records why they are suspect.
    """

    text: str
    start: int
    end: int
    words: tuple[Word, ...] = ()
    avg_logprob: float = 0.0
    no_speech_prob: float = 0.0
    compression_ratio: float = 1.0
    temperature: float = 0.0
    flags: tuple[str, ...] = ()

    @property
    def start_s(self) -> float:
        return samples_to_seconds(self.start)

    @property
    def end_s(self) -> float:
        return samples_to_seconds(self.end)


@dataclass(frozen=True)
class Transcript:
    """The result of transcribing one piece of audio (a chunk, an utterance or a whole file)."""

    segments: tuple[Segment, ...]
    language: str | None = None
    duration: int = 0
    decode_ms: float = 0.0
    extra: dict[str, object] = field(default_factory=dict, compare=False)

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.segments).strip()

    @property
    def words(self) -> tuple[Word, ...]:
        return tuple(w for s in self.segments for w in s.words)
