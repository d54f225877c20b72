"""Autosave journal: every final utterance is appended to a JSONL file as soon as it is made.

One file per session, ``<data dir>/journal/<session>.jsonl``. Each line is flushed and fsynced
before `append()` returns, so a crash loses at most the utterance still being decoded. A write
error (full disk, removed folder) raises `JournalError` for the caller to report; the live
pipeline reports it once and carries on without the journal rather than stopping.

`read_journal()` reads a session back and `list_sessions()` lists the sessions, newest first,
for a history view; `search_lines()` is the history's full-text search over them. Reading never fails on content: a torn last line left by a crash, invalid
UTF-8, a line that is not an entry, a time that is not a finite number are each skipped and
counted (`read_journal_report`), and the rest of the session is read. Files are private to the
user (0600 in a 0700 folder): they hold everything that was dictated.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from engine.atomic import open_private_append, private_dir
from engine.core.captions import CaptionLine
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
    source: str = ""  # captions: the source's label ("You", "Them"); absent from dictation
    translation: str = ""  # captions translated to English: the translation, added later
    # AI polish (a "polish" line the app wrote after the final's own line): the text sent,
    # the answer inserted (None: the raw text was inserted) and why not.
    raw: str | None = None
    polished: str | None = None
    polish_note: str = ""


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
            private_dir(self.path.parent)
            self._file = open(open_private_append(self.path), "a", encoding="utf-8")  # noqa: SIM115 - held open for the session
        except OSError as exc:
            raise JournalError(f"cannot open journal {self.path}: {exc.strerror or exc}") from exc

    def append(self, final: FinalText, flags: tuple[str, ...] = ()) -> None:
        """Write one utterance and force it to disk. `flags` (an imported file's suspect text)
        and `source` (a caption source's label) are optional keys, so older readers still read
        the line."""
        record: dict[str, object] = {
            "utterance_id": final.utterance_id, "text": final.text,
            "start_s": round(samples_to_seconds(final.start), 3),
            "end_s": round(samples_to_seconds(final.end), 3), "language": final.language,
            "written_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            "words": [[w.text, w.start, w.end, round(w.probability, 3)] for w in final.words],
        }
        if flags:
            record["flags"] = list(flags)
        if final.source:
            record["source"] = final.source
        self._write(record)

    def append_translation(self, utterance_id: int, source: str, text: str) -> None:
        """Record the translation of an utterance already written; readers attach it to that
        entry (`read_journal_report`)."""
        self._write({"translation_of": utterance_id, "source": source, "text": text})

    def append_polish(self, utterance_id: int, raw: str, polished: str | None,
                      note: str = "") -> None:
        """Record a final's AI polish: the raw text sent, the answer inserted (None when the
        raw text was), and why not. Readers attach it to the utterance's own line."""
        self._write({"utterance_id": utterance_id,
                     "polish": {"raw": raw, "text": polished, "note": note},
                     "written_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds")})

    def _write(self, record: dict[str, object]) -> None:
        if self._file is None:
            self.open()
        assert self._file is not None
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


@dataclass(frozen=True)
class JournalRead:
    """What one journal file held: its readable entries and how many lines were skipped."""

    entries: list[JournalEntry]
    skipped: int


def read_journal(path: Path) -> list[JournalEntry]:
    """Entries of one journal file; damaged lines are skipped (see `read_journal_report`)."""
    return read_journal_report(path).entries


def read_journal_report(path: Path) -> JournalRead:
    """Entries of one journal file and the number of damaged lines skipped. Raises OSError only
    when the file itself cannot be read."""
    entries: list[JournalEntry] = []
    skipped = 0
    data = path.read_bytes()
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            # Per line, so one character torn by a crash costs one line, not the file.
            row = json.loads(raw.decode("utf-8"))
            if isinstance(row, dict) and "translation_of" in row:
                _attach_translation(entries, row)
            elif isinstance(row, dict) and "polish" in row and "text" not in row:
                _attach_polish(entries, row)
            else:
                entries.append(_entry(row))
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as exc:
            # UnicodeDecodeError is a ValueError; int(inf) an OverflowError; deep nesting a
            # RecursionError.
            skipped += 1
            log.warning("%s:%d: skipping unreadable journal line (%s)", path, number, exc)
    return JournalRead(entries, skipped)


def _attach_translation(entries: list[JournalEntry], row: dict[str, Any]) -> None:
    key = (int(row["translation_of"]), str(row.get("source", "")))
    for at in range(len(entries) - 1, -1, -1):
        if (entries[at].utterance_id, entries[at].source) == key:
            entries[at] = replace(entries[at], translation=str(row["text"]))
            return
    raise KeyError(f"translation of utterance {key[0]} ({key[1]!r}) before the utterance")


