"""LocalAgreement-2: a word is committed once two consecutive hypotheses agree up to it."""

from __future__ import annotations

from engine.core.agreement import LocalAgreement, comparable, tokens


def test_first_hypothesis_is_all_tentative() -> None:
    agree = LocalAgreement()
    assert agree.update(tokens("hello there")) == ("", "hello there")


def test_common_prefix_of_two_hypotheses_is_committed() -> None:
    agree = LocalAgreement()
    agree.update(tokens("the quick brown"))
    assert agree.update(tokens("the quick brow fox")) == ("the quick", "brow fox")
    assert agree.update(tokens("the quick brown fox jumps")) == ("the quick", "brown fox jumps")
    assert agree.update(tokens("the quick brown fox jumps over")) == (
        "the quick brown fox jumps", "over")


def test_comparison_ignores_case_and_edge_punctuation_but_shows_newest_form() -> None:
    agree = LocalAgreement()
    agree.update(tokens("Hello, world"))
    committed, tentative = agree.update(tokens("hello world."))
    assert committed == "hello world." and tentative == ""
    assert comparable("\"Don't!") == "don't"


def test_committed_text_never_shrinks_when_a_hypothesis_rewrites_it() -> None:
    agree = LocalAgreement()
    agree.update(tokens("ask not what"))
    agree.update(tokens("ask not what your"))
    assert agree.committed == "ask not what"
    committed, tentative = agree.update(tokens("and so my fellow americans"))
    assert committed == "ask not what"
    assert tentative == "fellow americans"  # only what lies beyond the committed words
    # the rewrite disagrees with the previous hypothesis from word 0: nothing new is committed
    assert agree.update(tokens("and so my fellow americans ask")) == (
        "ask not what", "fellow americans ask")


def test_shorter_hypothesis_leaves_no_tentative_text() -> None:
    agree = LocalAgreement()
    agree.update(tokens("one two three"))
    agree.update(tokens("one two three"))
    assert agree.update(tokens("one")) == ("one two three", "")


def test_reset_forgets_everything() -> None:
    agree = LocalAgreement()
    agree.update(tokens("a b"))
    agree.update(tokens("a b"))
    agree.reset()
    assert (agree.committed, agree.tentative) == ("", "")
    assert agree.update(tokens("a b")) == ("", "a b")


def test_empty_hypotheses() -> None:
    agree = LocalAgreement()
    assert agree.update([]) == ("", "")
    assert agree.update([]) == ("", "")


def test_committed_words_keep_the_form_they_were_first_shown_in() -> None:
    agree = LocalAgreement()
    agree.update(tokens("Hello, there"))
    agree.update(tokens("Hello, there you"))
    agree.update(tokens("hello there you are"))
    assert agree.update(tokens("hello there you are")) == ("Hello, there you are", "")
