"""PromptTracker: only checked text, capped, reset after a pause, never across languages."""

from __future__ import annotations

import pytest

from engine.core.form import OpenSentence
from engine.core.prompt import STYLE_ANCHORS, PromptOptions, PromptTracker


def test_no_prompt_until_text_is_added() -> None:
    assert PromptTracker().prompt(0.0) is None


def test_checked_text_becomes_the_prompt_with_whitespace_normalised() -> None:
    tracker = PromptTracker()
    assert tracker.add("  Hello   there. ", at=1.0)
    assert tracker.add("General Kenobi.", at=2.0)
    assert tracker.prompt(3.0) == "Hello there. General Kenobi."


def test_flagged_or_empty_text_is_never_used() -> None:
    tracker = PromptTracker()
    assert not tracker.add("Thank you. Thank you. Thank you.", at=1.0, flags=("repeats",))
    assert not tracker.add("   ", at=1.0)
    assert tracker.prompt(2.0) is None


def test_disabled_tracker_keeps_nothing() -> None:
    tracker = PromptTracker(PromptOptions(enabled=False))
    assert not tracker.add("Fine text.", at=0.0)
    assert tracker.prompt(0.0) is None


def test_prompt_is_capped_at_a_word_boundary() -> None:
    tracker = PromptTracker(PromptOptions(max_chars=20))
    tracker.add("Alpha beta gamma.", at=0.0)
    tracker.add("Delta epsilon zeta.", at=1.0)
    prompt = tracker.prompt(1.0)
    assert prompt is not None and len(prompt) <= 20
    assert prompt == "Delta epsilon zeta."
    tracker.add("Eta.", at=2.0)
    assert tracker.prompt(2.0) == "epsilon zeta. Eta."


def test_a_single_huge_word_is_cut_hard() -> None:
    tracker = PromptTracker(PromptOptions(max_chars=5))
    tracker.add("abcdefghij.", at=0.0)
    assert tracker.prompt(0.0) == "ghij."


def test_old_entries_are_dropped_once_the_rest_fills_the_cap() -> None:
    tracker = PromptTracker(PromptOptions(max_chars=12))
    for i, word in enumerate(["One.", "Two.", "Three.", "Four.", "Five."]):
        tracker.add(word, at=float(i))
    assert tracker.prompt(5.0) == "Four. Five."
    assert len(tracker._texts) <= 3  # memory stays bounded


def test_long_pause_resets_the_prompt() -> None:
    tracker = PromptTracker(PromptOptions(reset_after_s=10.0))
    tracker.add("First topic.", at=0.0)
    assert tracker.prompt(9.0) == "First topic."
    assert tracker.prompt(10.5) is None
    tracker.add("Second topic.", at=11.0)
    assert tracker.prompt(12.0) == "Second topic."
    tracker.add("First again.", at=30.0)  # after a pause, adding also starts afresh
    assert tracker.prompt(30.0) == "First again."


def test_pinned_language_ignores_other_languages() -> None:
    tracker = PromptTracker(language="de")
    assert tracker.add("Guten Tag.", at=0.0, language="de")
    assert not tracker.add("Good morning.", at=1.0, language="en")
    assert tracker.add("Unknown language text.", at=2.0, language=None)
    assert tracker.prompt(3.0) == "Guten Tag. Unknown language text."
    assert tracker.language == "de"


def test_auto_language_resets_when_the_detected_language_changes() -> None:
    tracker = PromptTracker()
    tracker.add("Good morning.", at=0.0, language="en")
    tracker.add("Good evening!", at=1.0, language="en")
    assert tracker.prompt(1.0) == "Good morning. Good evening!"
    tracker.add("¿Buenas noches?", at=2.0, language="es")
    assert tracker.prompt(2.0) == "¿Buenas noches?"


def test_reset() -> None:
    tracker = PromptTracker()
    tracker.add("X.", at=0.0)
    tracker.reset()
    assert tracker.prompt(0.0) is None


