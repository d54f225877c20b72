"""The caption overlay's looks (`CaptionStyle`, set from the settings) and the runs of text it
draws, apart from the window (`ui.caption_window`) so the settings can be checked without it."""

from __future__ import annotations

from dataclasses import dataclass

DOCKS = ("bottom", "top", "floating")
BACKGROUNDS = ("box", "outline")
COLORS = {"final": "#ffffff", "partial": "#b0b0b0", "translation": "#b8f0a0", "tag": "#9aa4ad",
          "label0": "#7fd0ff", "label1": "#ffcf6e", "more": "#9aa4ad"}

Run = tuple[str, str]  # (text, kind): kind "label0"/"label1", "tag", "final", "partial", ...


@dataclass(frozen=True)
class CaptionStyle:
    """How the overlay looks. ``opacity``: the box's, in percent (the outline has no box);
    ``languages``: show each line's detected language; ``translation_below``: the English line
    under the original (its text arrives after the original's)."""

    lines: int = 2
    font_family: str = ""  # "" = the system's default sans
    font_pt: int = 28
    background: str = "box"
    opacity: int = 67
    dock: str = "bottom"
    click_through: bool = False
    languages: bool = False
    translated: bool = False  # the text itself is the English translation ("[fr → en]")

    def __post_init__(self) -> None:
        if not 1 <= self.lines <= 20:
            raise ValueError("lines must be between 1 and 20")
        if self.background not in BACKGROUNDS or self.dock not in DOCKS:
            raise ValueError(f"background must be one of {BACKGROUNDS}, dock one of {DOCKS}")
        if not 0 <= self.opacity <= 100:
            raise ValueError("opacity must be between 0 and 100")


def merge_runs(row: list[Run]) -> list[Run]:
    """Adjacent runs of one kind as one (fewer, longer draws; plain text unchanged)."""
    merged: list[Run] = []
    for text, kind in row:
        if merged and merged[-1][1] == kind:
            merged[-1] = (merged[-1][0] + text, kind)
        else:
            merged.append((text, kind))
    return merged

