"""The app's side of dictation text (engine.dictation): each final text, with the current
settings, becomes what the transcript shows and what goes into the focused app.

The style, spoken commands and target are explicit arguments so that a per-application profile
can override them for one insertion; None takes the setting.

`TextWorker` runs that pipeline off the GUI thread: the user's replacement rules are regular
expressions, and however well they are bounded (`engine.dictation.rules`), the window must
not stop while they run. One worker thread keeps the finals in order.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from PySide6.QtCore import QCoreApplication, QObject, Signal

from app.profiles import DictationTarget
from app.settings import Settings
from engine.core.sanitize import clean
from engine.dictation import Dictation, Insertion
from engine.dictation.rules import RuleError, rules_or_none
from engine.events import FinalText
from ui.qt_compat import emit

log = logging.getLogger(__name__)


def dictated(dictation: Dictation, final: FinalText, settings: Settings, *, insert: bool,
             target: Hashable | None = None, style: str | None = None,
             commands: bool | None = None) -> Insertion:
    """What to show and insert for one final. `insert` False (captions mode): the replacement
    rules apply, spoken commands don't, nothing is inserted."""
    # A model's text (a remote server's above all) is not trusted: no escape sequences,
    # control characters or line breaks reach the pipeline (its own commands make those).
    final = replace(final, text=clean(final.text))
    rules = rules_or_none(settings.replacements)
    dictation.remember_capitals(line.strip() for line in settings.vocabulary.splitlines()
                                if not line.strip().startswith("["))
    if not insert:
        problems: list[RuleError] = []
        shown = dictation.caption(final.text, rules, final.language, problems)
        return Insertion(shown=shown, problems=tuple(str(p) for p in problems))
    return dictation.insertion(
        final.text, rules=rules, target=target, language=final.language,
        style=settings.text_style if style is None else style,
        commands=settings.spoken_commands if commands is None else commands)


def shown_final(final: FinalText, insertion: Insertion) -> FinalText:
    """The final as the session keeps it (and exports it): the shown text."""
    return replace(final, text=insertion.shown)


@dataclass(frozen=True)
class Dictated:
    """One final through the text pipeline: what to show and insert (``target`` None:
    captions mode, nothing inserted), with the steps its time went through."""

    final: FinalText
    out: Insertion
    target: DictationTarget | None
    stages: tuple[tuple[str, float], ...]


class TextWorker(QObject):
    """The text pipeline on one worker thread; each result comes back as ``done`` on the GUI
    thread, in the order the finals were submitted."""

    done = Signal(object)  # Dictated

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.pipeline = Dictation()  # joining, replacement rules, spoken commands
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sottovoce-text")
        self._drained = False

    def submit(self, final: FinalText, settings: Settings, target: DictationTarget | None,
               stages: Sequence[tuple[str, float]] = ()) -> None:
        if self._drained:  # quitting: a last final (the engine's flush) is handled here
            self._run(final, settings, target, tuple(stages))
            return
        self._pool.submit(self._run, final, settings, target, tuple(stages))

    def _run(self, final: FinalText, settings: Settings, target: DictationTarget | None,
             stages: tuple[tuple[str, float], ...]) -> None:
        try:
            if target is None:
                out = dictated(self.pipeline, final, settings, insert=False)
            else:
                out = dictated(self.pipeline, final, settings, insert=True,
                               target=target.window_class, style=target.style,
                               commands=target.commands)
        except Exception:  # noqa: BLE001 - the worker's top: the final is still shown as heard
            log.exception("the text pipeline failed on final %d", final.utterance_id)
            out = Insertion(shown=final.text.strip())
            target = None
        emit(self.done, Dictated(final, out, target, stages))

    def drain(self) -> None:
        """Finish what was submitted and deliver it (before quitting: no final is lost)."""
        self._drained = True
        self._pool.shutdown(wait=True)
        QCoreApplication.processEvents()
