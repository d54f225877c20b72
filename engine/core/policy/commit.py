"""Committing early (`PolicyOptions.commit_stable`, off by default): the words two partials in
a row agree on become final while their utterance is still being spoken.

Two state objects, as `speculation.Speculation` is one: `EarlyCommit`, owned by the utterance
(the last partials' words not committed yet, and how many of them may be committed now), and
`CommittedWords` (what the stream has committed so far, which outlives the utterance it was
committed from: the next one's decodes start before its first word), kept by the policy's
`pieces.Committer`, which makes a piece's final of the agreed words and feeds the prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.core.agreement import common_prefix, comparable
from engine.core.form import ends_marked, has_form
from engine.core.ladder import word_loop
from engine.core.policy.job import text_of
from engine.types import SAMPLE_RATE, Word

# The decode window starts where the sentence of the first word not committed starts, as
# whisper_streaming trims its buffer at sentence ends: Whisper skips words at the start of a
# window that starts mid-sentence. Past COMMIT_WINDOW_S it starts at the last committed clause
# mark, else COMMIT_LEAD_S before the commit point.
COMMIT_WINDOW_S = 6.0
COMMIT_LEAD_S = 2.0
# A word is committed once Whisper has heard this much after it, since it reads a word by what
# follows it too ("than" or "then").
COMMIT_HOLD_S = 0.5
# The committed words a decode may say again: up to this many, found within COMMIT_SLACK words
# of the commit point, in a decode that reaches back to COMMIT_TOUCH_S after the last of them.
COMMIT_NGRAM = 5
COMMIT_SLACK = 3
COMMIT_TOUCH_S = 0.3
# A word either agreeing decode gives a probability under this (a name, a word heard in part)
# waits for a third decode that agrees (LocalAgreement-3), for at most COMMIT_UNSURE_S of audio
# after it (a reading that flips back and forth).
COMMIT_MIN_PROB = 0.5
COMMIT_UNSURE_S = 2.0
COMMIT_STALE_S = 3.0  # with the end hold: see `EarlyCommit.agreed`
COMMIT_KEEP = 100  # committed words remembered (a window's, and the repeat check's)
_ABBREVIATION = re.compile(r"[A-Z][a-z]{0,2}\.")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*$")


@dataclass
class EarlyCommit:
    """An utterance's words on their way to being committed: the last partial's words not
    committed yet (``hypothesis``) and the partial's before it (``previous_hypothesis``)."""

    hypothesis: list[Word] = field(default_factory=list)
    previous_hypothesis: list[Word] = field(default_factory=list)

    def agreed(self, words: list[Word], heard_upto: int, recent: list[Word],
               end_hold_s: float = 0.0) -> int:
        """How many of ``words`` (a partial's, past the committed ones, decoded up to stream
        sample ``heard_upto``) may be committed now: those this partial and the last agree on
        (three partials for an unsure word), heard COMMIT_HOLD_S after, not a number or an
        abbreviation last, no word loop with the ``recent`` committed words, and no word that
        ends a sentence until ``end_hold_s`` after it was heard (`commit_end_hold_s`)."""
        agreed = common_prefix([w.text for w in self.hypothesis], [w.text for w in words])
        while agreed and words[agreed - 1].end > heard_upto - COMMIT_HOLD_S * SAMPLE_RATE:
            agreed -= 1
        if agreed == len(words) and words and not words[-1].text.strip()[-1:].isalnum():
            # Whisper ends whatever audio it is given with a period: the mark after the last
            # word heard waits for the word after it.
            agreed -= 1
        if end_hold_s > 0:
            # A word decodes keep reading differently would hold the rest back for good: once
            # COMMIT_STALE_S was heard after it, the latest decode, which heard the most, says it.
            stale = heard_upto - COMMIT_STALE_S * SAMPLE_RATE
            agreed = max(agreed, sum(1 for w in words if w.end <= stale))
            agreed = next((i for i, w in enumerate(words[:agreed]) if _SENTENCE_END.search(
                w.text) and w.end > heard_upto - end_hold_s * SAMPLE_RATE), agreed)
        heard = heard_upto - COMMIT_UNSURE_S * SAMPLE_RATE

        def sureness(i: int, word: Word) -> float:
            # The lower of this decode's and the last partial's probability for the word; past
            # the last partial's words (the stale rule commits them on a busy machine whose
            # decodes come seconds apart) a word has only its own.
            before = self.hypothesis[i].probability if i < len(self.hypothesis) else 1.0
            return min(word.probability, before)

        unsure = next((i for i, w in enumerate(words[:agreed])
                       if sureness(i, w) < COMMIT_MIN_PROB and w.end > heard), agreed)
        thrice = common_prefix([w.text for w in self.previous_hypothesis],
                               [w.text for w in words])
        agreed = max(unsure, min(agreed, thrice))
        # Whisper writes the number words said so far in digits and the next ones change them
        # ("14" becomes "1455"); a piece ending "Mr." would read as a sentence.
        while agreed and (any(c.isdigit() for c in words[agreed - 1].text)
                          or _ABBREVIATION.fullmatch(words[agreed - 1].text.strip())):
            agreed -= 1
        # The loop checks cannot tell a loop from a word said many times over: the final does.
        span = [*recent, *words[:agreed]]
        if agreed and word_loop(text_of(span), (span[-1].end - span[0].start) / SAMPLE_RATE):
            return 0
        return agreed

    def advance(self, words: list[Word], committed: int) -> None:
        """The first ``committed`` of ``words`` were committed; the rest wait for the next
        partial."""
        self.previous_hypothesis, self.hypothesis = self.hypothesis[committed:], words[committed:]


