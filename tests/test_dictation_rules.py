"""Replacement rules (engine.dictation.rules): the plain-text format, whole-word and case-aware
matching, regular expressions, clear errors for bad lines, and Settings refusing a bad rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.dictation.rules import (
    Rule,
    RuleError,
    apply_rules,
    format_rules,
    parse_rules,
    rules_or_none,
)

RULES = """\
# my corrections
gonna => going to
K8s | kates => Kubernetes

/colou?r/i => colour
period => full stop
um | uh =>
/(\\d+) ?pc/ => \\1 %
"""


@pytest.mark.parametrize(("text", "expected"), [
    ("I'm gonna go.", "I'm going to go."),
    ("Gonna be fine.", "Going to be fine."),  # case-aware: a capital stays a capital
    ("GONNA WIN", "GOING TO WIN"),
    ("We run kates and K8s and k8s.", "We run Kubernetes and Kubernetes and Kubernetes."),
    ("Kates is up.", "Kubernetes is up."),
    ("The Color is nice, the COLOUR too.", "The Colour is nice, the COLOUR too."),
    ("a colourful colouring", "a colourful colouring"),  # whole words only
    ("That period was periodic.", "That full stop was periodic."),  # "periodic" untouched
    ("Well, um, I think uh yes.", "Well, , I think  yes."),  # the formatter tidies spaces
    ("Up 20pc and 5 pc.", "Up 20 % and 5 %."),
    ("gonnabe", "gonnabe"),
    ("", ""),
])
def test_rules_apply_to_whole_words_keeping_case(text, expected):
    assert apply_rules(text, parse_rules(RULES)) == expected


def test_rules_apply_in_order():
    rules = parse_rules("a => b\nb => c")
    assert apply_rules("a b", rules) == "c c"


def test_comments_blank_lines_and_spacing_are_ignored():
    rules = parse_rules("  # comment\n\n   teh   =>   the  \n")
    assert rules == (Rule(("teh",), "the"),)
    assert rules[0].line == 3


def test_a_case_sensitive_regex_leaves_other_cases():
    rules = parse_rules("/USA/ => United States")
    assert apply_rules("USA usa", rules) == "United States usa"


def test_spellings_with_symbols_match_literally():
    rules = parse_rules("c++ | c plus plus => C++\netc. => and so on")
    assert apply_rules("I like c plus plus, etc. Done", rules) == "I like C++, and so on Done"
    assert apply_rules("cxx", rules) == "cxx"


@pytest.mark.parametrize(("text", "line", "problem"), [
    ("gonna going to", 1, "no '=>'"),
    ("ok => fine\n\n/colo(u?r/ => colour", 3, "bad regular expression /colo(u?r/"),
    ("# c\n | x => y", 2, "empty spelling"),
    ("/x/g => y", 1, "unknown flag 'g'"),
    ("// => y", 1, "regular expression is empty"),
    ("/a*/ => b", 1, "matches empty text"),
    ("/(a)b/ => \\2", 1, "group 2"),
    ("/abc => x", 1, "written /pattern/"),
])
def test_a_bad_line_is_refused_naming_its_number(text, line, problem):
    with pytest.raises(RuleError) as caught:
        parse_rules(text)
    assert caught.value.line == line
    assert problem in str(caught.value)
    assert str(caught.value).startswith(f"replacement rules, line {line}: ")


def test_settings_refuse_a_bad_rule_and_loading_falls_back():
    from app.settings import Settings, from_mapping_report, with_changes

    with pytest.raises(ValueError, match=r"replacement rules, line 2: bad regular expression"):
        with_changes(Settings(), replacements="ok => fine\n/colo(u?r/ => colour")
    good = with_changes(Settings(), replacements="gonna => going to")
    assert good.replacements == "gonna => going to"
    settings, problems = from_mapping_report({"version": 3, "replacements": "/(/ => x"})
    assert settings.replacements == ""
    assert len(problems) == 1 and "replacement rules, line 1" in problems[0]


def test_bad_rules_never_reach_dictation_as_an_exception():
    assert rules_or_none("/(/ => x") == ()
    assert rules_or_none("a => b") == (Rule(("a",), "b"),)


def test_format_writes_the_import_export_text():
    rules = parse_rules(RULES)
    assert format_rules(rules) == (
        "gonna => going to\nK8s | kates => Kubernetes\n/colou?r/i => colour\n"
        "period => full stop\num | uh =>\n/(\\d+) ?pc/ => \\1 %")
    assert parse_rules(format_rules(rules)) == rules


_word = st.text(st.characters(whitelist_categories=("Ll", "Lu", "Nd"),
                              whitelist_characters="+.'-"), min_size=1, max_size=8)
_spelling = st.lists(_word, min_size=1, max_size=3).map(" ".join).filter(
    lambda s: not s.startswith(("#", "/")))
_replacement = st.lists(_word, max_size=3).map(" ".join)


@given(st.lists(st.tuples(st.lists(_spelling, min_size=1, max_size=3), _replacement),
                max_size=6))
def test_rules_round_trip_through_their_text(table):
    rules = tuple(Rule(tuple(spellings), replacement) for spellings, replacement in table)
    assert parse_rules(format_rules(rules)) == rules


@given(st.text(max_size=60))
def test_plain_rules_never_fail_on_any_text(text):
    rules = parse_rules("gonna | wanna => going to\nK8s => Kubernetes")
    out = apply_rules(text, rules)
    assert "gonna" not in out.lower().split()
