"""Dictation text, Qt-free: how each final text lands in the focused app.

`Dictation` (dictation.py) answers, per final, "delete these characters, insert this text",
from spoken commands (commands.py), replacement rules (rules.py) and joining/style
(format.py). Pure functions and small state; the app wires it to the text injector.
"""

from engine.dictation.dictation import Dictation, Insertion
from engine.dictation.rules import Rule, RuleError, Rules, apply_rules, parse_rules

__all__ = ["Dictation", "Insertion", "Rule", "RuleError", "Rules", "apply_rules", "parse_rules"]
