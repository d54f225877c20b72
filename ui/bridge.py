"""EngineBridge: the one place engine events cross from engine threads into the Qt GUI thread
(and ImportBridge, its twin for the file-import worker, at the end).

The engine calls `bridge.sink(event)` from whatever thread it runs on. The bridge re-emits the
event through a queued signal, so every slot runs on the GUI thread, and fans it out into typed
signals the widgets connect to.

Overflow policy: level readings arrive ~30 times a second and only the newest matters, so they are
coalesced (at most one pending in the Qt queue, newer readings overwrite it). Every other event
is delivered, in order; they are few (a handful per utterance).
"""

from __future__ import annotations

import logging
import threading

from PySide6.QtCore import QObject, Qt, Signal, Slot

from engine.events import (
    EngineFailed,
    Event,
    FinalText,
    LevelChanged,
    Metrics,
    PartialText,
    SpeechEnded,
    SpeechStarted,
    StateChanged,
    Translation,
)
from ui.qt_compat import emit

log = logging.getLogger(__name__)


class EngineBridge(QObject):
    """Engine events in (any thread), typed Qt signals out (GUI thread)."""

    state_changed = Signal(str, str)  # state, detail
    speech_started = Signal(int, int)  # utterance_id, at (samples)
    speech_ended = Signal(int, int)
    partial_text = Signal(object)  # PartialText
    final_text = Signal(object)  # FinalText
    translation = Signal(object)  # Translation (captions translated below the original)
    level_changed = Signal(float, float, object)  # rms_db, peak_db, end (samples; -1 unknown)
    metrics = Signal(object)  # Metrics
    failed = Signal(str, bool)  # message, recoverable

    _delivered = Signal(object)  # internal: crosses threads (queued)
    _level_ready = Signal()  # internal: a coalesced level reading is waiting

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._level_lock = threading.Lock()
        self._pending_level: LevelChanged | None = None
        self._delivered.connect(self._dispatch, Qt.ConnectionType.QueuedConnection)
        self._level_ready.connect(self._emit_level, Qt.ConnectionType.QueuedConnection)

    def sink(self, event: Event) -> None:
        """The engine's EventSink. Safe to call from any thread; never blocks."""
        if isinstance(event, LevelChanged):
            with self._level_lock:
                already_pending = self._pending_level is not None
                self._pending_level = event
            if not already_pending:
                emit(self._level_ready)
            return
        emit(self._delivered, event)

    @Slot()
    def _emit_level(self) -> None:
        with self._level_lock:
            event, self._pending_level = self._pending_level, None
        if event is not None:
            emit(self.level_changed, event.rms_db, event.peak_db, event.end)

    @Slot(object)
    def _dispatch(self, event: object) -> None:
        if isinstance(event, StateChanged):
            emit(self.state_changed, event.state, event.detail)
        elif isinstance(event, PartialText):
            emit(self.partial_text, event)
        elif isinstance(event, FinalText):
            emit(self.final_text, event)
        elif isinstance(event, Translation):
            emit(self.translation, event)
        elif isinstance(event, Metrics):
            emit(self.metrics, event)
        elif isinstance(event, SpeechStarted):
            emit(self.speech_started, event.utterance_id, event.at)
        elif isinstance(event, SpeechEnded):
            emit(self.speech_ended, event.utterance_id, event.at)
        elif isinstance(event, EngineFailed):
            emit(self.failed, event.message, event.recoverable)
        else:
            log.debug("ignoring unknown engine event %r", event)


class ImportBridge(QObject):
    """The file-import worker's calls in (worker thread), Qt signals out (GUI thread).

    Implements app.file_import.ImportListener. Every call is delivered, in order: there are a
    handful per minute of audio (one progress report per decoded batch, one per section).
    """

    started = Signal(int)  # total samples
    progress = Signal(int, int)  # done samples, total samples
    segments = Signal(object, object)  # tuple[Segment, ...], language (str | None)
    finished = Signal(object)  # app.file_import.ImportResult
    failed = Signal(str)
    warning = Signal(str)

    _delivered = Signal(str, object)  # internal: crosses threads (queued)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._delivered.connect(self._dispatch, Qt.ConnectionType.QueuedConnection)

    def import_started(self, total_samples: int) -> None:
        emit(self._delivered, "started", (total_samples,))

    def import_progress(self, done_samples: int, total_samples: int) -> None:
        emit(self._delivered, "progress", (done_samples, total_samples))

    def import_segments(self, segments: object, language: str | None) -> None:
        emit(self._delivered, "segments", (segments, language))

    def import_finished(self, result: object) -> None:
        emit(self._delivered, "finished", (result,))

    def import_failed(self, message: str) -> None:
        emit(self._delivered, "failed", (message,))

    def import_warning(self, message: str) -> None:
        emit(self._delivered, "warning", (message,))

    @Slot(str, object)
    def _dispatch(self, name: str, args: object) -> None:
        assert isinstance(args, tuple)
        emit(getattr(self, name), *args)
