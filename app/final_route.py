"""The route of a dictated or captioned text (GUI thread): a partial goes to the screen; a
final goes through the replacement rules and spoken commands (on the text worker's thread,
`app.dictation_text.TextWorker`), then AI polish where the application's profile asks for it,
then into the focused app (`app.dictation`), and its polish into the journal beside the
engine's, for History. Each final's steps are timed for the latency breakdown.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject

from app.caption_wiring import caption_line
from app.checked_inject import CheckedInjector
from app.dictation import Dictation
from app.dictation_text import Dictated, TextWorker, shown_final
from app.latency_trace import breakdown, describe
from app.live_session import LiveSession
from app.polish import Outcome, Polisher
from app.profiles import DictationTarget
from app.session import Session
from app.settings import Settings
from app.voice_edit import VoiceEdit
from engine.core.sanitize import clean
from engine.dictation import Insertion
from engine.events import FinalText, PartialText, Translation
from engine.journal import Journal, JournalError
from ui.caption_window import CaptionWindow
from ui.main_window import MainWindow

log = logging.getLogger(__name__)


class FinalRoute(QObject):
    """Routes the engine's text to the windows and each dictated final into the focused app."""

    def __init__(self, settings: Callable[[], Settings], live: LiveSession, text: TextWorker,
                 dictation: Dictation, polisher: Polisher, voice_edit: VoiceEdit,
                 injector: CheckedInjector, session: Session, window: MainWindow,
                 captions: CaptionWindow, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._settings, self.live, self.text = settings, live, text
        self.dictation, self.polisher, self.voice_edit = dictation, polisher, voice_edit
        self.injector, self.session = injector, session
        self.window, self.captions = window, captions
        self.last_injection: tuple[bool, str] | None = None
        self._stages: list[tuple[str, float]] = []  # the last final's steps (app.latency_trace)
        self._injection_note = ""  # said with the next insertion's message (a skipped polish)
        self._polish_journal: Journal | None = None  # polish lines beside the engine's journal
        self._partial_logged = -1

    def on_partial(self, event: PartialText) -> None:
        # A model's text reaches the log and the screen as text alone (engine.core.sanitize).
        event = replace(event, committed=clean(event.committed), tentative=clean(event.tentative))
        if event.utterance_id != self._partial_logged:
            self._partial_logged = event.utterance_id  # once per utterance: logs stay readable
            log.info("partial text for utterance %d: %s | %s", event.utterance_id,
                     event.committed, event.tentative)
        label = f"{event.source}: " if event.source else ""
        self.window.transcript.show_partial(event.start, label + event.committed, event.tentative)
        self.captions.show_partial(event.committed, event.tentative, event.source)

    def on_final(self, event: FinalText) -> None:
        received = time.monotonic()
        event = replace(event, text=clean(event.text))
        log.info("final %d (round trip %.0f ms, %.0f ms after speech end): %s",
                 event.utterance_id, event.latency_ms, event.after_speech_end_ms, event.text)
        released_at, self.dictation.released_at = self.dictation.released_at, None
        released = [("release", released_at)] if released_at is not None else []
        if self.voice_edit.take(event.text):
            self._stages = [*released, *event.stages, ("received", received)]
            return  # the spoken instruction of a voice edit (app.voice_edit)
        # In push-to-talk mode every final was dictated on purpose and goes into the focused
        # app, as that app's profile says (app.dictation); in captions mode text only shows
        # on screen (replacement rules, no commands).
        target = self.dictation.target() if self.live.config().mode == "ptt" else None
        self.text.submit(event, self._settings(), target,
                         [*released, *event.stages, ("received", received)])

    def on_dictated(self, done: Dictated) -> None:
        self._stages = [*done.stages, ("dictated", time.monotonic())]
        for problem in done.out.problems:  # a replacement rule skipped: the user's to fix
            log.warning("%s", problem)
            self.window.show_message(problem, 20000)
        event, out, target = done.final, done.out, done.target
        self._show_final(event, out)
        if target is None:
            pass  # captions mode: shown, nothing inserted
        elif target.polish != "off" and out.text.strip() and out.delete_chars == 0:
            stages, self._stages = self._stages, []
            self.polisher.polish(
                out.text.strip(), target.polish, self._settings().polish_custom,
                lambda outcome: self._insert_polished(event, out, target, outcome, stages))
            return  # inserted when the answer is in, or the budget is spent
        elif self.dictation.insert(out, target):
            return  # the breakdown is shown when the insertion is done
        self._show_breakdown()

    def _insert_polished(self, event: FinalText, out: Insertion, target: DictationTarget,
                         outcome: Outcome, stages: list[tuple[str, float]]) -> None:
        """A final's AI polish is done (answered and checked, rejected, failed or out of time):
        insert its outcome, with the joining whitespace the text pipeline gave the raw text."""
        text = out.text
        if outcome.ok:
            lead = text[:len(text) - len(text.lstrip())]
            text = lead + outcome.text + text[len(text.rstrip()):]
        else:  # the user sees why, with the insertion's own message (on_injected)
            self._injection_note = outcome.describe()
            self.window.show_message(self._injection_note, 10000)
        self.window.latency.set_polish(outcome.llm_ms, outcome.reason, outcome.describe())
        self._journal_polish(event.utterance_id, out.text.strip(), outcome)
        self.session.set_stages(event.utterance_id, (*event.stages, *outcome.stages))
        self._stages = [*stages, *outcome.stages]
        if not self.dictation.insert(Insertion(text, out.delete_chars, out.shown, out.unshown),
                                     target):
            self._show_breakdown()

    def _journal_polish(self, utterance_id: int, raw: str, outcome: Outcome) -> None:
        """History keeps both texts: a polish line beside the engine's line for the final."""
        engine = self.live.engine
        path = engine.journal_path if engine is not None else None
        if not path:
            return
        where = Path(path)
        if self._polish_journal is None or self._polish_journal.path != where:
            self._polish_journal = Journal(where.stem, where.parent)
        try:
            self._polish_journal.append_polish(
                utterance_id, raw, outcome.text if outcome.ok else None,
                "" if outcome.ok else f"{outcome.reason}: {outcome.detail}")
        except JournalError as exc:
            log.warning("%s", exc)

    def _show_final(self, event: FinalText, out: Insertion) -> None:
        for text in out.unshown:  # "scratch that"
            if self.session.finals and self.session.finals[-1].text == text:
                self.session.remove_last()
                self.window.transcript.remove_last()
        self.session.add(shown_final(event, out))
        label = f"{event.source}: " if event.source and out.shown else ""
        self.window.transcript.add_final(event.start, label + out.shown)
        # Captions may amend their last line when the next goes on with its sentence; dictated
        # lines stay as they were typed.
        captions = self.live.config().mode == "vad"
        self.captions.add_final(caption_line(event, out.shown) if captions else out.shown)

    def on_translation(self, event: Translation) -> None:
        self.captions.add_translation(f"{event.source}#{event.utterance_id}", event.text)

    def _show_breakdown(self, extra: Sequence[tuple[str, float]] = ()) -> None:
        stages = [*self._stages, *extra]
        if not stages:
            return
        origin = stages[0][0]  # the key release, or the end of speech
        rows = breakdown(stages, origin)
        log.info("latency breakdown from %s at %.6f: %s", origin, stages[0][1], describe(rows))
        self.window.latency.set_breakdown(origin, rows)
        self._stages = []

    def on_injected(self, ok: bool, message: str) -> None:
        self.last_injection = (ok, message)
        note, self._injection_note = self._injection_note, ""
        if note:
            message = f"{message} · {note}"
        (log.info if ok else log.warning)("%s", message)
        self.window.show_message(message, 3000 if ok and not note else 20000)
        self._show_breakdown(self.injector.timings)

    def close(self) -> None:
        if self._polish_journal is not None:
            self._polish_journal.close()
