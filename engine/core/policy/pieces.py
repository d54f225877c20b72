"""Committing early, the events side: the words an utterance's partials agree on
(`commit.EarlyCommit.agreed`) become a piece of it with a final of its own, and the rest goes on
as the next utterance."""

from __future__ import annotations

from collections.abc import Callable

from engine.core.form import OpenSentence, ensure_form
from engine.core.policy.commit import CommittedWords
from engine.core.policy.job import Job, end_of, placed, text_of
from engine.core.policy.utterance import Utterance
from engine.core.prompt import PromptTracker
from engine.events import Event, FinalText, PartialText, SpeechEnded, SpeechStarted
from engine.types import Segment, Word


class Committer:
    """Turns the words an utterance's partials agree on into finals of their own (pieces),
    keeps the stream's `CommittedWords`, and feeds committed text to the prompt."""

    def __init__(self, prompt: PromptTracker, sentence: OpenSentence,
                 new_id: Callable[[], int]) -> None:
        self.prompt = prompt
        self.sentence = sentence  # the sentence the last final left open (shared with finals)
        self.new_id = new_id
        self.committed = CommittedWords()

    def commit(self, utt: Utterance, request: Job, kept: list[Segment], language: str | None,
               now: float, *, held: bool) -> list[Event]:
        """A partial with word times of ``utt``: the words `EarlyCommit.agreed` allows become
        a piece's final (none while ``held``: an earlier utterance's final is still to come);
        the rest is the partial text."""
        words = self.committed.words_not_yet_committed(placed(kept, request), request.start,
                                                       utt.first)
        agreed = 0 if held else utt.commit.agreed(words, end_of(request),
                                                  self.committed.recent(request.start))
        events = self._piece(utt, words[:agreed], request, language, now) if agreed else []
        utt.commit.advance(words, agreed)
        utt.heard = text_of(utt.commit.hypothesis)
        utt.heard_upto = end_of(request)
        return [*events, PartialText(utterance_id=utt.id, committed="", tentative=utt.heard,
                                     start=utt.first)]

    def _piece(self, utt: Utterance, words: list[Word], request: Job, language: str | None,
               now: float) -> list[Event]:
        """End the piece of ``utt`` up to the last of ``words`` as a final of its own, and go
        on with the rest as the next utterance (a new id), its audio from the start of the
        sentence the commit point is in (`trim`)."""
        cut = words[-1].end
        text, shown = ensure_form(text_of(words), words, end=False,
                                  start=not self.sentence.goes_on(utt.first))
        self.sentence.ended(text, cut)
        final = FinalText(
            utterance_id=utt.id, text=text, words=shown, start=utt.first, end=cut,
            latency_ms=(now - request.issued_at) * 1000, language=language,
            stages=(("queued", request.issued_at), ("decoded", now), ("emitted", now)))
        events: list[Event] = [SpeechEnded(utterance_id=utt.id, at=cut), final]
        utt.id = self.new_id()
        events.append(SpeechStarted(utterance_id=utt.id, at=cut))
        self.committed.record(list(shown), language, cut)
        utt.first = cut
        self.trim(utt, now)
        return events

    def trim(self, utt: Utterance, now: float) -> None:
        """Drop the audio of ``utt`` before `CommittedWords.window_start`; the committed text
        before it goes to the prompt."""
        start = self.committed.window_start(utt.start, utt.first, utt.samples)
        if start is None:
            return
        self.prompt_upto(start, now)
        shift = min(utt.samples, start - utt.start)
        utt.chunks = [utt.audio()[shift:]]
        utt.samples -= shift
        utt.start += shift
        utt.partial_samples = max(0, utt.partial_samples - shift)

    def prompt_upto(self, upto: int, now: float) -> None:
        """The words committed early that end by stream sample ``upto`` join the prompt; they
        got their form when committed, so a lower-case start among them goes on with the
        words before it."""
        words = self.committed.take_for_prompt(upto)
        if words:
            self.prompt.add(text_of(words), at=now, language=self.committed.language,
                            goes_on=True)
