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
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

ARROW = "=>"
REGEX_LINE = re.compile(r"^/(?P<pattern>.*)/(?P<flags>[A-Za-z]*)\s*=>(?P<replacement>.*)$")
REGEX_FLAGS = "i"


class RuleError(ValueError):
    """A rule that cannot be used, with the line (1-based) it is on."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"replacement rules, line {line}: {problem}")
        self.line = line
        self.problem = problem


@dataclass(frozen=True)
class Rule:
    """One line: the spellings it replaces (or one regular expression) and the replacement."""

    spellings: tuple[str, ...]
    replacement: str
    regex: bool = False
    flags: str = ""
    line: int = field(default=0, compare=False)
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.regex:
            source = self.spellings[0]
            case = re.IGNORECASE if "i" in self.flags else 0
        else:
            source = "|".join(re.escape(s) for s in sorted(self.spellings, key=len, reverse=True))
            case = re.IGNORECASE
        # Whole words: no word character may touch the match on either side.
        compiled = re.compile(rf"(?<!\w)(?:{source})(?!\w)", case)
        object.__setattr__(self, "pattern", compiled)

    @property
    def case_aware(self) -> bool:
        return not self.regex or "i" in self.flags

    def apply(self, text: str) -> str:
        return self.pattern.sub(self._replace, text)

    def _replace(self, match: re.Match[str]) -> str:
        try:
            new = match.expand(self.replacement) if self.regex else self.replacement
        except (re.error, IndexError):  # a template parse_rules could not vet: leave the text
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
            re.compile(pattern)  # alone first: the error's position is in the user's pattern
            rule = Rule((pattern,), match["replacement"].strip(), regex=True, flags=flags,
                        line=number)
        except re.error as exc:
            raise RuleError(number, f"bad regular expression /{pattern}/: {exc}") from None
        _check_groups(rule, number)
        if rule.pattern.search("") is not None:
            raise RuleError(number, f"/{pattern}/ matches empty text (it would insert "
                                    f"the replacement everywhere)")
        return rule
    left, _, right = line.partition(ARROW)
    spellings = tuple(s.strip() for s in left.split("|"))
    if not all(spellings):
        raise RuleError(number, f"an empty spelling before '{ARROW}' in {line!r}")
    return Rule(spellings, right.strip(), line=number)


def _check_groups(rule: Rule, number: int) -> None:
    for ref in re.finditer(r"\\(\d+)|\\g<(\w+)>", rule.replacement):
        name = ref[1] or ref[2]
        known = (int(name) <= rule.pattern.groups if name.isdigit()
                 else name in rule.pattern.groupindex)
        if not known:
            raise RuleError(number, f"the replacement refers to group {name}, which "
                                    f"/{rule.spellings[0]}/ does not have")


def format_rules(rules: Rules) -> str:
    """The plain-text form (one rule a line): parse_rules(format_rules(r)) == r."""
    return "\n".join(rule.to_line() for rule in rules)


def apply_rules(text: str, rules: Rules) -> str:
    for rule in rules:
        text = rule.apply(text)
    return text


@functools.lru_cache(maxsize=8)
def rules_or_none(text: str) -> Rules:
    """The rules for the text Settings holds; a bad text (never valid settings, but a file
    edited by hand is read leniently) gives no rules and a log line, never an exception."""
    try:
        return parse_rules(text)
    except RuleError as exc:
        log.error("%s; replacement rules are off", exc)
        return ()
