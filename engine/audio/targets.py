"""What captions can capture besides the microphone (see `engine.audio.outputs`)."""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("system", "app", "device")


@dataclass(frozen=True)
class CaptureTarget:
    kind: str  # "system", "app" or "device"
    name: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"capture target must be one of {KINDS}, not {self.kind!r}")
        if self.kind != "system" and not self.name.strip():
            raise ValueError(f"a {self.kind} target needs a name ({self.kind}:NAME)")

    @classmethod
    def parse(cls, text: str) -> CaptureTarget:
        """``system``, ``app:NAME`` or ``device:NAME``."""
        kind, _, name = text.partition(":")
        if kind not in KINDS:
            raise ValueError(f"unknown source {text!r}: use system, app:NAME or device:NAME")
        return cls(kind, name.strip())

    def describe(self) -> str:
        return {"system": "what the computer plays", "app": f"the app {self.name!r}",
                "device": f"the audio device {self.name!r}"}[self.kind]


@dataclass(frozen=True)
class PlayingApp:
    """One playback stream now open: its server index, the app's name and what it plays."""

    index: int
    name: str
    media: str = ""
    corked: bool = False
