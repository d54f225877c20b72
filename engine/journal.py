"""Autosave journal: every final utterance is appended to a JSONL file as soon as it is made.

One file per session, ``<data dir>/journal/<session>.jsonl``. Each line is flushed and fsynced
before `append()` returns, so a crash loses at most the utterance still being decoded. A write
error (full disk, removed folder) raises `JournalError` for the caller to report; the live
pipeline reports it once and carries on without the journal rather than stopping.

`read_journal()` reads a session back (skipping a torn last line left by a crash) and
`list_sessions()` lists the sessions, newest first, for a history view.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from engine.errors import EngineError
from engine.events import FinalText
from engine.paths import data_dir
from engine.types import Word, samples_to_seconds

log = logging.getLogger(__name__)


class JournalError(EngineError):
    """The journal could not be written (disk full, permission, folder gone)."""


@dataclass(frozen=True)
class JournalEntry:
    utterance_id: int
    text: str
    start_s: float
    end_s: float
    language: str | None
    written_at: str  # ISO 8601, UTC
    words: tuple[Word, ...] = ()
    flags: tuple[str, ...] = ()  # hallucination checks the text failed; absent from most lines


def journal_dir(root: Path | None = None) -> Path:
    return (root or data_dir()) / "journal"


def new_session_id(now: datetime | None = None) -> str:
    """A sortable, filename-safe id such as ``20261129-213012-123456``."""
    moment = now or datetime.now(timezone.utc)
    return moment.strftime("%Y%m%d-%H%M%S-%f")


class Journal:
    """Appends `FinalText`s of one session. `open()` creates the file; `close()` is idempotent."""

    def __init__(self, session_id: str | None = None, directory: Path | None = None) -> None:
        self.session_id = session_id or new_session_id()
        self._directory = directory
        self._file: IO[str] | None = None

    @property
    def path(self) -> Path:
        return (self._directory or journal_dir()) / f"{self.session_id}.jsonl"

    def open(self) -> None:
        if self._file is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - held open for the session
        except OSError as exc:
            raise JournalError(f"cannot open journal {self.path}: {exc.strerror or exc}") from exc

    def append(self, final: FinalText, flags: tuple[str, ...] = ()) -> None:
        """Write one utterance and force it to disk. `flags` (an imported file's suspect text)
        is an optional key, so older readers still read the line."""
        if self._file is None:
            self.open()
        assert self._file is not None
        record = {
            "utterance_id": final.utterance_id, "text": final.text,
            "start_s": round(samples_to_seconds(final.start), 3),
            "end_s": round(samples_to_seconds(final.end), 3), "language": final.language,
            "written_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            "words": [[w.text, w.start, w.end, round(w.probability, 3)] for w in final.words],
        }
        if flags:
            record["flags"] = list(flags)
        try:
            self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise JournalError(f"cannot write journal {self.path}: {exc.strerror or exc}") from exc

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError as exc:
                log.warning("closing journal %s failed: %s", self.path, exc)


def read_journal(path: Path) -> list[JournalEntry]:
    """Entries of one journal file; a torn or corrupt line (crash mid-write) is skipped."""
    entries = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                entries.append(_entry(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("%s:%d: skipping unreadable journal line (%s)", path, number, exc)
    return entries


def list_sessions(root: Path | None = None) -> list[Path]:
    """Journal files, newest session first."""
    folder = journal_dir(root)
    if not folder.is_dir():
        return []
    return sorted(folder.glob("*.jsonl"), reverse=True)


def _entry(row: dict[str, Any]) -> JournalEntry:
    words = tuple(Word(str(t), int(s), int(e), float(p)) for t, s, e, p in row.get("words", []))
    return JournalEntry(
        utterance_id=int(row["utterance_id"]), text=str(row["text"]),
        start_s=float(row["start_s"]), end_s=float(row["end_s"]), language=row.get("language"),
        written_at=str(row["written_at"]), words=words,
        flags=tuple(str(f) for f in row.get("flags", [])),
    )