@pytest.mark.parametrize("kwargs", [{"max_chars": 0}, {"reset_after_s": 0.0}])
def test_options_are_validated(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        PromptOptions(**kwargs)


def test_a_caller_can_ask_for_a_shorter_prompt() -> None:
    tracker = PromptTracker()
    tracker.add("Alpha beta gamma delta.", at=0.0)
    assert tracker.prompt(0.0, max_chars=12) == "gamma delta."
    assert tracker.prompt(0.0, max_chars=500) == "Alpha beta gamma delta."


# -- form: what Whisper copies from its prompt ------------------------------------------


@pytest.mark.parametrize("text", [
    "and so my fellow Americans ask not what your country can do for you",
    "Concord returned to its place amidst the tents",
    "and then -", "and so my fellow americans,",
])
def test_text_that_lost_its_form_never_becomes_the_prompt(text: str) -> None:
    """Whisper copies its prompt's style: one unpunctuated final as the prompt made every later
    dictation unpunctuated (issue 13's bug)."""
    tracker = PromptTracker(PromptOptions(style_anchor=False), language="en")
    assert not tracker.add(text, at=0.0, language="en")
    assert tracker.prompt(0.0) is None


@pytest.mark.parametrize("text", [
    "Ask not.", "Really?", "Stop!", "He said \"no.\"", "(See above.)", "Wait\u2026",
    "\u6771\u4eac\u3067\u3059\u3002", "\u0645\u0627\u0630\u0627\u061f",
])
def test_text_that_ends_a_sentence_is_kept(text: str) -> None:
    tracker = PromptTracker(PromptOptions(style_anchor=False))
    assert tracker.add(text, at=0.0)
    assert tracker.prompt(0.0) == text


def test_a_sentence_cut_at_a_comma_is_kept_so_the_next_decode_goes_on_with_it() -> None:
    """A pause cut "And so, my fellow Americans," from the rest: as the prompt it lets Whisper
    go on with the sentence ("ask not ..."), which is then kept too. Whether a text goes on is
    the caller's open-sentence answer (`form.OpenSentence`), as the policy passes it."""
    tracker = PromptTracker(PromptOptions(style_anchor=False))
    open_sentence = OpenSentence(within=16_000)
    pieces = [("And so, my fellow Americans,", 0, True), ("ask not what your country can do "
              "for you,", 16_000, True), ("ask what you can do for your country.", 32_000, True),
              ("and then -", 48_000, False)]  # lower case after a finished sentence
    for n, (text, start, kept) in enumerate(pieces):
        goes_on = open_sentence.goes_on(start)
        assert tracker.add(text, at=float(n), goes_on=goes_on) is kept, text
        open_sentence.ended(text, start + 15_000)
    assert tracker.prompt(3.0) == ("And so, my fellow Americans, ask not what your country "
                                   "can do for you, ask what you can do for your country.")
    # A lower-case piece with an open end that does not go on is a lost form: not kept.
    assert not tracker.add("ask not what your country can do for you,", at=4.0)


def test_the_style_anchor_prompts_a_known_language_with_no_history() -> None:
    assert PromptTracker(language="en").prompt(0.0) == STYLE_ANCHORS["en"]
    assert PromptTracker().prompt(0.0) is None  # auto-detection: nothing to bias it
    assert PromptTracker(language="xx").prompt(0.0) is None  # no measured anchor
    assert PromptTracker(PromptOptions(style_anchor=False), language="en").prompt(0.0) is None
    assert PromptTracker(language="en").prompt(0.0, max_chars=5) is None  # doesn't fit


def test_auto_detection_takes_the_anchor_of_the_last_language_heard() -> None:
    tracker = PromptTracker()
    assert not tracker.add("and so my fellow Americans", at=0.0, language="en")
    assert tracker.prompt(1.0) == STYLE_ANCHORS["en"]  # not the unpunctuated text
    tracker.add("Ask not.", at=1.0, language="en")
    assert tracker.prompt(2.0) == "Ask not."
