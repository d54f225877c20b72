"""File > Open file…: transcribe an audio/video file with the long-form pipeline, off the GUI
thread. Qt-free: the worker reports through an `ImportListener` (ui.bridge.ImportBridge carries
the calls into the GUI thread).

Why sections: `engine.longform.transcribe_long` returns the whole transcript at the end (and
reports progress once per batch). To show text as it is made and journal it (a crash loses at
most the section in flight), the file is cut into sections at the quietest spot near each
border (so no word is cut), and each section is one `transcribe_long` call. A section is about
one batch of 8-12 s chunks: on the CPU, 60 s sections measured within noise of one whole-file
call in CPU time and WER and show the first text 3-4x sooner; 30 s sections cost about a third
more CPU and a point of WER on the long reading (bench/app_import.py). A GPU batches twice as
many chunks, so its sections are twice as long.

Order of events: `import_started(total)` only after the file decoded and the model loaded (so a
failure before that changes nothing on screen), then `import_progress` and `import_segments`
as sections finish, then exactly one of `import_finished` / `import_failed`.
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
from typing import Any, Protocol

import numpy as np

from engine.errors import EngineError
from engine.events import FinalText
from engine.journal import Journal, JournalError, new_session_id
from engine.types import SAMPLE_RATE, DecodeOptions, Segment, Transcript, Word

log = logging.getLogger(__name__)

# What the file dialog offers; anything PyAV/FFmpeg decodes works (see engine.audio.decode).
MEDIA_SUFFIXES = ("wav", "flac", "mp3", "ogg", "opus", "m4a", "aac", "wma", "mp4", "mkv", "webm",
                  "mov", "avi")
QUIET_FRAME = SAMPLE_RATE // 50  # 20 ms: the resolution at which a section border is placed
PAUSE_FRAMES = 10  # 200 ms: how long a quiet stretch is judged over
CPU_SECTION_S = 60.0  # ~ one CPU batch (8 chunks of 8-12 s)
CUDA_SECTION_S = 120.0  # a GPU batches 16+ chunks: shorter sections would starve it


def section_seconds(device: str) -> float:
    """Default section length for a model on `device` ("cpu", "cuda", ...)."""
    return CUDA_SECTION_S if device.startswith("cuda") else CPU_SECTION_S


@dataclass(frozen=True)
class ImportOptions:
    """How a file is imported.

    Attributes:
      section_s: audio per `transcribe_long` call; also how much a crash can lose and how often
        text appears. None: `section_seconds(device)`.
      search_s: a section border may move this far either way to reach the quietest spot.
      language: ISO 639-1 code, or None to detect.
      batch_size: chunks per decode call (None: the pipeline chooses from the device).
    """

    section_s: float | None = None
    search_s: float = 5.0
    language: str | None = None
    batch_size: int | None = None

    def __post_init__(self) -> None:
        section = self.section_s if self.section_s is not None else CPU_SECTION_S
        if section < 5.0:
            raise ValueError("section_s must be at least 5 s")
        if not 0.0 <= self.search_s < section / 2:
            raise ValueError("search_s must be >= 0 and less than half of section_s")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")


@dataclass(frozen=True)
class ImportResult:
    """What an import produced. `transcript` holds every section decoded (all of the file unless
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


def section_bounds(audio: np.ndarray, section: int, search: int) -> list[tuple[int, int]]:
    """(start, end) sample ranges covering `audio` in order, each about `section` long, cut in
    the quietest stretch within `search` samples of each nominal border."""
    total = len(audio)
    bounds: list[tuple[int, int]] = []
    start = 0
    while total - start > section + search:
        cut = _quietest(audio, start + section - search, start + section + search)
        bounds.append((start, cut))
        start = cut
    bounds.append((start, total))
    return bounds


def _quietest(audio: np.ndarray, lo: int, hi: int) -> int:
    """The middle of the quietest ~200 ms in [lo, hi) (lo when the range is too short).

    Energy is summed over 200 ms so that a real pause wins over the brief silence of a stop
    consonant inside a word."""
    frames = (hi - lo) // QUIET_FRAME
    if frames < PAUSE_FRAMES + 1:
        return lo
    window = audio[lo: lo + frames * QUIET_FRAME].astype(np.float32).reshape(frames, QUIET_FRAME)
    energy = np.einsum("ij,ij->i", window, window)
    pause = np.convolve(energy, np.ones(PAUSE_FRAMES), mode="valid")
    return lo + (int(np.argmin(pause)) + PAUSE_FRAMES // 2) * QUIET_FRAME


def shift_segment(segment: Segment, offset: int) -> Segment:
    """The segment (and its words) moved `offset` samples later: section time -> file time."""
    words = tuple(Word(w.text, w.start + offset, w.end + offset, w.probability)
                  for w in segment.words)
    return dataclasses.replace(segment, start=segment.start + offset, end=segment.end + offset,
                               words=words)


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

    `transcriber` is a zero-argument callable returning the backend to decode with (called on
    the worker, since loading a model takes seconds); `before_decode` runs on the worker first
    (the controller waits there for a paused live engine to finish its flush).
    """

    def __init__(self, path: Path, transcriber: Callable[[], Any], listener: ImportListener,
                 options: ImportOptions | None = None,
                 before_decode: Callable[[], None] | None = None,
                 journal_dir: Path | None = None) -> None:
        self.path = path
        self.options = options or ImportOptions()
        self._transcriber = transcriber
        self._listener = listener
        self._before_decode = before_decode
        self._journal_dir = journal_dir
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._journal_ok = True
        self._reported = -1
        self._dropped = 0

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("an import runs once")
        self._thread = threading.Thread(target=self._run, name="file-import", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        """Stop before the next batch; what was decoded is kept and reported as finished."""
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
        from engine.audio.decode import load_audio

        started = time.monotonic()
        audio = load_audio(self.path)  # AudioDecodeError: nothing has changed yet
        if self._before_decode is not None:
            self._before_decode()
        backend = self._transcriber()
        backend.load()
        total = len(audio)
        if self._cancel.is_set():  # cancelled while the file or model loaded: change nothing
            self._listener.import_finished(ImportResult(
                path=self.path, transcript=Transcript(segments=(), duration=total),
                cancelled=True, flagged=0, journal_path=None,
                elapsed_s=time.monotonic() - started, started=False))
            return
        self._listener.import_started(total)
        journal = Journal(journal_id(self.path), self._journal_dir)
        try:
            segments, language, cancelled = self._sections(audio, backend, journal)
        finally:
            journal.close()
        transcript = Transcript(segments=tuple(segments), language=language, duration=total,
                                extra={"cancelled": cancelled, "source": self.path.name})
        if not cancelled:
            self._report(total, total)
        flagged = sum(1 for s in segments if s.flags)
        self._listener.import_finished(ImportResult(
            path=self.path, transcript=transcript, cancelled=cancelled, flagged=flagged,
            journal_path=journal.path if segments and self._journal_ok else None,
            elapsed_s=time.monotonic() - started, dropped=self._dropped))

    def _sections(self, audio: np.ndarray, backend: Any,
                  journal: Journal) -> tuple[list[Segment], str | None, bool]:
        """Decode section after section; returns the segments, language and whether cancelled."""
        from engine.longform import transcribe_long

        opts = self.options
        decode = DecodeOptions(language=opts.language, beam_size=1, word_timestamps=True)
        total = len(audio)
        info = getattr(backend, "info", None)
        seconds = opts.section_s or section_seconds(str(getattr(info, "device", "cpu")))
        bounds = section_bounds(audio, int(seconds * SAMPLE_RATE), int(opts.search_s * SAMPLE_RATE))
        segments: list[Segment] = []
        language: str | None = opts.language
        # Only the documented arguments unless asked: the pipeline's internals are moving.
        extra = {"batch_size": opts.batch_size} if opts.batch_size else {}
        for start, end in bounds:
            if self._cancel.is_set():
                return segments, language, True

            def progress(done: int, _total: int, offset: int = start) -> None:
                self._report(offset + done, total)

            part = transcribe_long(audio[start:end], backend, decode, progress=progress,
                                   cancel=self._cancel, **extra)  # cancel: checked per batch
            new = tuple(shift_segment(s, start) for s in part.segments if s.text.strip())
            language = language or part.language
            dropped = part.extra.get("dropped")
            self._dropped += len(dropped) if isinstance(dropped, list) else 0
            self._journal(journal, new, language, first_id=len(segments) + 1)
            segments.extend(new)
            if new:
                self._listener.import_segments(new, language)
            if part.extra.get("cancelled"):
                return segments, language, True
        return segments, language, False

    def _report(self, done: int, total: int) -> None:
        """Progress to the listener, only when it moved: each section starts where the last
        ended, and the pipeline reports its own start and end."""
        if done > self._reported or (done == 0 and self._reported < 0):
            self._reported = done
            self._listener.import_progress(done, total)

    def _journal(self, journal: Journal, segments: tuple[Segment, ...], language: str | None,
                 first_id: int) -> None:
        """Append a section's segments in the live journal's format (one line per segment)."""
        if not self._journal_ok:
            return
        try:
            for number, segment in enumerate(segments, first_id):
                journal.append(FinalText(utterance_id=number, text=segment.text.strip(),
                                         words=segment.words, start=segment.start,
                                         end=segment.end, latency_ms=0.0, language=language),
                               segment.flags)
        except JournalError as exc:
            # As in live dictation: say so once and keep transcribing without the journal.
            self._journal_ok = False
            log.warning("%s", exc)
            self._listener.import_warning(f"Transcript not autosaved: {exc}")
