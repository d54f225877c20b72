"""Replacement rules: the user's own corrections, applied to every final text.

The format is plain text, one rule per line; it is what Settings stores (`replacements`) and
what the settings dialog imports and exports::

    # a comment; blank lines are ignored too
    gonna => going to
    K8s | kates => Kubernetes          (many spellings -> one)
    /colou?r/i => colour               (a regular expression; flag i: ignore case)
    um | uh =>                         (an empty replacement deletes the word)

Plain spellings match whole words (a ``period`` rule leaves "periodic" alone), ignoring case,
and the replacement follows the case of what it replaced: a capitalised match gets a
capitalised replacement ("Gonna" -> "Going to"), an all-capitals one an all-capitals
replacement; a replacement that has capitals of its own ("Kubernetes") is kept as written.
Regular expressions are whole-word too, case-sensitive unless flagged ``i`` (then case-aware like
plain rules); ``\\1`` in the replacement is the first group.
Rules apply in order, each to the result of the ones before.

Hostile or careless rules cannot hang dictation or flood it: regular expressions run on the
``regex`` engine with a time budget (`RULE_TIMEOUT_S` per rule, `RULES_BUDGET_S` per text for
all rules: a pattern that backtracks catastrophically, ``/(a|aa)+c/`` on a long "aaa...", is
stopped; plain spellings are literals, linear in time), and a rule set may grow a
text to at most `max_length` of it (24 lines of ``word => word word`` would make 16 million
words). A rule stopped either way leaves the text as it was before that rule; the others still
apply, and the caller is told which rule was skipped and why (`apply_rules`'s ``problems``).
A pattern the engine cannot compile at all (``x{1,99999999999}``, groups nested 2000 deep) is
a `RuleError` naming its line, like any other bad line.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from dataclasses import dataclass, field

import regex
from regex import Match, Pattern  # the names: Rule's ``regex`` field shadows the module there

log = logging.getLogger(__name__)

ARROW = "=>"
REGEX_LINE = regex.compile(r"^/(?P<pattern>.*)/(?P<flags>[A-Za-z]*)\s*=>(?P<replacement>.*)$")
REGEX_FLAGS = "i"
RULE_TIMEOUT_S = 0.1  # one expression on one text: plenty for any sane one on a dictated text
RULES_BUDGET_S = 2.0  # the whole rule set on one text: room for a very large plain rule file
GROWTH_FACTOR = 4  # a rule set may make a text at most this many times longer...
GROWTH_CHARS = 2000  # ...or this many characters longer, whichever is more


class RuleError(ValueError):
    """A rule that cannot be used, with the line (1-based) it is on."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"replacement rules, line {line}: {problem}")
        self.line = line
        self.problem = problem


class _TooLong(Exception):
    """Raised inside a substitution once the text outgrows `max_length`."""


@dataclass(frozen=True)
class Rule:
    """One line: the spellings it replaces (or one regular expression) and the replacement."""

    spellings: tuple[str, ...]
    replacement: str
    regex: bool = False
    flags: str = ""
    line: int = field(default=0, compare=False)
    pattern: Pattern[str] | re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Whole words: no word character may touch the match on either side. A user's
        # expression compiles on the regex engine (it can stop one at its time budget); plain
        # spellings are escaped literals, which cannot backtrack, and Python's re compiles
        # them several times faster (docs/evidence.md).
        if self.regex:
            case = regex.IGNORECASE if "i" in self.flags else 0
            compiled: Pattern[str] | re.Pattern[str] = regex.compile(
                rf"(?<!\w)(?:{self.spellings[0]})(?!\w)", case)
        else:
            source = "|".join(re.escape(s) for s in sorted(self.spellings, key=len,
                                                           reverse=True))
            compiled = re.compile(rf"(?<!\w)(?:{source})(?!\w)", re.IGNORECASE)
        object.__setattr__(self, "pattern", compiled)

    @property
    def case_aware(self) -> bool:
        return not self.regex or "i" in self.flags

    def apply(self, text: str, *, timeout: float = RULE_TIMEOUT_S,
              limit: int | None = None) -> str:
        """``text`` with this rule applied. Raises TimeoutError past ``timeout`` seconds and
        `_TooLong` once the result would pass ``limit`` characters."""
        grown = len(text)

        def replace(match: Match[str] | re.Match[str]) -> str:
            nonlocal grown
            new = self._replace(match)
            grown += len(new) - (match.end() - match.start())
            if limit is not None and grown > limit:
                raise _TooLong
            return new

        if isinstance(self.pattern, re.Pattern):  # literals: linear time (__post_init__)
            return self.pattern.sub(replace, text)
        return self.pattern.sub(replace, text, timeout=timeout)

    def _replace(self, match: Match[str] | re.Match[str]) -> str:
        try:
            new = match.expand(self.replacement) if self.regex else self.replacement
        except (regex.error, IndexError):  # a template parse_rules could not vet: leave it
            return match.group(0)
        return follow_case(match.group(0), new) if self.case_aware else new

    def to_line(self) -> str:
        left = f"/{self.spellings[0]}/{self.flags}" if self.regex else " | ".join(self.spellings)
        return f"{left} {ARROW} {self.replacement}".rstrip()


Rules = tuple[Rule, ...]


