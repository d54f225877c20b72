"""The app's side of dictation text (engine.dictation): each final text, with the current
settings, becomes what the transcript shows and what goes into the focused app.

The style, spoken commands and target are explicit arguments so that a per-application profile
can override them for one insertion; None takes the setting.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace

from app.settings import Settings
from engine.dictation import Dictation, Insertion
from engine.dictation.rules import rules_or_none
from engine.events import FinalText


def dictated(dictation: Dictation, final: FinalText, settings: Settings, *, insert: bool,
             target: Hashable | None = None, style: str | None = None,
             commands: bool | None = None) -> Insertion:
    """What to show and insert for one final. `insert` False (captions mode): the replacement
    rules apply, spoken commands don't, nothing is inserted."""
    rules = rules_or_none(settings.replacements)
    dictation.remember_capitals(line.strip() for line in settings.vocabulary.splitlines()
                                if not line.strip().startswith("["))
    if not insert:
        return Insertion(shown=dictation.caption(final.text, rules, final.language))
    return dictation.insertion(
        final.text, rules=rules, target=target, language=final.language,
        style=settings.text_style if style is None else style,
        commands=settings.spoken_commands if commands is None else commands)


def shown_final(final: FinalText, insertion: Insertion) -> FinalText:
    """The final as the session keeps it (and exports it): the shown text."""
    return replace(final, text=insertion.shown)
