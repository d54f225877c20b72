"""File > Open file… in the app: the GUI-thread side of an import (app.file_import runs it).

Policy while a file is imported: live listening is **paused**. A running live engine is stopped
(its utterance in flight is flushed, as on Stop) before decoding starts; Start, Open file and the
push-to-talk hotkey are refused with a status message; when the import ends (done, cancelled or
failed) listening starts again if it was on. One model decodes at a time, so the import gets the
whole CPU (or GPU) and dictation never competes with it.

The import always runs on this computer with the app's model (the one in the selector row;
with the remote backend too, and the status line says so). Each import loads its own copy on
its worker thread (about a second for tiny.en) and drops it at the end. Why not reuse the live
engine's loaded model: a CTranslate2 model loaded on a thread that has since ended (the live
engine's, once stopped; an earlier import's) decoded several times slower (likely libgomp's
thread team, which belongs to the loading thread; docs/evidence.md), so no model is kept
either.

The view and session are replaced by the file's transcript only once the file has decoded and
the model has loaded, so an unreadable file changes nothing. Earlier live text is not lost: it
is in its journal (History). The import has its own journal, written segment by segment as
`engine.files.transcribe_file` yields them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject

from app.app_engine import RunningEngine
from app.file_import import FileImport, ImportOptions, ImportResult
from app.live_session import LiveSession
from app.session import Session
from app.settings import Settings
from engine.asr import local_runner
from engine.types import SAMPLE_RATE, Runner, Segment
from engine.vocabulary import parse as parse_vocabulary
from ui.bridge import ImportBridge
from ui.import_panel import format_duration
from ui.main_window import MainWindow

log = logging.getLogger(__name__)

QUIT_WAIT_S = 10.0
RunnerFactory = Callable[[str, str], Runner]  # (model, device) -> an unloaded Runner


class ImportFlow(QObject):
    """Owns at most one `FileImport` at a time and keeps the window and session in step."""

    def __init__(self, live: LiveSession, settings: Callable[[], Settings], window: MainWindow,
                 session: Session, runner_factory: RunnerFactory | None = None,
                 options: ImportOptions | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.live, self._settings = live, settings
        self.window, self.session = window, session
        self.options = options or ImportOptions()
        self.bridge = ImportBridge(self)
        self.current: FileImport | None = None
        self.last_result: ImportResult | None = None
        # Laid out as the long-form pipeline wants it (two decode streams on the CPU).
        self._factory = runner_factory or self._local_runner
        self._resume = False
        self._done = 0
        self._connect()

    def _local_runner(self, model: str, device: str) -> Runner:
        """The files layout of ``model``, at the compute type in the settings at import time."""
        return local_runner(model, device, files=True,
                            compute_type=self._settings().compute_type)

    def _connect(self) -> None:
        b = self.bridge
        b.started.connect(self._on_started)
        b.progress.connect(self._on_progress)
        b.segments.connect(self._on_segments)
        b.finished.connect(self._on_finished)
        b.failed.connect(self._on_failed)
        b.warning.connect(lambda message: self.window.show_message(message, 20000))
        self.window.import_cancel_requested.connect(self.cancel)
        self.window.file_dropped.connect(lambda path: self.open_file(Path(path)))

    @property
    def running(self) -> bool:
        return self.current is not None

    def refuse_live(self) -> bool:
        """True (and says why) when live listening must wait for the import."""
        if self.current is None:
            return False
        self.window.show_message(
            f"Transcribing {self.current.path.name}: dictation is paused until it finishes "
            "(or Cancel it)", 8000)
        return True

    # -- user intent ---------------------------------------------------------------------------
    def open_file(self, path: Path) -> bool:
        """Start importing `path`; False when another import is still running."""
        if self.refuse_live():
            return False
        live, s = self.live, self._settings()
        self._resume = live.engine is not None
        live.stop()
        stopped = live.stopped_engines()
        options = self.options
        if options.language is None and s.language:
            options = dataclasses.replace(options, language=s.language)
        if not options.vocabulary:
            options = dataclasses.replace(
                options, vocabulary=parse_vocabulary(s.vocabulary).terms())
        model, device, factory = live.model_name(), s.device, self._factory
        # Built and loaded on the worker: importing the ASR libraries takes a moment too.
        self.current = FileImport(path, lambda: factory(model, device), self.bridge, options,
                                  before_decode=lambda: _wait_all(stopped))
        self._done = 0
        self.window.set_importing(True)
        self.window.import_panel.begin(path.name)
        if s.backend == "remote":
            self.window.show_message(
                f"Files are transcribed on this computer with {model}; the server is "
                "used for live text only", 10000)
        log.info("importing %s", path)
        self.current.start()
        return True

    def cancel(self) -> None:
        if self.current is not None:
            log.info("import of %s: cancel requested", self.current.path)
            self.current.cancel()

    def shutdown(self, timeout: float = QUIT_WAIT_S) -> None:
        """On quit: cancel and let the batch in flight end (native code must not be torn down
        under a running decode)."""
        self._resume = False  # the app is going away: no live engine after the import
        if self.current is not None:
            self.current.cancel()
            if not self.current.wait(timeout):
                log.warning("import still busy after %.0f s; quitting anyway", timeout)

    # -- worker reports (GUI thread) -----------------------------------------------------------
    def _on_started(self, total: int) -> None:
        assert self.current is not None
        if self.session.finals and self.session.source is None:
            # Live text leaves the view, not the disk: its journal has it.
            self.window.show_message("Earlier text is in File → History", 10000)
        self.session.clear()
        self.session.source = self.current.path.name
        self.session.duration = total
        self.window.transcript.clear_transcript()
        self.window.import_panel.set_total(total)

    def _on_progress(self, done: int, total: int) -> None:
        self._done = done
        self.window.import_panel.set_progress(done, total)

    def _on_segments(self, segments: tuple[Segment, ...], language: str | None) -> None:
        for segment in segments:
            final = self.session.add_segment(segment, language)
            if final is not None:
                self.window.transcript.add_final(final.start, final.text, segment.flags)

    def _on_finished(self, result: ImportResult) -> None:
        self.last_result = result
        name, lines = result.path.name, len(self.session.finals)
        total = format_duration(result.transcript.duration / SAMPLE_RATE)
        if not result.started:
            text = f"Import of {name} cancelled; nothing changed"
        elif result.cancelled:
            done = format_duration(self._done / SAMPLE_RATE)
            text = (f"Partial transcript: import of {name} cancelled at {done} of {total} "
                    f"({lines} lines)")
        else:
            text = (f"Imported {name}: {total} of audio in "
                    f"{format_duration(result.elapsed_s)} ({lines} lines)")
        if result.flagged:
            text += f"; {result.flagged} marked \u26a0 may be hallucinated"
        if result.dropped:
            text += f"; {result.dropped} passages of non-speech left out"
        log.info("%s", text)
        self._end(text)

    def _on_failed(self, message: str) -> None:
        self._end(f"Could not import: {message}")

    def _end(self, message: str) -> None:
        self.current = None
        self.window.import_panel.end()
        self.window.set_importing(False)
        self.window.show_message(message, 0)  # stays until the next message
        if self._resume:
            self._resume = False
            self.live.start()


def _wait_all(engines: list[RunningEngine]) -> None:
    """On the worker: let paused engines finish their flush before the import decodes."""
    for engine in engines:
        if not engine.wait(QUIT_WAIT_S):
            log.warning("paused live engine still busy after %.0f s; importing anyway",
                        QUIT_WAIT_S)
