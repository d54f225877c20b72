"""The transcript shown in the main window: the final utterances in order (dictated live, reopened
from history, or imported from a file), as an engine `Transcript` for the exporters (TXT, SRT,
VTT, JSON in engine.wire.export). Imported segments keep their hallucination flags, so the JSON
export says which passages are suspect."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from engine.events import FinalText
from engine.types import Segment, Transcript


class Session:
    def __init__(self) -> None:
        self.finals: list[FinalText] = []
        self._flags: list[tuple[str, ...]] = []  # per final: the checks it failed
        self.source: str | None = None  # the imported file's name, None for live text
        self.duration = 0  # an imported file's length (samples); live: the last final's end

    def add(self, final: FinalText, flags: tuple[str, ...] = ()) -> None:
        if final.text.strip():
            self.finals.append(final)
            self._flags.append(flags)

    def add_segment(self, segment: Segment, language: str | None) -> FinalText | None:
        """An imported segment (file timeline), as the FinalText live dictation would make."""
        final = FinalText(utterance_id=len(self.finals) + 1, text=segment.text.strip(),
                          words=segment.words, start=segment.start, end=segment.end,
                          latency_ms=0.0, language=language)
        before = len(self.finals)
        self.add(final, segment.flags)
        return final if len(self.finals) > before else None

    def set_stages(self, utterance_id: int, stages: tuple[tuple[str, float], ...]) -> None:
        """A kept final's steps, once the app added its own (AI polish: app.controller)."""
        for index, final in enumerate(self.finals):
            if final.utterance_id == utterance_id:
                self.finals[index] = replace(final, stages=stages)

    def remove_last(self, count: int = 1) -> None:
        """Drop the last `count` utterances ("scratch that" took them back)."""
        keep = max(0, len(self.finals) - count)
        del self.finals[keep:], self._flags[keep:]

    def clear(self) -> None:
        self.finals.clear()
        self._flags.clear()
        self.source = None
        self.duration = 0

    def text(self) -> str:
        """One utterance a line, as people paste it."""
        return "\n".join(f.text.strip() for f in self.finals)

    def transcript(self) -> Transcript:
        segments = tuple(
            Segment(text=" " + f.text.strip(), start=f.start, end=f.end, words=f.words,
                    flags=flags)
            for f, flags in zip(self.finals, self._flags, strict=True))
        language = next((f.language for f in self.finals if f.language), None)
        duration = max([f.end for f in self.finals] + [self.duration])
        return Transcript(segments=segments, language=language, duration=duration)


def export_text(transcript: Transcript, fmt: str) -> str:
    from engine.wire.export import render

    return render(transcript, fmt)


def save_export(transcript: Transcript, fmt: str, path: Path) -> Path:
    """Render and write atomically (a reader never sees half a file)."""
    from engine.atomic import atomic_write_bytes

    return atomic_write_bytes(path, export_text(transcript, fmt).encode("utf-8"))