def follow_case(matched: str, replacement: str) -> str:
    """The replacement in the case of what it replaces, unless it has capitals of its own."""
    if not replacement or any(c.isupper() for c in replacement):
        return replacement
    letters = [c for c in matched if c.isalpha()]
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return replacement.upper()
    if letters and letters[0].isupper():
        return _capitalise(replacement)
    return replacement


def _capitalise(text: str) -> str:
    for i, char in enumerate(text):
        if char.isalpha():
            return text[:i] + char.upper() + text[i + 1:]
    return text


def parse_rules(text: str) -> Rules:
    """The rules in ``text``; raises RuleError naming the first bad line and what is wrong."""
    rules = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        rules.append(_parse_line(line, number))
    return tuple(rules)


def _parse_line(line: str, number: int) -> Rule:
    if ARROW not in line:
        raise RuleError(number, f"no '{ARROW}' in {line!r} (write: spelling => replacement)")
    if line.startswith("/"):
        return _parse_regex(line, number)
    left, _, right = line.partition(ARROW)
    spellings = tuple(s.strip() for s in left.split("|"))
    if not all(spellings):
        raise RuleError(number, f"an empty spelling before '{ARROW}' in {line!r}")
    return Rule(spellings, right.strip(), line=number)


def _parse_regex(line: str, number: int) -> Rule:
    match = REGEX_LINE.match(line)
    if match is None:
        raise RuleError(number, f"a regular expression is written /pattern/ => "
                                f"replacement (got {line!r})")
    pattern, flags = match["pattern"], match["flags"]
    unknown = sorted(set(flags) - set(REGEX_FLAGS))
    if unknown:
        raise RuleError(number, f"unknown flag {''.join(unknown)!r} after /{pattern}/ "
                                f"(only i: ignore case)")
    if not pattern:
        raise RuleError(number, "the regular expression is empty")
    try:
        regex.compile(pattern)  # alone first: the error's position is in the user's pattern
        rule = Rule((pattern,), match["replacement"].strip(), regex=True, flags=flags,
                    line=number)
        assert not isinstance(rule.pattern, re.Pattern)  # a user's expression: regex's
        matches_empty = rule.pattern.search("", timeout=RULE_TIMEOUT_S) is not None
    except regex.error as exc:
        raise RuleError(number, f"bad regular expression /{pattern}/: {exc}") from None
    except (OverflowError, RecursionError, MemoryError, TimeoutError) as exc:
        # A repeat count past the engine's range, groups nested too deep for its parser...
        raise RuleError(number, f"the regular expression /{_short(pattern)}/ is too large "
                                f"or too deep to use ({type(exc).__name__})") from None
    _check_groups(rule, number)
    if matches_empty:
        raise RuleError(number, f"/{pattern}/ matches empty text (it would insert "
                                f"the replacement everywhere)")
    return rule


def _short(pattern: str, limit: int = 40) -> str:
    return pattern if len(pattern) <= limit else pattern[:limit] + "…"


def _check_groups(rule: Rule, number: int) -> None:
    for ref in regex.finditer(r"\\(\d+)|\\g<(\w+)>", rule.replacement):
        name = ref[1] or ref[2]
        known = (int(name) <= rule.pattern.groups if name.isdigit()
                 else name in rule.pattern.groupindex)
        if not known:
            raise RuleError(number, f"the replacement refers to group {name}, which "
                                    f"/{rule.spellings[0]}/ does not have")


def format_rules(rules: Rules) -> str:
    """The plain-text form (one rule a line): parse_rules(format_rules(r)) == r."""
    return "\n".join(rule.to_line() for rule in rules)


def max_length(text: str) -> int:
    """The longest a rule set may make ``text`` (see the module docstring)."""
    return max(GROWTH_FACTOR * len(text), len(text) + GROWTH_CHARS)


def apply_rules(text: str, rules: Rules, problems: list[RuleError] | None = None, *,
                budget_s: float = RULES_BUDGET_S) -> str:
    """``text`` with ``rules`` applied in order. A rule that runs past its time or would grow
    the text past `max_length` is skipped (the text stays as the rules before it left it);
    each skip is appended to ``problems`` when given (the caller tells the user), else logged."""
    limit = max_length(text)
    deadline = time.monotonic() + budget_s
    for rule in rules:
        left = deadline - time.monotonic()
        if left <= 0:
            _report(RuleError(rule.line, f"this rule and those after it were skipped: the "
                                         f"rules took over {budget_s:g} s on this text"),
                    problems)
            break
        try:
            text = rule.apply(text, timeout=min(RULE_TIMEOUT_S, left), limit=limit)
        except TimeoutError:
            _report(RuleError(rule.line, f"skipped: it took over {RULE_TIMEOUT_S:g} s on a "
                                         f"text of {len(text)} characters"), problems)
        except _TooLong:
            _report(RuleError(rule.line, f"skipped: the rules would make this text over "
                                         f"{limit} characters long (at most {GROWTH_FACTOR}x "
                                         f"its length, or {GROWTH_CHARS} more)"), problems)
    return text


def _report(error: RuleError, problems: list[RuleError] | None) -> None:
    if problems is None:
        log.warning("%s", error)
    else:
        problems.append(error)


@functools.lru_cache(maxsize=8)
def rules_or_none(text: str) -> Rules:
    """The rules for the text Settings holds; a bad text (never valid settings, but a file
    edited by hand is read leniently) gives no rules and a log line, never an exception."""
    try:
        return parse_rules(text)
    except RuleError as exc:
        log.error("%s; replacement rules are off", exc)
        return ()
