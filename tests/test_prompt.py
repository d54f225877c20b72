"""PromptTracker: only checked text, capped, reset after a pause, never across languages."""

from __future__ import annotations

import pytest

from engine.core.prompt import PromptOptions, PromptTracker


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
    assert not tracker.add("fine text", at=0.0)
    assert tracker.prompt(0.0) is None


def test_prompt_is_capped_at_a_word_boundary() -> None:
    tracker = PromptTracker(PromptOptions(max_chars=20))
    tracker.add("alpha beta gamma", at=0.0)
    tracker.add("delta epsilon zeta", at=1.0)
    prompt = tracker.prompt(1.0)
    assert prompt is not None and len(prompt) <= 20
    assert prompt == "delta epsilon zeta"
    tracker.add("eta", at=2.0)
    assert tracker.prompt(2.0) == "epsilon zeta eta"


def test_a_single_huge_word_is_cut_hard() -> None:
    tracker = PromptTracker(PromptOptions(max_chars=5))
    tracker.add("abcdefghij", at=0.0)
    assert tracker.prompt(0.0) == "fghij"


def test_old_entries_are_dropped_once_the_rest_fills_the_cap() -> None:
    tracker = PromptTracker(PromptOptions(max_chars=10))
    for i, word in enumerate(["one", "two", "three", "four", "five"]):
        tracker.add(word, at=float(i))
    assert tracker.prompt(5.0) == "four five"
    assert len(tracker._texts) <= 3  # memory stays bounded


def test_long_pause_resets_the_prompt() -> None:
    tracker = PromptTracker(PromptOptions(reset_after_s=10.0))
    tracker.add("first topic", at=0.0)
    assert tracker.prompt(9.0) == "first topic"
    assert tracker.prompt(10.5) is None
    tracker.add("second topic", at=11.0)
    assert tracker.prompt(12.0) == "second topic"
    tracker.add("first again", at=30.0)  # after a pause, adding also starts afresh
    assert tracker.prompt(30.0) == "first again"


def test_pinned_language_ignores_other_languages() -> None:
    tracker = PromptTracker(language="de")
    assert tracker.add("Guten Tag", at=0.0, language="de")
    assert not tracker.add("Good morning", at=1.0, language="en")
    assert tracker.add("unknown language text", at=2.0, language=None)
    assert tracker.prompt(3.0) == "Guten Tag unknown language text"
    assert tracker.language == "de"


def test_auto_language_resets_when_the_detected_language_changes() -> None:
    tracker = PromptTracker()
    tracker.add("Good morning", at=0.0, language="en")
    tracker.add("Good evening", at=1.0, language="en")
    assert tracker.prompt(1.0) == "Good morning Good evening"
    tracker.add("Buenas noches", at=2.0, language="es")
    assert tracker.prompt(2.0) == "Buenas noches"


def test_reset() -> None:
    tracker = PromptTracker()
    tracker.add("x", at=0.0)
    tracker.reset()
    assert tracker.prompt(0.0) is None


@pytest.mark.parametrize("kwargs", [{"max_chars": 0}, {"reset_after_s": 0.0}])
def test_options_are_validated(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        PromptOptions(**kwargs)


def test_a_caller_can_ask_for_a_shorter_prompt() -> None:
    tracker = PromptTracker()
    tracker.add("alpha beta gamma delta", at=0.0)
    assert tracker.prompt(0.0, max_chars=11) == "gamma delta"
    assert tracker.prompt(0.0, max_chars=500) == "alpha beta gamma delta"
