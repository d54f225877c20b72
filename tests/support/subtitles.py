"""Readers for what engine.wire.export writes (SRT, WebVTT, JSON, TXT): the tests read the
exports and the CLI's output files back with them. Test code, not shipped."""

from __future__ import annotations

import json
import re

from engine.types import SAMPLE_RATE, Segment, Transcript, Word
from engine.wire.export import JSON_FORMAT_NAME, JSON_VERSION, Cue

_SAMPLES_PER_MS = SAMPLE_RATE // 1000

_TIMING = re.compile(
    r"^\s*(\d+:)?(\d{1,2}):(\d{2})[,.](\d{3})\s+-->\s+(\d+:)?(\d{1,2}):(\d{2})[,.](\d{3})")


def parse_srt(text: str) -> list[Cue]:
    """Cues of an SRT document (index lines are ignored, so renumbered files parse too)."""
    return _parse_cue_blocks(text, unescape=False)


def parse_vtt(text: str) -> list[Cue]:
    """Cues of a WebVTT document (header, NOTE/STYLE blocks and cue settings are skipped)."""
    body = text.lstrip("\ufeff")
    if not body.startswith("WEBVTT"):
        raise ValueError("not a WebVTT document: missing WEBVTT header")
    return _parse_cue_blocks(body, unescape=True)


def _parse_cue_blocks(text: str, *, unescape: bool) -> list[Cue]:
    cues = []
    for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n").strip()):
        lines = block.split("\n")
        timing_at = next((i for i, line in enumerate(lines) if _TIMING.match(line)), None)
        if timing_at is None:
            continue  # header, NOTE, STYLE, or stray text
        match = _TIMING.match(lines[timing_at])
        assert match is not None
        g = match.groups()
        payload = lines[timing_at + 1:]
        if unescape:
            payload = [_vtt_unescape(line) for line in payload]
        cues.append(Cue(_parse_time(*g[0:4]), _parse_time(*g[4:8]), tuple(payload)))
    return cues


def _parse_time(hours: str | None, minutes: str, seconds: str, millis: str) -> int:
    h = int(hours[:-1]) if hours else 0
    ms = ((h * 60 + int(minutes)) * 60 + int(seconds)) * 1000 + int(millis)
    return ms * _SAMPLES_PER_MS


def _vtt_unescape(line: str) -> str:
    return line.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def parse_json(text: str) -> Transcript:
    """A transcript from `to_json` output; raises ValueError on another document."""
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("format") != JSON_FORMAT_NAME:
        raise ValueError(f"not a {JSON_FORMAT_NAME} JSON document")
    if doc.get("version") != JSON_VERSION:
        raise ValueError(f"unsupported {JSON_FORMAT_NAME} version {doc.get('version')!r}")
    segments = tuple(
        Segment(
            text=s["text"], start=_samples(s["start"]), end=_samples(s["end"]),
            words=tuple(Word(w["text"], _samples(w["start"]), _samples(w["end"]),
                             float(w["probability"])) for w in s["words"]),
            avg_logprob=float(s["avg_logprob"]), no_speech_prob=float(s["no_speech_prob"]),
            compression_ratio=float(s["compression_ratio"]),
            temperature=float(s["temperature"]), flags=tuple(s["flags"]),
        )
        for s in doc["segments"]
    )
    return Transcript(segments=segments, language=doc.get("language"),
                      duration=_samples(doc["duration"]), decode_ms=float(doc["decode_ms"]),
                      extra=dict(doc.get("extra") or {}))


def _samples(seconds: float) -> int:
    return int(round(float(seconds) * SAMPLE_RATE))


def parse_txt(text: str) -> str:
    """The transcript text of a TXT export (lines joined with spaces)."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())
