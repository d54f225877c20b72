"""Recorded decodes: a `Runner` that records what another runner decodes, and one that replays
those records.

A real model's exact words depend on the processor: CTranslate2 picks its kernels by processor
(MKL or oneDNN, AVX2 or AVX-512) and their int8 arithmetic differs, so tiny.en can write other
words on the same audio. A test that needs one particular behaviour of the model (a misread
name, a loop, a text on noise) replays a recording of a real decode instead, and so passes on
every processor. Benches can replay too, to compare policies on identical decodes.

A record is keyed by what decides a decode: the audio (its samples rounded to 16 bits, so audio
read from a 16-bit file keys the same through any arithmetic that stays within half a step), the
canonical `DecodeOptions`, the request's ``timestamps`` and ``padding``, and the model's name. The file is JSON Lines: a header
line with the model (`ModelInfo`), then one line per decode with its key, a description for
humans (length, options) and the `Transcript`. A replay of audio or options that were never
recorded fails with `RecordingMissing`, which says how to record it again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.asr.wrapper import RunnerWrapper
from engine.errors import EngineError
from engine.types import (
    SAMPLE_RATE,
    DecodeOptions,
    DecodeRequest,
    ModelInfo,
    Runner,
    Segment,
    Transcript,
    Word,
)

FORMAT = "sottovoce-recorded-decodes/1"
# How to record again, named in every miss (tests/support/recordings.py reads it).
RECORD_ENV = "SOTTOVOCE_RECORD"


class RecordingMissing(EngineError):
    """A replayed decode that was never recorded (other audio, options or model)."""


def options_json(options: DecodeOptions) -> dict[str, Any]:
    """The options as plain JSON values, the same for equal options."""
    return {k: list(v) if isinstance(v, tuple) else v
            for k, v in sorted(dataclasses.asdict(options).items())}


def request_key(request: DecodeRequest, model: str) -> str:
    """The record key of one request for ``model`` (hex SHA-256)."""
    quantised = np.clip(np.round(request.audio * 32768.0), -32768, 32767).astype("<i2")
    digest = hashlib.sha256(quantised.tobytes())
    digest.update(json.dumps({"options": options_json(request.options), "model": model,
                              "timestamps": request.timestamps, "padding": request.padding},
                             sort_keys=True).encode())
    return digest.hexdigest()


def describe(request: DecodeRequest) -> str:
    """A line a person can read: how long the audio is, and the options that differ from the
    defaults."""
    defaults = options_json(DecodeOptions())
    changed = {k: v for k, v in options_json(request.options).items() if defaults.get(k) != v}
    extra = "" if request.timestamps else ", no timestamps"
    return f"{len(request.audio) / SAMPLE_RATE:.2f} s of audio, options {changed}{extra}"


def transcript_json(transcript: Transcript) -> dict[str, Any]:
    return {
        "language": transcript.language, "duration": transcript.duration,
        "decode_ms": transcript.decode_ms, "extra": _plain(transcript.extra),
        "segments": [
            {"text": s.text, "start": s.start, "end": s.end, "avg_logprob": s.avg_logprob,
             "no_speech_prob": s.no_speech_prob, "compression_ratio": s.compression_ratio,
             "temperature": s.temperature, "flags": list(s.flags),
             "words": [[w.text, w.start, w.end, w.probability] for w in s.words]}
            for s in transcript.segments],
    }


def transcript_from_json(data: dict[str, Any]) -> Transcript:
    segments = tuple(
        Segment(text=s["text"], start=s["start"], end=s["end"],
                words=tuple(Word(t, start, end, p) for t, start, end, p in s["words"]),
                avg_logprob=s["avg_logprob"], no_speech_prob=s["no_speech_prob"],
                compression_ratio=s["compression_ratio"], temperature=s["temperature"],
                flags=tuple(s["flags"]))
        for s in data["segments"])
    return Transcript(segments=segments, language=data["language"], duration=data["duration"],
                      decode_ms=data["decode_ms"], extra=dict(data["extra"]))


def _plain(extra: dict[str, object]) -> dict[str, Any]:
    """The JSON-able part of a transcript's ``extra`` (counters and labels; not objects)."""
    kept: dict[str, Any] = {}
    for key, value in extra.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        kept[key] = value
    return kept


def read_recordings(path: Path) -> tuple[ModelInfo, dict[str, dict[str, Any]]]:
    """The header's model and the records by key (a later record of a key wins)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise RecordingMissing(f"{path} is empty: record it with {RECORD_ENV}=1")
    header = json.loads(lines[0])
    if header.get("format") != FORMAT:
        raise EngineError(f"{path} is not a file of recorded decodes ({FORMAT})")
    model = header["model"]
    info = ModelInfo(name=model["name"], device=model["device"],
                     compute_type=model["compute_type"], multilingual=model["multilingual"],
                     languages=tuple(model["languages"]))
    records = {}
    for line in lines[1:]:
        if line.strip():
            record = json.loads(line)
            records[record["key"]] = record
    return info, records


class RecordingRunner(RunnerWrapper):
    """Decodes with ``inner`` and writes each decode to ``path`` (a new file: the recordings of
    one scenario are made in one run, so none is stale)."""

    def __init__(self, inner: Runner, path: Path) -> None:
        super().__init__(inner)
        self._path = Path(path)
        self._lock = threading.Lock()
        self._keys: set[str] = set()
        self._started = False

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        results = self.inner.decode_batch(requests)
        info = self.inner.info
        lines = []
        with self._lock:
            for request, transcript in zip(requests, results, strict=True):
                key = request_key(request, info.name)
                if key in self._keys:
                    continue
                self._keys.add(key)
                lines.append(json.dumps({"key": key, "request": describe(request),
                                         "transcript": transcript_json(transcript)},
                                        ensure_ascii=False))
            if not self._started:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                model = dataclasses.asdict(info)
                model["languages"] = list(info.languages)
                self._path.write_text(json.dumps({"format": FORMAT, "model": model}) + "\n",
                                      encoding="utf-8")
                self._started = True
            if lines:
                with self._path.open("a", encoding="utf-8") as out:
                    out.write("\n".join(lines) + "\n")
        return results


class ReplayRunner:
    """Returns the recorded transcript of each request, as the recorded model decoded it;
    ``streams`` decode calls may run at once (replays are instant). A request never recorded
    raises `RecordingMissing`, naming the file and how to record it again."""

    def __init__(self, path: Path, *, streams: int = 1) -> None:
        self._path = Path(path)
        self._streams = streams
        self._info: ModelInfo | None = None
        self._records: dict[str, dict[str, Any]] = {}
        self.replayed: list[str] = []  # the keys decoded, in order

    @property
    def info(self) -> ModelInfo:
        self.load()
        assert self._info is not None
        return self._info

    @property
    def streams(self) -> int:
        return self._streams

    @property
    def device(self) -> str:
        return "cpu"

    def load(self) -> None:
        if self._info is None:
            if not self._path.exists():
                raise RecordingMissing(f"no recorded decodes at {self._path}: record them with "
                                       f"{RECORD_ENV}=1 (see tests/support/recordings.py)")
            self._info, self._records = read_recordings(self._path)

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        self.load()
        results = []
        for request in requests:
            key = request_key(request, self.info.name)
            record = self._records.get(key)
            if record is None:
                raise RecordingMissing(
                    f"no recorded decode of {describe(request)} in {self._path} (key "
                    f"{key[:12]}): the test asks for audio or options that were not recorded; "
                    f"record again with {RECORD_ENV}=1")
            self.replayed.append(key)
            results.append(transcript_from_json(record["transcript"]))
        return results
