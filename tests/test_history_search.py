"""History: full-text search over every journalled session (engine.journal.search_lines, pure)
and the dialog that shows it (real widgets under Xvfb): filtering, highlighted matches, copying
an utterance or a whole session to the real clipboard. A screenshot goes to tests/artifacts/."""

from __future__ import annotations

from pathlib import Path

from engine.journal import LineMatch, find_spans, search_lines, search_terms

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"

JFK = ("And so my fellow Americans, ask not what your country can do for you, ask what you can "
       "do for your country.")
SESSIONS = [
    ("2026-11-30 09:12 UTC · 23 words", "20261130-091200-000000.jsonl",
     [JFK, "Concord returned to its place amidst the tents."]),
    ("2026-11-29 17:40 UTC · 12 words", "20261129-174000-000000.jsonl",
     ["Meeting notes for Tuesday.", "The COUNTRY road was closed, so we were late."]),
    ("2026-11-28 08:05 UTC · 6 words", "20261128-080500-000000.jsonl",
     ["Go forward ten meters."]),
]


def test_terms_and_quoted_phrases() -> None:
    assert search_terms('  ask  "your country"  ') == ["ask", "your country"]
    assert search_terms("") == []


def test_every_term_must_occur_case_insensitively() -> None:
    assert find_spans("The COUNTRY road", "country") == ((4, 11),)
    assert find_spans("The COUNTRY road", "country ROAD") == ((4, 11), (12, 16))
    assert find_spans("The COUNTRY road", "country lane") == ()
    assert find_spans("anything", "") == ()
    # Overlapping and adjacent occurrences merge into one highlighted span.
    assert find_spans("countryside", "country try side") == ((0, 11),)
    # Regex characters are plain text.
    assert find_spans("a (b) c.", "(b)") == ((2, 5),)
    assert find_spans("abc", ".") == ()


def test_search_lines_lists_matching_utterances_in_order() -> None:
    lines = SESSIONS[0][2] + SESSIONS[1][2]
    first, last = JFK.index("country"), JFK.rindex("country")
    assert first != last and JFK[last:last + 8] == "country."
    assert search_lines(lines, "country") == [
        LineMatch(0, JFK, ((first, first + 7), (last, last + 7))),
        LineMatch(3, "The COUNTRY road was closed, so we were late.", ((4, 11),)),
    ]
    assert search_lines(lines, '"ask not"') == [LineMatch(0, JFK, ((JFK.index("ask not"), JFK.index("ask not") + 7),))]
    assert search_lines(lines, "concorde") == []


def _dialog(qtbot, tmp_path):  # type: ignore[no-untyped-def]
    from ui.history_dialog import HistoryDialog

    sessions = [(label, tmp_path / name, "\n".join(lines)) for label, name, lines in SESSIONS]
    dialog = HistoryDialog(sessions)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def _labels(dialog) -> list[str]:  # type: ignore[no-untyped-def]
    return [dialog.list.item(i).text() for i in range(dialog.list.count())]


def test_dialog_search_filters_sessions_and_lists_highlighted_matches(qtbot, tmp_path) -> None:
    from PySide6.QtWidgets import QLabel

    dialog = _dialog(qtbot, tmp_path)
    assert dialog.entry_texts() == SESSIONS[0][2]  # no query: the newest session, in full
    assert dialog.status.text() == "3 sessions"
    qtbot.keyClicks(dialog.search, "Country")
    assert _labels(dialog) == ["2026-11-30 09:12 UTC · 23 words · 1 match",
                               "2026-11-29 17:40 UTC · 12 words · 1 match"]
    assert dialog.status.text() == "2 matching utterances in 2 sessions"
    assert dialog.entry_texts() == [JFK]
    label = dialog.entries.itemWidget(dialog.entries.item(0))
    assert isinstance(label, QLabel)
    assert label.text().count("background-color") == 2  # both "country"s highlighted
    assert ">country</span>" in label.text()
    ARTIFACTS.mkdir(exist_ok=True)
    assert dialog.grab().save(str(ARTIFACTS / "history_search.png"))
    dialog.list.setCurrentRow(1)
    assert dialog.entry_texts() == ["The COUNTRY road was closed, so we were late."]
    dialog.search.setText("nothing like this")
    assert dialog.list.count() == 0 and dialog.entry_texts() == []
    assert not dialog.open_button.isEnabled() and not dialog.copy_entry_button.isEnabled()
    assert dialog.status.text() == "0 matching utterances in 0 sessions"
    dialog.search.clear()
    assert dialog.list.count() == 3


def test_dialog_copies_an_utterance_or_a_whole_session(qtbot, tmp_path) -> None:
    from PySide6.QtGui import QGuiApplication

    dialog = _dialog(qtbot, tmp_path)
    dialog.search.setText("concord")
    with qtbot.waitSignal(dialog.copied) as blocker:
        dialog.copy_entry_button.click()
    clipboard = QGuiApplication.clipboard()
    assert clipboard.text() == blocker.args[0] == "Concord returned to its place amidst the tents."
    assert dialog.status.text() == "Copied 8 words to the clipboard"
    dialog.copy_session_button.click()  # the whole session, not only the matches
    assert clipboard.text() == JFK + "\nConcord returned to its place amidst the tents."
    dialog.search.clear()
    dialog.list.setCurrentRow(2)
    dialog.entries.setCurrentRow(0)
    dialog.copy_entry_button.click()
    assert clipboard.text() == "Go forward ten meters."


def test_dialog_reopens_the_selected_session_and_shows_an_empty_history(qtbot, tmp_path) -> None:
    from ui.history_dialog import HistoryDialog

    dialog = _dialog(qtbot, tmp_path)
    dialog.search.setText("tuesday")
    with qtbot.waitSignal(dialog.reopen_requested) as blocker:
        dialog.open_button.click()
    assert blocker.args == [tmp_path / "20261129-174000-000000.jsonl"]
    empty = HistoryDialog([])
    qtbot.addWidget(empty)
    assert not empty.open_button.isEnabled() and not empty.copy_session_button.isEnabled()
    assert empty.status.text().startswith("No saved sessions yet.")


def test_search_over_journalled_sessions_on_disk(qtbot) -> None:  # type: ignore[no-untyped-def]
    """Real journal files (written as the live engine writes them) through app.dialogs'
    journal_sessions into the dialog, as File > History does."""
    from app.dialogs import journal_sessions
    from engine.events import FinalText
    from engine.journal import Journal
    from ui.history_dialog import HistoryDialog

    for session, texts in (("20261128-080500-000000", ["Go forward ten meters."]),
                           ("20261130-091200-000000", [JFK, "Concord returned."])):
        journal = Journal(session)
        for number, text in enumerate(texts, 1):
            journal.append(FinalText(number, text, (), number * 16000, number * 32000, 90.0))
        journal.close()
    dialog = HistoryDialog(journal_sessions())
    qtbot.addWidget(dialog)
    dialog.search.setText("FORWARD")
    assert dialog.list.count() == 1 and dialog.list.item(0).text().endswith("· 1 match")
    assert dialog.entry_texts() == ["Go forward ten meters."]
    dialog.search.setText("concord")
    assert dialog.entry_texts() == ["Concord returned."]
    dialog.copy_session_button.click()
    from PySide6.QtGui import QGuiApplication

    assert QGuiApplication.clipboard().text() == JFK + "\nConcord returned."
