"""Dictation text (engine.dictation): joining consecutive utterances, the chat style, spoken
commands, "scratch that", and the per-target state. Each case is the exact text a user sees in
the field, with case, punctuation and spacing."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.dictation import Dictation, Insertion, parse_rules
from engine.dictation.commands import Command, parse, render, table_for
from engine.dictation.format import Joined, is_sentence_capital, join, tidy


def typed(utterances, style="sentence", commands=True, rules=(), language=None):
    """Dictate utterances into one simulated field: what the field holds afterwards."""
    dictation = Dictation(clock=lambda: 0.0)
    field = ""
    for text in utterances:
        out = dictation.insertion(text, style=style, commands=commands, rules=rules,
                                  target="field", language=language)
        field = field[:len(field) - out.delete_chars] + out.text
    return field


# -- joining --------------------------------------------------------------------------------
@pytest.mark.parametrize(("utterances", "expected"), [
    (["Hello there.", "How are you?"], "Hello there. How are you?"),
    (["hello there."], "Hello there."),  # the field's start is a sentence start
    (["I went to the", "Shop and back."], "I went to the shop and back."),
    (["So I said", "I'm not sure."], "So I said I'm not sure."),  # "I" keeps its capital
    (["We met Anna.", "Then", "Anna left."], "We met Anna. Then Anna left."),
    (["I called Anna today", "Anna said no."], "I called Anna today Anna said no."),  # a name
    (["Send it via", "NASA."], "Send it via NASA."),  # all capitals: not a sentence start
    (["Read the", "iPhone manual."], "Read the iPhone manual."),
    (["It costs, well", "A lot."], "It costs, well a lot."),
    (["Wait", "and see."], "Wait and see."),
    (["One.", "two."], "One. Two."),  # sentence case after a period
    (["Why?", "because."], "Why? Because."),
    (['He said "stop."', "then left."], 'He said "stop." Then left.'),
    (["We need milk, eggs, etc..", "And bread."], "We need milk, eggs, etc. And bread."),
    (["Too  many   spaces ,here."], "Too many spaces,here."),
    (["Wait...", "what?"], "Wait... What?"),
    (["Hello!!", "Yes?."], "Hello! Yes?"),
    (["  ", "", "Hi."], "Hi."),
])
def test_consecutive_utterances_join_cleanly(utterances, expected):
    assert typed(utterances, commands=False) == expected


@pytest.mark.parametrize(("utterances", "expected"), [
    (["Hello there.", "How are you?"], "hello there how are you?"),
    (["I think so.", "Great!"], "I think so great!"),
    (["I met Anna.", "Anna says hi."], "I met Anna Anna says hi"),
    (["Wait...", "OK."], "wait... OK"),
    (["See NASA.", "Period."], "see NASA."),  # a dictated period stays
    (["Done period."], "done."),
    (["Is it comma", "Done full stop."], "is it, done."),
])
def test_chat_style_starts_lowercase_and_drops_the_trailing_period(utterances, expected):
    assert typed(utterances, style="chat") == expected


@pytest.mark.parametrize(("word", "sentence_capital"), [
    ("The", True), ("Hello,", True), ('"Yes', True), ("A", True), ("I", False),
    ("I'm", False), ("I’ve", False), ("NASA", False), ("iPhone", False), ("McDonald", False),
    ("Anna", False), ("3D", False), ("Well-known", True), ("", False),
])
def test_only_a_plain_sentence_capital_may_be_lowercased(word, sentence_capital):
    assert is_sentence_capital(word, known_capitals={"Anna"}) is sentence_capital


@pytest.mark.parametrize(("before", "text", "joined"), [
    ("", "Hello.", Joined("Hello.")),
    ("Hello.", ".", Joined("")),  # "period" said alone after a "." adds nothing
    ("Hello.", "?", Joined("?", 1)),  # a mark said alone replaces the previous one
    ("Hello world.", ", and more.", Joined(", and more.", 1)),
    ("Dear John,", "\nThanks.", Joined("\nThanks.", 1)),
    ("One.\n", "two.", Joined("Two.")),
    ("Wait...", ".", Joined("")),  # an ellipsis is not replaced
    ("Wait...", "?", Joined("?")),
    ("Etc.,", ".", Joined(".", 2)),
    ('He said "', "Hello", Joined("hello")),  # after an opening quote: no space
    ('He said "hi', '"', Joined('"')),
])
def test_join_against_what_the_target_holds(before, text, joined):
    assert join(before, text) == joined


def test_french_keeps_its_space_before_marks():
    assert tidy("Comment ça va ?", "fr") == "Comment ça va ?"
    assert tidy("How are you ?", "en") == "How are you?"


_piece = st.sampled_from(["Hello", "world", "I", "Anna", "etc.", "ok", ",", ".", "?", "!", " ",
                          "  ", "..", "new line", "comma", "period", "Question mark.",
                          "scratch that", "open quote", "close quote", "\n"])


@given(st.lists(st.lists(_piece, max_size=8).map(" ".join), max_size=6),
       st.sampled_from(["sentence", "chat"]))
def test_joined_text_never_has_doubled_spaces_or_punctuation(utterances, style):
    field = typed(utterances, style=style)
    assert "  " not in field
    # (an interrobang, "?!", is the speaker's)
    assert not re.search(r"(?!\?!|!\?)[,;:!?]{2}|(?<!\.)\.\.(?!\.)|[,;:]\.|[!?]\.", field)
    assert not re.search(r" \n|\n ", field) and not field.startswith(" ")


# -- spoken commands ------------------------------------------------------------------------
@pytest.mark.parametrize(("utterances", "expected"), [
    (["Hello comma world."], "Hello, world."),
    (["Hello, comma, world."], "Hello, world."),  # Whisper's commas around the command
    (["Hello comma World."], "Hello, World."),
    (["Is it period."], "Is it."),
    (["It works full stop."], "It works."),
    (["Really question mark."], "Really?"),
    (["Really questionmark."], "Really?"),
    (["Wow exclamation mark, great exclamation point."], "Wow! Great!"),
    (["Hello period how are you question mark"], "Hello. How are you?"),
    (["Dear John, new line. Thanks for everything."], "Dear John\nThanks for everything."),
    (["First point.", "New line.", "Second point."], "First point.\nSecond point."),
    (["End of part one.", "New paragraph.", "part two."], "End of part one.\n\nPart two."),
    (["Newline.", "Next."], "\nNext."),
    (["He said, open quote, hi there, close quote."], 'He said, "hi there".'),
    (["She wrote open quote yes close quote and left."], 'She wrote "yes" and left.'),
    (["Hello world.", "Comma.", "And more."], "Hello world, and more."),
    (["Hello world.", "Question mark."], "Hello world?"),
    (["Hello world.", "Period."], "Hello world."),
    (["The period was periodic."], "The period was periodic."),  # the noun, and a longer word
    (["Commanding a comma is hard."], "Commanding a comma is hard."),
    (["Add a new line here."], "Add a new line here."),
    (["A period of time."], "A period of time."),
])
def test_spoken_commands(utterances, expected):
    assert typed(utterances) == expected


def test_commands_can_be_off():
    assert typed(["Hello comma world.", "New line."], commands=False) == (
        "Hello comma world. New line.")


def test_a_language_without_a_table_keeps_every_word():
    assert table_for("de") is None and table_for("en-GB") is table_for(None)
    assert typed(["Hallo comma Welt."], language="de") == "Hallo comma Welt."


@pytest.mark.parametrize(("text", "tokens", "scratch"), [
    ("Hello comma world.", ("Hello", Command("punct", ","), "world."), 0),
    ("Scratch that.", (), 1),
    ("Scratch that, scratch that.", (), 2),
    ("Hello world, scratch that. Goodbye.", ("Goodbye.",), 0),
    ("He said open quote hi close quote.", ("He said", Command("open_quote"), "hi",
                                           Command("close_quote"), Command("punct", ".")), 0),
])
def test_parse_finds_commands(text, tokens, scratch):
    parsed = parse(text, "en")
    assert (parsed.tokens, parsed.scratch) == (tokens, scratch)


def test_render_without_sentence_case_keeps_whisper_case():
    tokens = parse("yes period two new line three", "en").tokens
    assert render(tokens, sentence_case=False) == "yes. two\nthree"


# -- scratch that ---------------------------------------------------------------------------
def test_scratch_that_deletes_exactly_the_last_utterance():
    dictation = Dictation(clock=lambda: 0.0)
    first = dictation.insertion("Hello there.", target="a")
    second = dictation.insertion("How are you?", target="a")
    scratch = dictation.insertion("Scratch that.", target="a")
    assert (first.text, second.text) == ("Hello there.", " How are you?")
    assert scratch == Insertion("", delete_chars=len(" How are you?"), shown="",
                                 unshown=("How are you?",))
    again = dictation.insertion("Scratch that.", target="a")
    assert again == Insertion("", delete_chars=len("Hello there."), unshown=("Hello there.",))
    assert dictation.insertion("Scratch that.", target="a") == Insertion()  # nothing left
    assert dictation.insertion("fresh start.", target="a").text == "Fresh start."


def test_scratching_a_line_break_removes_it_without_a_transcript_line():
    assert typed(["One.", "New line.", "Scratch that.", "Two."]) == "One. Two."
    dictation = Dictation(clock=lambda: 0.0)
    dictation.insertion("One.")
    dictation.insertion("New line.")
    assert dictation.insertion("Scratch that.") == Insertion("", 1, "", ())


def test_scratch_that_inside_an_utterance_drops_what_came_before_it():
    assert typed(["Hi.", "Buy milk scratch that buy bread."]) == "Hi. Buy bread."


# -- per-target state -----------------------------------------------------------------------
def test_a_new_target_or_a_long_pause_starts_fresh():
    now = [0.0]
    dictation = Dictation(clock=lambda: now[0], idle_reset_s=300.0)
    assert dictation.insertion("Hello there", target="editor").text == "Hello there"
    assert dictation.insertion("And more.", target="editor").text == " and more."
    assert dictation.insertion("And more.", target="chat").text == "And more."
    assert dictation.insertion("Scratch that.", target="editor") == Insertion()
    now[0] = 301.0
    assert dictation.insertion("Next", target="editor").text == "Next"
    now[0] = 400.0
    assert dictation.insertion("Next", target="editor").text == " next"


def test_the_shown_text_is_the_utterance_alone():
    dictation = Dictation(clock=lambda: 0.0)
    rules = parse_rules("gonna => going to")
    dictation.insertion("I said", rules=rules)
    out = dictation.insertion("Gonna go comma new line bye.", rules=rules)
    assert out.text == " going to go,\nBye."
    assert out.shown == "Going to go, Bye."


def test_captions_get_replacements_and_no_commands():
    rules = parse_rules("kates => Kubernetes")
    assert Dictation().caption("Kates comma  new line etc..", rules) == (
        "Kubernetes comma new line etc.")


def test_vocabulary_words_keep_their_capital():
    dictation = Dictation(clock=lambda: 0.0)
    dictation.remember_capitals(["Concord", "kubectl", "New Hampshire"])
    dictation.insertion("We went to")
    assert dictation.insertion("Concord.").text == " Concord."
    assert dictation.insertion("Then", ).text == " Then"
    assert dictation.insertion("Hampshire.").text == " Hampshire."


def test_an_unknown_style_is_refused():
    with pytest.raises(ValueError, match="style"):
        Dictation().insertion("x", style="shouting")
