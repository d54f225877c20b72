"""bench/reading_report.py: the per-reading scores of captions against the offline decode
(errors charged to the sentence of their reference word, false sentence ends)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import reading_report  # noqa: E402

REFERENCE = ("And so, my fellow Americans, ask not what your country can do for you. "
             "Ask what you can do for your country.")


def test_a_full_stop_counts_as_false_only_where_the_reference_ends_no_sentence() -> None:
    pieces = reading_report.sentence_pieces(REFERENCE)
    assert len(pieces) == 2
    captions = ("And so my fellow Americans. As not. What your country can do for you. "
                "Ask what you can do for your country.")
    assert reading_report.false_sentence_ends(pieces, captions) == (2, 4)
    assert reading_report.false_sentence_ends(pieces, REFERENCE) == (0, 2)
    # Words missing elsewhere do not move a sentence end off the word it follows.
    assert reading_report.false_sentence_ends(pieces, "Ask not what your country can do for "
                                              "you. Ask what you can do for your country!") == (0, 2)


def test_errors_are_charged_to_the_sentence_of_their_reference_word() -> None:
    pieces = reading_report.sentence_pieces(REFERENCE)
    errors, words = reading_report.piece_errors(
        pieces, "and so my fellow americans ask not what your country can do for you ask what "
        "you can do for our country", reading_report.normalised_words)
    assert words == [14, 8] and errors == [0, 1]
    row = reading_report.reading_row("jfk", REFERENCE, None, REFERENCE.replace("your country.",
                                     "our country."), REFERENCE, [500.0, 1500.0])
    assert row["wer"]["diff"] > 0 and row["false_sentence_ends"]["captions"] == 0
    assert row["formatted_wer"]["b"] == 0.0 and row["word_lag_ms"]["p50"] == 1000.0
