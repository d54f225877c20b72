"""Journal: JSONL appended and fsynced per final, read back, torn lines skipped, errors typed."""

from __future__ import annotations

import json
import math
import os
import stat
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.events import FinalText
from engine.journal import (
    Journal,
    JournalError,
    journal_dir,
    list_sessions,
    new_session_id,
    read_journal,
    read_journal_report,
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


# --- damaged files (issue 15, item 1) ---------------------------------------------------------

def _good_line(uid: int, text: str) -> bytes:
    return (json.dumps({"utterance_id": uid, "text": text, "start_s": 1.0, "end_s": 2.0,
                        "language": "en", "written_at": "2026-01-01T10:00:00.000+00:00",
                        "words": []}, ensure_ascii=False) + "\n").encode()


DAMAGED_LINES = [
    '{"text":"日'.encode()[:-1],  # a crash mid-character: invalid UTF-8
    b"[1, 2, 3]", b'"just a string"', b"null", b"42",  # valid JSON, not an object
    b'{"utterance_id": 1, "text": "x", "start_s": NaN, "end_s": 2, "written_at": "t"}',
    b'{"utterance_id": 1, "text": "x", "start_s": 1, "end_s": Infinity, "written_at": "t"}',
    b'{"utterance_id": 1, "text": "x", "start_s": 1, "end_s": 2, "written_at": "t",'
    b' "words": [["w", 1e999, 2, 0.5]]}',
    b'{"utterance_id": 1, "text": "x", "start_s": "1", "end_s": 2, "written_at": "t"}',
    b'{"utterance_id": 1, "text": "x", "start_s": 1, "end_s": 2, "written_at": "t",'
    b' "words": 5}',
    b"[" * 100_000,
]


@pytest.mark.parametrize("damaged", DAMAGED_LINES, ids=range(len(DAMAGED_LINES)))
def test_a_damaged_line_is_skipped_and_counted(tmp_path: Path, damaged: bytes) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_good_line(1, "before") + damaged + b"\n" + _good_line(2, "after"))
    report = read_journal_report(path)
    assert [e.text for e in report.entries] == ["before", "after"]
    assert report.skipped == 1


def test_history_lists_every_session_when_one_file_is_damaged() -> None:
    """The issue's repro: a journal file holding a torn UTF-8 character broke History."""
    from app.dialogs import journal_finals, journal_sessions

    folder = journal_dir()
    folder.mkdir(parents=True)
    (folder / "20260101-100000-000000.jsonl").write_bytes('{"text":"日'.encode()[:-1])
    (folder / "20260102-100000-000000.jsonl").write_bytes(
        _good_line(1, "kept") + b"[1]\n" + b'{"utterance_id": 2, "text": "y", "start_s": NaN,'
        b' "end_s": 1, "written_at": "t"}\n' + _good_line(3, "also kept"))
    (folder / "20260103-100000-000000.jsonl").write_bytes(_good_line(1, "other session"))
    sessions = journal_sessions()
    assert [text for _, _, text in sessions] == ["other session", "kept\nalso kept"]
    assert "2 damaged lines skipped" in sessions[1][0]
    assert "damaged" not in sessions[0][0]
    assert [f.text for f, _ in journal_finals(sessions[1][1])] == ["kept", "also kept"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.binary(max_size=60), st.sampled_from(DAMAGED_LINES),
                          st.builds(lambda v: json.dumps(v).encode(), st.recursive(
                              st.none() | st.booleans() | st.floats() | st.integers()
                              | st.text(max_size=5),
                              lambda inner: st.lists(inner, max_size=4)
                              | st.dictionaries(st.sampled_from(
                                  ["utterance_id", "text", "start_s", "end_s", "language",
                                   "written_at", "words", "flags"]), inner, max_size=8),
                              max_leaves=12))), max_size=6))
def test_any_bytes_between_good_lines_never_break_reading(tmp_path: Path,
                                                          junk: list[bytes]) -> None:
    path = tmp_path / "fuzz.jsonl"
    body = b"\n".join(line.replace(b"\n", b" ") for line in junk)
    path.write_bytes(_good_line(1, "first") + body + b"\n" + _good_line(2, "last"))
    report = read_journal_report(path)
    texts = [e.text for e in report.entries]
    assert texts[0] == "first" and texts[-1] == "last"
    for entry in report.entries:  # whatever was accepted is safe to show and to reopen
        assert math.isfinite(entry.start_s) and math.isfinite(entry.end_s)
        assert isinstance(entry.language, (str, type(None)))


# --- privacy (issue 15, item 3) ---------------------------------------------------------------

@pytest.mark.skipif(os.name != "posix", reason="Unix permissions")
def test_journal_files_are_private(tmp_path: Path) -> None:
    folder = tmp_path / "journal"
    journal = Journal("s", directory=folder)
    journal.append(final(1, "a secret"))
    journal.close()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(journal.path.stat().st_mode) == 0o600
    # A file and folder from an older version (0644 in 0755) are tightened when reopened.
    os.chmod(folder, 0o755)
    os.chmod(journal.path, 0o644)
    Journal("s", directory=folder).open()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(journal.path.stat().st_mode) == 0o600
