"""The decode interface's value types, shared by every layer (`engine.core` included).

Audio is mono float32 in [-1, 1] at 16 kHz; times are integer sample counts at 16 kHz.
Every ASR backend (`engine.asr`) is a `Runner`: ``decode_batch(requests) -> transcripts``, one
`DecodeRequest` (at most 30 s of audio and its `DecodeOptions`) in, one `Transcript` out each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

SAMPLE_RATE = 16_000
MAX_SAMPLES = 30 * SAMPLE_RATE  # Whisper's window: the most audio one request may hold

Audio = npt.NDArray[np.float32]  # mono float32 in [-1, 1] at 16 kHz


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


@dataclass(frozen=True)
class DecodeOptions:
    """How to decode one piece of audio.

    Attributes:
      language: ISO 639-1 code, or None to detect (ignored by English-only models).
      prompt: previous text to condition on (already checked and capped by the caller).
      word_timestamps: compute per-word times (costs a cross-attention alignment pass).
      beam_size: 1 = greedy. faster-whisper's default is 5.
      temperatures: fallback schedule; the first is tried first.
      short_context: allow the fast unpadded encoder path where a backend has one.
      short_fallback: when the short path's result looks wrong (a loop, low confidence, cut
        short), decode again on the padded 30 s window. False keeps the short result as it is:
        a partial's tentative text is not worth a full-window decode (400-700 ms on a 2-core
        CPU, against 40-100 ms), which holds a decode stream and delays the next partial.
      task: "transcribe" or "translate".
      hotwords: the user's vocabulary (names, jargon) rendered as one short text (already capped
        by the caller, `engine.core.hotwords`). It goes first in Whisper's previous-text slot,
        before ``prompt`` (faster-whisper's ``hotwords``); it never sets or changes the
        language (detection looks at the audio alone).
      languages: when detecting (``language`` None), the languages to choose among: Whisper's
        language probabilities are restricted to them, so a short clip is not taken for a
        language the user never speaks. Empty: any language.
    """

    language: str | None = None
    languages: tuple[str, ...] = ()
    prompt: str | None = None
    word_timestamps: bool = True
    beam_size: int = 5
    temperatures: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    short_context: bool = False
    short_fallback: bool = True
    task: str = "transcribe"
    hotwords: str | None = None

    def __post_init__(self) -> None:
        if self.beam_size < 1:
            raise ValueError("beam_size must be >= 1")
        if not self.temperatures:
            raise ValueError("temperatures must not be empty")
        if self.task not in ("transcribe", "translate"):
            raise ValueError("task must be 'transcribe' or 'translate'")
        for code in (self.language, *self.languages):
            if code is not None and not code.isalpha():
                raise ValueError(f"invalid language code {code!r}")


@dataclass(frozen=True)
class DecodeRequest:
    """One chunk to decode: at most 30 s of 16 kHz mono float32, with its own options.

    ``tag`` is the caller's (a session id, a chunk index); a runner never looks at it.
    ``timestamps``: False decodes text only (Whisper's ``<|notimestamps|>``, as faster-whisper's
    batched pipeline does): fewer tokens and no timestamp rules per step, so a cheaper decode;
    the chunk then comes back as one segment spanning the audio (word times still come from
    alignment when ``options.word_timestamps`` asks for them).
    ``padding``: how the padded (30 s) path encodes the window after the audio. "encoded" runs
    the encoder over it, as faster-whisper does. "silence" (CPU) encodes the audio plus the
    short path's pad and takes the rest from an encoding of a silent window
    (`engine.asr.ct2_passes.EncodedBatch`): about a third of the cost. The long-form pipeline
    asks for it: there it gave the same text on the 231 s reading and on all but two of the 7
    fallback passages of the 20 min mix (same WER) at 17 % less wall time; decoded alone on the
    padded path, the 26 short English clips scored 9.6 % against 9.4 % (greedy), so the live
    engine and the server keep "encoded".
    """

    audio: Audio = field(repr=False)
    options: DecodeOptions = field(default_factory=DecodeOptions)
    tag: object = None
    timestamps: bool = True
    padding: Literal["encoded", "silence"] = "encoded"

    def __post_init__(self) -> None:
        if getattr(self.audio, "ndim", 0) != 1:
            raise ValueError("audio must be a 1-D (mono) array")
        if len(self.audio) > MAX_SAMPLES:
            raise ValueError(f"audio is {len(self.audio) / SAMPLE_RATE:.1f} s; the maximum is 30 s")
        if self.audio.dtype.name != "float32":
            raise ValueError(f"audio must be float32, not {self.audio.dtype}")
        if self.padding not in ("encoded", "silence"):
            raise ValueError(f"padding must be 'encoded' or 'silence', not {self.padding!r}")


@dataclass(frozen=True)
class ModelInfo:
    """What the status line shows: model name, device and compute type. ``languages``: the
    language codes the loaded model decodes (("en",) for an English-only one); () when the
    backend does not say, and then any code is tried."""

    name: str
    device: str
    compute_type: str
    multilingual: bool
    languages: tuple[str, ...] = ()


@runtime_checkable
class Runner(Protocol):
    """The one decode interface every ASR backend implements (`engine.asr`).

    ``decode_batch`` returns one `Transcript` per request, in request order; word times are
    relative to each request's audio. ``streams``: how many ``decode_batch`` calls the backend
    serves at the same time (model replicas; callers keep that many busy). ``device``: "cpu" or
    "cuda" (callers size batches from it). `load()` is explicit and idempotent; calls may come
    from any one thread per stream, but a CTranslate2 model should be loaded on a thread that
    stays alive (one loaded on a thread that has exited decodes 4-6x slower).
    """

    @property
    def info(self) -> ModelInfo: ...

    @property
    def streams(self) -> int: ...

    @property
    def device(self) -> str: ...

    def load(self) -> None: ...

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]: ...


VAD_WINDOW = 512  # samples per speech-probability score: Silero's window at 16 kHz


@runtime_checkable
class SpeechScorer(Protocol):
    """A voice activity detector as the stream core uses it (`engine.vad` implements it: Silero
    on the bundled ONNX, or the energy fallback).

    ``score`` takes consecutive ``(n, VAD_WINDOW)`` rows of one stream, in order, and returns n
    speech probabilities in [0, 1]; state carries over between calls. `reset()` forgets it."""

    def score(self, windows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]: ...

    def reset(self) -> None: ...
