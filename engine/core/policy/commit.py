"""Committing early (`PolicyOptions.commit_stable`, off by default): the words two partials in
a row agree on become final while their utterance is still being spoken. A part of
`StreamingPolicy` (a mixin: these methods use its state), kept apart so the rule can be read
and changed on its own.
"""

from __future__ import annotations

import re
from collections import deque

from engine.core.agreement import common_prefix, comparable
from engine.core.form import OpenSentence, ends_marked, ensure_form, has_form
from engine.core.ladder import word_loop
from engine.core.policy import partials
from engine.core.policy.job import Job
from engine.core.policy.job import end_of as _end_of
from engine.core.policy.job import placed as _placed
from engine.core.policy.job import text_of as _text
from engine.core.policy.options import PolicyOptions
from engine.core.policy.utterance import Utterance
from engine.core.prompt import PromptTracker
from engine.events import Event, FinalText, PartialText, SpeechEnded, SpeechStarted
from engine.types import SAMPLE_RATE, Segment, Word

# Committing early (`PolicyOptions.commit_stable`): the decode window starts where the sentence
# of the first word not committed starts (as whisper_streaming trims its buffer at sentence
# ends: Whisper skips words at the start of a window that starts mid-sentence, and its word
# times go wrong with them); past COMMIT_WINDOW_S, at the last committed clause mark, else
# COMMIT_LEAD_S before the commit point. Of a decode whose audio reaches back before the
# commit point, the words up to the last committed ones said again near it, else those mostly
# before it, were committed already (`StreamingPolicy._beyond`). A word is committed once
# Whisper has heard COMMIT_HOLD_S after it (it reads a word by what follows it too: "than" or
# "then").
COMMIT_WINDOW_S = 6.0
COMMIT_LEAD_S = 2.0
COMMIT_HOLD_S = 0.5
COMMIT_NGRAM = 5
COMMIT_SLACK = 3
COMMIT_TOUCH_S = 0.3
# A word either of the two agreeing decodes gives a probability under this (a name, a word
# heard in part) waits for a third decode that agrees (LocalAgreement-3): on the 231 s
# reading, with greedy partials, 6.3 % WER instead of 6.9 % (offline 4.7 %; CPU-time
# clock), the word lag 0.99 / 2.16 s p50 / p95 instead of 0.89 / 1.75 s.
COMMIT_MIN_PROB = 0.5
COMMIT_UNSURE_S = 2.0  # ... and waits no longer than this (a reading that flips back and forth)
_ABBREVIATION = re.compile(r"[A-Z][a-z]{0,2}\.")
COMMIT_KEEP = 100  # committed words remembered (a window's, and the repeat check's)


