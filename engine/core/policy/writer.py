"""What the stream writes: finals and, committing early, pieces of an utterance (the words its
partials agree on, `commit.EarlyCommit.agreed`, as a final of their own), each in sentence form
(`engine.core.form`) and fed to the prompt in the order spoken."""

from __future__ import annotations

from collections.abc import Callable

from engine.core.form import OpenSentence, ensure_form
from engine.core.policy.commit import CommittedWords
from engine.core.policy.finals import final_text
from engine.core.policy.job import Job, end_of, placed, text_of
from engine.core.policy.utterance import Utterance
from engine.core.prompt import PromptTracker
from engine.events import Event, FinalText, PartialText, SpeechEnded, SpeechStarted
from engine.types import Segment, Word


class Writer:
    """Writes finals and pieces committed early; keeps the stream's `CommittedWords`, the
    sentence the last final left open, and the prompt's text."""

    def __init__(self, prompt: PromptTracker, sentence: OpenSentence,
                 new_id: Callable[[], int]) -> None:
        self.prompt = prompt
        self.sentence = sentence
        self.new_id = new_id
        self.committed = CommittedWords()

    def commit(self, utt: Utterance, request: Job, kept: list[Segment], language: str | None,
               now: float, *, held: bool, end_hold_s: float = 0.0) -> list[Event]:
        """A partial with word times of ``utt``: the words `EarlyCommit.agreed` allows become
        a piece's final (none while ``held``: an earlier utterance's final is still to come);
        the rest is the partial text."""
        words = self.committed.words_not_yet_committed(placed(kept, request), request.start,
                                                       utt.first)
        agreed = 0 if held else utt.commit.agreed(words, end_of(request),
                                                  self.committed.recent(request.start),
                                                  end_hold_s)
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

    def final_words(self, kept: list[Segment], request: Job, utt: Utterance
                    ) -> tuple[list[Word], str]:
        """The words of a final's decode past those committed early, and their text."""
        words = self.committed.words_not_yet_committed(placed(kept, request, upto=utt.end),
                                                       request.start, utt.first)
        text = (text_of(words) if len(words) < sum(len(s.words) for s in kept)
                else "".join(s.text for s in kept).strip())  # (none committed early)
        return words, text

    def final(self, utt: Utterance, text: str, words: list[Word], request: Job,
              flags: tuple[str, ...], language: str | None, now: float, *,
              end_sentence: bool) -> FinalText:
        """The final of ``utt``: its text joins the prompt (after what it committed early)
        with the decode's quality ``flags``, and the user gets it in sentence form (a piece
        that goes on with the sentence the last final left open starts in lower case)."""
        goes_on = self.sentence.goes_on(utt.first)
        self.prompt_upto(utt.first, now)
        self.prompt.add(text, at=now, flags=flags, language=language, goes_on=goes_on)
        text, shown = ensure_form(text, tuple(words), end=end_sentence, start=not goes_on)
        self.sentence.ended(text, utt.end)
        return final_text(utt, text, shown, request, now, language)
