"""ensure_form: every final reaches the user capitalised and ended, without touching what
Whisper wrote."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.form import (
    OpenSentence,
    ends_marked,
    ends_sentence_in,
    ensure_form,
    has_form,
    reads_finished,
    reads_open,
    starts_lower,
)
from engine.types import Word


@pytest.mark.parametrize(("text", "formed"), [
    ("and so my fellow Americans ask not", "And so my fellow Americans ask not."),
    ("Concord returned to its place amidst the tents",
     "Concord returned to its place amidst the tents."),
    ("And so, my fellow Americans.", "And so, my fellow Americans."),  # left alone
    ("Really?", "Really?"),
    ("he said 'no'", "He said 'no'."),
    ("(see above)", "(See above)."),
    ("Well,", "Well,"),  # left open on purpose
    ("and then -", "And then -"),
    ("the year 1961", "The year 1961."),
    ("iPhone sales rose", "IPhone sales rose."),
    ("\u6771\u4eac\u3067\u3059", "\u6771\u4eac\u3067\u3059"),  # no case, no known end: alone
    ("\u00e9t\u00e9 chaud", "\u00c9t\u00e9 chaud."),
    ("  spaced out  ", "Spaced out."),
    ("", ""),
    ("...", "..."),
])
def test_finals_get_sentence_case_and_an_end(text: str, formed: str) -> None:
    assert ensure_form(text)[0] == formed


def test_words_carry_the_same_form_as_the_text() -> None:
    words = (Word(" and", 0, 10), Word(" so", 10, 20), Word(" 'no'", 20, 30))
    text, formed = ensure_form("and so 'no'", words)
    assert text == "And so 'no'."
    assert [w.text for w in formed] == [" And", " so", " 'no'."]
    assert [(w.start, w.end) for w in formed] == [(0, 10), (10, 20), (20, 30)]


@given(st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "Zs")),
               max_size=40))
def test_form_is_idempotent_and_only_adds(text: str) -> None:
    once, _ = ensure_form(text)
    assert ensure_form(once)[0] == once
    assert once.lower().startswith(text.strip()[:1].lower()) or not text.strip()
    assert len(once) - len(text.strip()) in (0, 1)


def test_has_form() -> None:
    assert has_form("Ask not.") and has_form("Quoted.\u201d") and has_form("\u6771\u4eac\u3002")
    assert not has_form("ask not") and not has_form("Well,") and not has_form("")


def test_voice_activity_pieces_keep_their_end() -> None:
    """The VAD cuts sentences at pauses: a piece is capitalised, its end left as Whisper wrote
    it."""
    assert ensure_form("and so my fellow Americans ask not", end=False)[0] == (
        "And so my fellow Americans ask not")
    assert ensure_form("ask what you can do.", end=False)[0] == "Ask what you can do."


def test_a_piece_that_goes_on_with_an_open_sentence_keeps_its_first_letter() -> None:
    words = (Word(" ask", 0, 10), Word(" not", 10, 20))
    assert ensure_form("ask not", words, start=False) == (
        "ask not.", (Word(" ask", 0, 10), Word(" not.", 10, 20)))
    assert ensure_form("ask not what", end=False, start=False)[0] == "ask not what"
    assert ensure_form("Ask not.", start=False)[0] == "Ask not."  # Whisper's capital stays


def test_open_sentence_tracks_whether_the_next_final_goes_on() -> None:
    sentence = OpenSentence(within=100)
    assert not sentence.goes_on(0)  # nothing yet
    sentence.ended("And so, my fellow Americans,", end=50)
    assert sentence.goes_on(150) and not sentence.goes_on(151)  # within 100 samples only
    sentence.ended("", end=60)  # an empty final (noise) changes nothing
    assert sentence.goes_on(150)
    sentence.ended("ask not what your country can do for you.", end=200)
    assert not sentence.goes_on(210)


def test_starts_lower_and_ends_marked() -> None:
    assert starts_lower("ask not") and starts_lower(" 'and so'") and not starts_lower("Ask")
    assert not starts_lower("1961 was") and not starts_lower("東京") and not starts_lower("")
    for marked in ("Ask not.", "Well,", "As follows:", "And then -", "Wait…", "So;"):
        assert ends_marked(marked), marked
    assert not ends_marked("ask not") and not ends_marked("") and not ends_marked("1961")


@pytest.mark.parametrize("text, finished", [
    ("And so my fellow Americans.", True),
    ("Is that right?", True),
    ('He said "stop!"', True),
    ("Ask not...", False),  # trailing off: the speaker may go on
    ("Ask not\u2026", False),
    ("Thanks.", False),  # one word: "one ... two ... three" said a word at a time
    ("and so my fellow", False),
    ("", False),
])
def test_reads_finished(text: str, finished: bool) -> None:
    assert reads_finished(text) is finished


@pytest.mark.parametrize("text, open_", [
    ("And so my fellow Americans ask not...", True),  # trailing off mid-sentence
    ("Ask not\u2026", True),
    ("And so, my fellow Americans,", True),
    ("The list:", True),
    ("and so my fellow", True),  # no sentence end at all
    ('He said "wait,"', True),
    ("And so my fellow Americans.", False),
    ("Is that right?", False),
    ("Thanks.", False),
    ("東京", False),  # no case, no known mark: nothing to tell
    ("", False),
])
def test_reads_open(text: str, open_: bool) -> None:
    assert reads_open(text) is open_
    assert not (open_ and reads_finished(text))  # never both


@pytest.mark.parametrize("prefix, longer, ends", [
    # A decode that heard what followed the pause punctuates it as the sentence reads.
    ("In the exhibition.", "In the exhibition in being modern. For", False),
    ("He came home.", "He came home. Then he slept", True),
    ("He came home.", "He came home, then", False),
    ("Is it late?", "Is it late? No", True),
    ("He came home.", "He came home...", None),  # nothing after it yet
    ("He came home.", "He came home", None),
    ("And so he came home.", "so he came home. Then", True),  # words shifted by one
    ("He came home.", "She went away to", None),  # too short to tell
    ("He came home.", "She went away to town", False),  # no sentence end near the place
    ("I could hear.", "I could out here. We", True),  # heard differently: the place by count
    ("", "Anything at all", None),
])
def test_ends_sentence_in(prefix: str, longer: str, ends: bool | None) -> None:
    assert ends_sentence_in(prefix, longer) is ends