class Commits:
    """The early-commit part of `StreamingPolicy` (see the module docstring)."""

    # (StreamingPolicy's state these methods use.)
    options: PolicyOptions
    prompt: PromptTracker
    _open: OpenSentence
    _next_utterance: int
    _next_partial_at: float
    _backoff: float
    # Committing early: the end of the last word committed, the last words committed, their
    # language, and up to where they have gone to the prompt.
    _committed: int
    _said: list[Word]
    _said_language: str | None
    _prompted: int
    _finals: deque[Utterance]
    _in_flight: dict[int, tuple[Job, Utterance]]

    def _commit(self, utt: Utterance, request: Job, kept: list[Segment],
                language: str | None, now: float) -> list[Event]:
        """A partial with word times of ``utt``: the words it agrees on with the last one
        (and on every word before them) past what is committed already are final now
        (`PolicyOptions.commit_stable`); the rest is the partial text."""
        words = self._beyond(_placed(kept, request), request, utt)
        agreed = common_prefix([w.text for w in utt.hypothesis], [w.text for w in words])
        # (Only words Whisper has heard COMMIT_HOLD_S after.)
        while agreed and words[agreed - 1].end > _end_of(request) - COMMIT_HOLD_S * SAMPLE_RATE:
            agreed -= 1
        if agreed == len(words) and words and not words[-1].text.strip()[-1:].isalnum():
            # Whisper ends whatever audio it is given with a period: the mark after the last
            # word heard waits for the word after it.
            agreed -= 1
        # A word Whisper is unsure of (in either decode: probability under COMMIT_MIN_PROB)
        # takes three decodes that agree on it (LocalAgreement-3), until COMMIT_UNSURE_S of
        # audio after it has been heard; so do the words after it.
        heard = _end_of(request) - COMMIT_UNSURE_S * SAMPLE_RATE
        unsure = next((i for i, (w, h) in enumerate(zip(words[:agreed], utt.hypothesis[:agreed],
                                                        strict=True))
                       if min(w.probability, h.probability) < COMMIT_MIN_PROB and w.end > heard),
                      agreed)
        thrice = common_prefix([w.text for w in utt.previous_hypothesis], [w.text for w in words])
        agreed = max(unsure, min(agreed, thrice))
        # Nor a number last: Whisper writes the number words said so far in digits and the
        # next ones change them ("14" becomes "1455" once "fifty-five" is heard). Nor a short
        # capitalised word with a period ("Mr.", "Dr."): the piece would read as a sentence.
        while agreed and (any(c.isdigit() for c in words[agreed - 1].text)
                          or _ABBREVIATION.fullmatch(words[agreed - 1].text.strip())):
            agreed -= 1
        # Not a word said again and again (a loop, or a word said many times over: the loop
        # checks cannot tell them apart here, nor can the repeat check): the final decides.
        recent = [w for w in self._said if w.end > request.start][-COMMIT_NGRAM:]
        span = [*recent, *words[:agreed]]
        if agreed and word_loop(_text(span), (span[-1].end - span[0].start) / SAMPLE_RATE):
            agreed = 0
        # Finals come out in the order spoken: while an earlier utterance's final is still
        # to come (its decode waits or runs on the other stream), nothing after it is final.
        if self._finals or any(job.kind == "final" and u is not utt
                               for job, u in self._in_flight.values()):
            agreed = 0
        events: list[Event] = []
        if agreed:
            events = self._commit_piece(utt, words[:agreed], request, language, now)
        utt.previous_hypothesis, utt.hypothesis = utt.hypothesis[agreed:], words[agreed:]
        utt.heard = _text(utt.hypothesis)
        utt.heard_upto = _end_of(request)
        if not utt.heard:  # the first-words cadence, as for a new utterance
            self._next_partial_at = partials.next_at(self.options, request, now,
                                                     self._backoff, heard=False)
        return [*events, PartialText(utterance_id=utt.id, committed="", tentative=utt.heard,
                                     start=utt.first)]

    def _commit_piece(self, utt: Utterance, words: list[Word], request: Job,
                      language: str | None, now: float) -> list[Event]:
        """End the piece of ``utt`` up to the last of ``words`` as a final of its own, and go
        on with the rest as the next utterance (a new id), its audio from the start of the
        sentence the commit point is in (`_trim`)."""
        cut = words[-1].end
        text, shown = ensure_form(_text(words), words, end=False,
                                  start=not self._open.goes_on(utt.first))
        self._open.ended(text, cut)
        final = FinalText(
            utterance_id=utt.id, text=text, words=shown, start=utt.first, end=cut,
            latency_ms=(now - request.issued_at) * 1000, language=language,
            stages=(("queued", request.issued_at), ("decoded", now), ("emitted", now)))
        events: list[Event] = [SpeechEnded(utterance_id=utt.id, at=cut), final]
        utt.id, self._next_utterance = self._next_utterance, self._next_utterance + 1
        events.append(SpeechStarted(utterance_id=utt.id, at=cut))
        self._committed, self._said = cut, [*self._said, *shown][-COMMIT_KEEP:]
        self._said_language = language
        utt.first = cut
        self._trim(utt, now)
        return events

    def _trim(self, utt: Utterance, now: float) -> None:
        """Drop the audio of ``utt`` before the start of the sentence of its first word (the
        end of the last committed word that ends a sentence); past COMMIT_WINDOW_S, before
        the last committed clause mark, else COMMIT_LEAD_S before its first word (cut right
        there, Whisper skips the word that starts the window). The committed text before it
        goes to the prompt."""
        said = [w for w in self._said if utt.start < w.end <= utt.first]
        ends = [w for w in said if has_form(w.text)]
        if not ends and utt.samples > COMMIT_WINDOW_S * SAMPLE_RATE:
            ends = [w for w in said if ends_marked(w.text)] or [
                w for w in said if w.end <= utt.first - COMMIT_LEAD_S * SAMPLE_RATE]
        if not ends:
            return
        self._prompt_upto(ends[-1].end, now)
        shift = min(utt.samples, ends[-1].end - utt.start)
        utt.chunks = [utt.audio()[shift:]]
        utt.samples -= shift
        utt.start += shift
        utt.partial_samples = max(0, utt.partial_samples - shift)

    def _prompt_upto(self, upto: int, now: float) -> None:
        """The words committed early that end by stream sample ``upto`` join the prompt. They
        got their form when committed (`_commit_piece`: a capital first letter unless they went
        on with an open sentence), so a lower-case start among them goes on with the words
        before it."""
        words = [w for w in self._said if w.start >= self._prompted and w.end <= upto]
        if words:
            self.prompt.add(_text(words), at=now, language=self._said_language, goes_on=True)
        self._prompted = max(self._prompted, upto)

    def _beyond(self, words: list[Word], job: Job, utt: Utterance) -> list[Word]:
        """The words of ``job``'s result (of ``utt``) past those committed early
        (whisper_streaming's hypothesis buffer), if its audio reaches back to the last words
        committed before ``utt``'s first word (to COMMIT_TOUCH_S after the last one: a window
        cut at its end may still hear its tail): after the last committed words where the
        decode says them again near that point (the longest run of up to COMMIT_NGRAM, within
        COMMIT_SLACK words of it; a single word right at it), else the words that lie mostly
        after it (word times drift between decodes by a word or so, which alone would lose
        or repeat one)."""
        # (A word Whisper gives no length, at the end of a piece, starts where the piece ends.)
        before = [w for w in self._said
                  if w.start < utt.first or w.end <= utt.first][-COMMIT_NGRAM:]
        if not before or before[-1].end < job.start - COMMIT_TOUCH_S * SAMPLE_RATE:
            return words
        at = next((i for i, w in enumerate(words) if w.start + w.end >= 2 * utt.first),
                  len(words))
        said = [comparable(w.text) for w in before]
        heard = [comparable(w.text) for w in words]
        for n in range(len(said), 0, -1):
            slack = COMMIT_SLACK if n > 1 else 1
            ends = range(max(n, at - slack), min(len(words), at + slack) + 1)
            for end in sorted(ends, key=lambda e: abs(e - at)):
                if heard[end - n:end] == said[len(said) - n:]:
                    return words[end:]
        return words[at:]
