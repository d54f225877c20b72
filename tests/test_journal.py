"""Journal: JSONL appended and fsynced per final, read back, torn lines skipped, errors typed."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from engine.events import FinalText
from engine.journal import (
    Journal,
    JournalError,
    journal_dir,
    list_sessions,
    new_session_id,
    read_journal,
)
from engine.paths import data_dir
from engine.types import Word


def final(uid: int, text: str) -> FinalText:
    return FinalText(utterance_id=uid, text=text, words=(Word(" hi", 16000, 24000, 0.9),),
                     start=16000, end=32000, latency_ms=100.0, language="en")


def test_appends_are_on_disk_immediately_and_read_back() -> None:
    journal = Journal("s1")
    assert journal.path == data_dir() / "journal" / "s1.jsonl"
    journal.append(final(1, "Hello there."))
    entries = read_journal(journal.path)  # before close: already flushed
    assert [e.text for e in entries] == ["Hello there."]
    journal.append(final(2, "Ünïcödé ok"))
    journal.close()
    journal.close()
    entries = read_journal(journal.path)
    assert [e.utterance_id for e in entries] == [1, 2] and entries[1].text == "Ünïcödé ok"
    assert entries[0].start_s == 1.0 and entries[0].end_s == 2.0 and entries[0].language == "en"
    assert entries[0].words == (Word(" hi", 16000, 24000, 0.9),)
    assert datetime.fromisoformat(entries[0].written_at).tzinfo is not None


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    journal = Journal("s", directory=tmp_path)
    journal.append(final(1, "kept"))
    journal.close()
    with open(journal.path, "a", encoding="utf-8") as fh:
        fh.write('\n{"utterance_id": 2, "text": "cut in the mid')
    assert [e.text for e in read_journal(journal.path)] == ["kept"]


def test_sessions_are_listed_newest_first(tmp_path: Path) -> None:
    assert list_sessions(tmp_path) == []
    early = new_session_id(datetime(2026, 1, 1, tzinfo=timezone.utc))
    late = new_session_id(datetime(2026, 6, 1, tzinfo=timezone.utc))
    for sid in (early, late):
        Journal(sid, directory=journal_dir(tmp_path)).open()
    assert [p.stem for p in list_sessions(tmp_path)] == [late, early]
    assert new_session_id() != early


def test_unwritable_places_raise_journal_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(JournalError, match="cannot open journal"):
        Journal("x", directory=blocker / "journal").open()
    full = tmp_path / "full"
    full.mkdir()
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full to simulate a full disk")
    (full / "x.jsonl").symlink_to("/dev/full")
    journal = Journal("x", directory=full)
    with pytest.raises(JournalError, match="cannot write journal"):
        journal.append(final(1, "lost"))
    journal.close()