@dataclass
class CommittedWords:
    """What the stream has committed early: the end of the last committed word (``upto``), the
    last `COMMIT_KEEP` words, their language, and up to where they have joined the prompt."""

    upto: int = 0
    words: list[Word] = field(default_factory=list)
    language: str | None = None
    prompted_upto: int = 0

    def record(self, words: list[Word], language: str | None, upto: int) -> None:
        self.upto = upto
        self.words = [*self.words, *words][-COMMIT_KEEP:]
        self.language = language

    def recent(self, after: int) -> list[Word]:
        """The last committed words (COMMIT_NGRAM at most) that end after stream sample
        ``after``: those a loop may go on from."""
        return [w for w in self.words if w.end > after][-COMMIT_NGRAM:]

    def window_start(self, start: int, first: int, samples: int) -> int | None:
        """Where the decode window of an utterance whose audio starts at ``start`` (``samples``
        long) and whose own words start at ``first`` should start (module constants); None:
        where it does."""
        said = [w for w in self.words if start < w.end <= first]
        ends = [w for w in said if has_form(w.text)]
        if not ends and samples > COMMIT_WINDOW_S * SAMPLE_RATE:
            ends = [w for w in said if ends_marked(w.text)] or [
                w for w in said if w.end <= first - COMMIT_LEAD_S * SAMPLE_RATE]
        return ends[-1].end if ends else None

    def take_for_prompt(self, upto: int) -> list[Word]:
        """The committed words that end by stream sample ``upto`` and have not joined the
        prompt yet; from now on they have."""
        words = [w for w in self.words if w.start >= self.prompted_upto and w.end <= upto]
        self.prompted_upto = max(self.prompted_upto, upto)
        return words

    def words_not_yet_committed(self, words: list[Word], job_start: int,
                                first: int) -> list[Word]:
        """The words of a decode whose audio starts at stream sample ``job_start``, of an
        utterance whose own words start at ``first``, past those committed early.

        If its audio reaches back to the last committed words, it may say them again: the
        words after the longest run of them it says near ``first`` (up to COMMIT_NGRAM, within
        COMMIT_SLACK words; a single word right at it), else the words that lie mostly after
        ``first``, since word times drift between decodes by a word or so."""
        # (A word Whisper gives no length, at the end of a piece, starts where the piece ends.)
        before = [w for w in self.words if w.start < first or w.end <= first][-COMMIT_NGRAM:]
        if not before or before[-1].end < job_start - COMMIT_TOUCH_S * SAMPLE_RATE:
            return words
        at = next((i for i, w in enumerate(words) if w.start + w.end >= 2 * first), len(words))
        said = [comparable(w.text) for w in before]
        heard = [comparable(w.text) for w in words]
        for n in range(len(said), 0, -1):
            slack = COMMIT_SLACK if n > 1 else 1
            ends = range(max(n, at - slack), min(len(words), at + slack) + 1)
            for end in sorted(ends, key=lambda e: abs(e - at)):
                if heard[end - n:end] == said[len(said) - n:]:
                    return words[end:]
        return words[at:]

