"""What the file import (`app.import_flow`) drives: the controller, seen through `ImportHost`.

Its own module so that the import flow need not import `app.controller` (which creates the
flow): no import cycle between the two. `Controller` subclasses `ImportHost`.
"""

from __future__ import annotations

from PySide6.QtCore import QObject

from app.app_engine import RunningEngine
from app.session import Session
from app.settings import Settings
from ui.main_window import MainWindow


class ImportHost(QObject):
    """The controller's side of an import: its window, session, settings and live engine.

    A QObject base class, not a Protocol: the import flow is the host's child QObject."""

    window: MainWindow
    session: Session
    settings: Settings
    engine: RunningEngine | None

    def start_engine(self) -> None:
        raise NotImplementedError

    def stop_engine(self) -> None:
        raise NotImplementedError

    def stopped_engines(self) -> list[RunningEngine]:
        """Stopped engines that may still be flushing."""
        raise NotImplementedError

    def model_name(self) -> str:
        raise NotImplementedError


def engine_finished(engine: RunningEngine, timeout: float = 0.0) -> bool:
    """Whether the engine's threads have ended."""
    return engine.wait(timeout)
