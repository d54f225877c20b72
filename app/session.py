"""The transcript of the running session: the final utterances in order, as an engine
`Transcript` for the exporters (TXT, SRT, VTT, JSON in engine.core.export)."""

from __future__ import annotations

from pathlib import Path

from engine.events import FinalText
from engine.types import Segment, Transcript


class Session:
    def __init__(self) -> None:
        self.finals: list[FinalText] = []

    def add(self, final: FinalText) -> None:
        if final.text.strip():
            self.finals.append(final)

    def clear(self) -> None:
        self.finals.clear()

    def text(self) -> str:
        """One utterance a line, as people paste it."""
        return "\n".join(f.text.strip() for f in self.finals)

    def transcript(self) -> Transcript:
        segments = tuple(
            Segment(text=" " + f.text.strip(), start=f.start, end=f.end, words=f.words)
            for f in self.finals)
        language = next((f.language for f in self.finals if f.language), None)
        duration = max((f.end for f in self.finals), default=0)
        return Transcript(segments=segments, language=language, duration=duration)


def export_text(transcript: Transcript, fmt: str) -> str:
    from engine.core.export import render

    return render(transcript, fmt)


def save_export(transcript: Transcript, fmt: str, path: Path) -> Path:
    """Render and write atomically (a reader never sees half a file)."""
    from engine.atomic import atomic_write_bytes

    return atomic_write_bytes(path, export_text(transcript, fmt).encode("utf-8"))
