"""The event sink tests give an engine: it keeps every event, in order."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from engine.events import Event, FinalText, StateChanged


class Recorder:
    """An EventSink that keeps every event; ``done`` is set when the engine has stopped."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.engine: Any = None  # the engine it listens to, where a test keeps it here
        self.done = threading.Event()
        self.times: list[float] = []  # ``clock()`` at each event (an engine's, once set)
        self.clock: Callable[[], float] = lambda: 0.0

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        self.times.append(self.clock())
        if isinstance(event, StateChanged) and event.state == "stopped":
            self.done.set()

    def of(self, kind: type) -> list:  # type: ignore[type-arg]
        return [e for e in self.events if isinstance(e, kind)]

    def states(self) -> list[str]:
        return [e.state for e in self.of(StateChanged)]

    def finals(self) -> list[FinalText]:
        return self.of(FinalText)

    @property
    def text(self) -> str:
        return " ".join(f.text for f in self.of(FinalText) if f.text)
