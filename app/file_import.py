"""File > Open file…: transcribe an audio/video file off the GUI thread. Qt-free: the worker
reports through an `ImportListener` (ui.bridge.ImportBridge carries the calls into the GUI thread).

The worker consumes `engine.files.transcribe_file` on the file itself (`open_audio`: decoded
piece by piece and planned a section at a time, so a long recording never sits whole in memory;
only its first piece is decoded before the import starts, so a file that does not decode still
changes nothing): segments arrive final and in file order as
the pipeline advances (the first after about one chunk per decode stream), each is journalled
as it arrives (a crash loses at most the wave in flight) and shown; progress events carry the
samples done, from which the panel shows an ETA. Cancel stops after the wave in flight; the
text so far is kept (a prefix of what the whole file would have given).

Order of events: `import_started(total)` only after the file decoded and the model loaded (so a
failure before that changes nothing on screen), then `import_progress` and `import_segments`
as the work advances, then exactly one of `import_finished` / `import_failed`.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from engine.core.hotwords import VOCABULARY_MAX_CHARS, render
from engine.errors import EngineError
from engine.events import FinalText
from engine.journal import Journal, JournalError, new_session_id
from engine.types import DecodeOptions, Runner, Segment, Transcript

log = logging.getLogger(__name__)

# What the file dialog offers; anything PyAV/FFmpeg decodes works (see engine.audio.decode).
MEDIA_SUFFIXES = ("wav", "flac", "mp3", "ogg", "opus", "m4a", "aac", "wma", "mp4", "mkv", "webm",
                  "mov", "avi")


@dataclass(frozen=True)
class ImportOptions:
    """How a file is imported.

    Attributes:
      language: ISO 639-1 code, or None to detect.
      batch_size: chunks per decode call (None: the pipeline chooses from the device).
      vocabulary: words and phrases decoding is biased towards (the settings' default set).
    """

    language: str | None = None
    batch_size: int | None = None
    vocabulary: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")


@dataclass(frozen=True)
class ImportResult:
    """What an import produced. `transcript` holds every segment decoded (all of the file unless
    `cancelled`); `flagged` counts segments the hallucination checks marked as suspect (shown
    with a marker), `dropped` the chunks whose text was judged not speech (not shown)."""

    path: Path
    transcript: Transcript
    cancelled: bool
    flagged: int
    journal_path: Path | None
    elapsed_s: float
    dropped: int = 0
    started: bool = True  # False: cancelled while opening, before anything changed on screen


class ImportListener(Protocol):
    """Called on the worker thread; implementations hand the calls to their own thread."""

    def import_started(self, total_samples: int) -> None: ...
    def import_progress(self, done_samples: int, total_samples: int) -> None: ...
    def import_segments(self, segments: tuple[Segment, ...], language: str | None) -> None: ...
    def import_finished(self, result: ImportResult) -> None: ...
    def import_failed(self, message: str) -> None: ...
    def import_warning(self, message: str) -> None: ...


def journal_id(path: Path) -> str:
    """Journal session id of an import: the usual sortable time stamp, then the file's stem
    (filename-safe) so history can name the file. Old readers only see another session."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", path.stem)[:40].strip("._") or "file"
    return f"{new_session_id()}-import-{stem}"


def source_name(session_id: str) -> str | None:
    """The file stem an import journal was named after (None for a live session)."""
    _, sep, stem = session_id.partition("-import-")
    return stem if sep else None


class FileImport:
    """One import, run on its own thread: `start()`, `cancel()`, `wait(timeout)`.

    `runner` is a zero-argument callable returning the (unloaded) `Runner` to decode with
    (called on the worker, since loading a model takes seconds); `before_decode` runs on the
    worker first (the controller waits there for a paused live engine to finish its flush).
    """

    def __init__(self, path: Path, runner: Callable[[], Runner], listener: ImportListener,
                 options: ImportOptions | None = None,
                 before_decode: Callable[[], None] | None = None,
                 journal_dir: Path | None = None) -> None:
        self.path = path
        self.options = options or ImportOptions()
        self._runner = runner
        self._listener = listener
        self._before_decode = before_decode
        self._journal_dir = journal_dir
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._journal_ok = True

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("an import runs once")
        self._thread = threading.Thread(target=self._run, name="file-import", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        """Stop after the wave in flight; the text so far is kept and reported as finished."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """True when the worker has ended (or never started)."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            self._import()
        except EngineError as exc:
            log.warning("import of %s failed: %s", self.path, exc)
            self._listener.import_failed(str(exc))
        except Exception as exc:  # noqa: BLE001 - thread top: report, never die silently
            log.exception("import of %s failed", self.path)
            self._listener.import_failed(f"{self.path.name}: unexpected error: {exc}")

    def _import(self) -> None:
        from engine.audio.decode import open_audio
        from engine.files import FileOptions, Progress, transcribe_file

        started = time.monotonic()
        # Decoded piece by piece as the run goes (a long file never sits whole in memory).
        # AudioDecodeError here, at the probe or the first piece: nothing has changed yet.
        audio = open_audio(self.path)
        audio.length_within(0.0)
        if self._before_decode is not None:
            self._before_decode()
        runner = self._runner()
        runner.load()
        total = audio.expected_samples  # the header's length (progress totals follow the file)
        if self._cancel.is_set():  # cancelled while the file or model loaded: change nothing
            self._listener.import_finished(ImportResult(
                path=self.path, transcript=Transcript(segments=(), duration=total),
                cancelled=True, flagged=0, journal_path=None,
                elapsed_s=time.monotonic() - started, started=False))
            return
        self._listener.import_started(total)
        opts = self.options
        decode = DecodeOptions(language=opts.language, beam_size=1, word_timestamps=True,
                               hotwords=render(opts.vocabulary, VOCABULARY_MAX_CHARS))
        base = FileOptions.coerce(decode)
        # Waves from one chunk per stream, doubling: the first text shows early.
        file_options = dataclasses.replace(base, batch_size=opts.batch_size, first_batch=1)
        run = transcribe_file(audio, runner, file_options, cancel=self._cancel)
        journal = Journal(journal_id(self.path), self._journal_dir)
        count = 0
        try:
            for event in run:
                if isinstance(event, Progress):
                    self._listener.import_progress(event.done, event.total)
                    continue
                count += 1
                self._journal(journal, event, run.info.language, count)
                self._listener.import_segments((event,), run.info.language)
        finally:
            journal.close()
        transcript = run.transcript()
        transcript = dataclasses.replace(transcript, extra={**transcript.extra,
                                                            "source": self.path.name})
        flagged = sum(1 for s in transcript.segments if s.flags)
        self._listener.import_finished(ImportResult(
            path=self.path, transcript=transcript, cancelled=run.info.cancelled, flagged=flagged,
            journal_path=journal.path if count and self._journal_ok else None,
            elapsed_s=time.monotonic() - started, dropped=len(run.info.dropped)))

    def _journal(self, journal: Journal, segment: Segment, language: str | None,
                 number: int) -> None:
        """Append one segment in the live journal's format (one line per segment)."""
        if not self._journal_ok:
            return
        try:
            journal.append(FinalText(utterance_id=number, text=segment.text.strip(),
                                     words=segment.words, start=segment.start, end=segment.end,
                                     latency_ms=0.0, language=language), segment.flags)
        except JournalError as exc:
            # As in live dictation: say so once and keep transcribing without the journal.
            self._journal_ok = False
            log.warning("%s", exc)
            self._listener.import_warning(f"Transcript not autosaved: {exc}")