CAPTION_SUFFIX = "-captions"


def caption_session_id() -> str:
    """A caption session's id: its file name tells History it holds captions."""
    return new_session_id() + CAPTION_SUFFIX


def is_caption_session(path: Path) -> bool:
    return path.stem.endswith(CAPTION_SUFFIX)


def caption_lines(entries: Sequence[JournalEntry]) -> list[CaptionLine]:
    """A caption session's entries as caption lines (for the transcript and its export)."""
    return [CaptionLine(e.source, f"{e.source}#{e.utterance_id}", e.text, e.start_s, e.end_s,
                        e.language, e.translation) for e in entries]


def find_session(name: str, root: Path | None = None) -> Path:
    """A session by path, id (file stem) or "last" (the newest caption session); OSError when
    there is none."""
    if name == "last":
        found = [p for p in list_sessions(root) if is_caption_session(p)]
        if not found:
            raise FileNotFoundError("no caption session saved yet")
        return found[0]
    path = Path(name)
    if path.is_file():
        return path
    candidate = journal_dir(root) / f"{name}.jsonl"
    if candidate.is_file():
        return candidate
    raise FileNotFoundError(f"no session {name!r} (not a file, nor in {journal_dir(root)})")


def _attach_polish(entries: list[JournalEntry], row: dict[str, Any]) -> None:
    """Put a polish line on the latest entry of its utterance (ValueError when there is none)."""
    polish = row["polish"]
    if not isinstance(polish, dict):
        raise TypeError("polish must be an object")
    number = int(row["utterance_id"])
    polished = polish.get("text")
    for index in range(len(entries) - 1, -1, -1):
        if entries[index].utterance_id == number:
            entries[index] = replace(
                entries[index], raw=str(polish.get("raw", "")),
                polished=None if polished is None else str(polished),
                polish_note=str(polish.get("note", "")))
            return
    raise ValueError(f"a polish line for utterance {number}, which has no line before it")


def list_sessions(root: Path | None = None) -> list[Path]:
    """Journal files, newest session first."""
    folder = journal_dir(root)
    if not folder.is_dir():
        return []
    return sorted(folder.glob("*.jsonl"), reverse=True)


def _entry(row: object) -> JournalEntry:
    """One line's entry; TypeError/ValueError/KeyError when it is not a well-formed one."""
    if not isinstance(row, dict):
        raise TypeError(f"a line must be an object, not {type(row).__name__}")
    words = tuple(Word(str(t), int(s), int(e), float(p)) for t, s, e, p in row.get("words", []))
    language = row.get("language")
    if language is not None and not isinstance(language, str):
        raise TypeError("language must be a string or null")
    return JournalEntry(
        utterance_id=int(row["utterance_id"]), text=str(row["text"]),
        start_s=_seconds(row["start_s"]), end_s=_seconds(row["end_s"]), language=language,
        written_at=str(row["written_at"]), words=words,
        flags=tuple(str(f) for f in row.get("flags", [])),
        source=str(row.get("source", "")),
    )


def _seconds(value: Any) -> float:
    # A bool is an int to Python; NaN/inf would crash every consumer that turns it into samples.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"time {value!r} is not a finite number")
    return float(value)


# -- full-text search (History) -----------------------------------------------------------------

Span = tuple[int, int]


@dataclass(frozen=True)
class LineMatch:
    """One utterance that matched: its index in the session and the character spans of every
    occurrence of each search term (sorted, not overlapping), for highlighting."""

    index: int
    text: str
    spans: tuple[Span, ...]


def search_terms(query: str) -> list[str]:
    """The words of a query; a "quoted phrase" is one term."""
    return [a or b for a, b in re.findall(r'"([^"]+)"|(\S+)', query) if (a or b).strip()]


def find_spans(text: str, query: str) -> tuple[Span, ...]:
    """Where the query's terms occur in ``text``, case-insensitively; () unless every term
    occurs (terms are ANDed; an empty query matches nothing)."""
    terms = search_terms(query)
    spans: list[Span] = []
    for term in terms:
        found = [m.span() for m in re.finditer(re.escape(term), text, re.IGNORECASE)]
        if not found:
            return ()
        spans.extend(found)
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return tuple(merged)


def search_lines(lines: Sequence[str], query: str) -> list[LineMatch]:
    """The utterances of one session that hold every term of the query, in order."""
    matches = []
    for index, line in enumerate(lines):
        spans = find_spans(line, query)
        if spans:
            matches.append(LineMatch(index, line, spans))
    return matches
