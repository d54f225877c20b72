"""Scheduling partials, as pure functions: when the utterance in flight is decoded again
(`due`), with which options (`plan`), which segments of the result are shown (`shown`), and
when the next one may come (`next_at`).

Partials re-decode the whole growing utterance, no sooner than ``partial_interval_s`` and
``busy_factor`` x the last partial's round trip after the previous one (times the lag's
backoff), so a slow machine decodes less often instead of drifting. Until the first words show,
a partial is tried again as soon as ``first_words_step_s`` more audio is in (the first-words
cadence, `PolicyOptions.first_words`); committing early, so is the rest of an utterance once
its words so far were committed (`commit.Committer.commit`)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.core import hotwords
from engine.core.ladder import LOOP_FLAGS, word_loop
from engine.core.policy.finals import segment_flags
from engine.core.policy.job import Job
from engine.core.policy.options import PolicyOptions
from engine.core.policy.speculation import SpecState
from engine.core.policy.utterance import Utterance
from engine.types import SAMPLE_RATE, DecodeOptions, Segment, Transcript


def due(o: PolicyOptions, utt: Utterance, now: float, *, next_at: float, verdict_due: bool,
        decoding: bool, in_flight: int, final_in_flight: bool) -> bool:
    """A partial of ``utt`` is due at ``now``: the interval (``next_at``) is over or a sentence
    cut waits for its verdict (``verdict_due``), enough audio and enough new audio with speech
    in it, none of its decodes in flight (``decoding``), no speculation but one kept for a
    sentence cut, and a decode stream left for a final (``in_flight`` decodes,
    ``final_in_flight``)."""
    return (
        o.partials
        and utt.speech
        # A sentence cut waiting for its verdict does not wait out the interval or the
        # backoff, as the cut is only worth it while it is early.
        and (now >= next_at or verdict_due)
        and utt.samples >= o.min_partial_audio_s * SAMPLE_RATE
        and utt.samples - utt.partial_samples >= SAMPLE_RATE * (
            o.min_new_audio_s if utt.heard.strip() or not o.first_words
            else o.first_words_step_s)
        and not decoding
        # Speech came after the audio the last partial read, as a pause adds no words and its
        # decode would compete with the final (committing early, a partial in a pause is what
        # commits the words before it).
        and (o.commit_stable or utt.speech_upto > utt.start + utt.partial_samples)
        # (A speculation kept for a sentence cut waits for a partial past its pause.)
        and (utt.spec.state is SpecState.NONE
             or (utt.spec.has_result and utt.spec.resumed(utt.speech_upto)))
        # With two decode streams or more, the last free one is kept for a final.
        and (o.max_in_flight == 1 or final_in_flight or in_flight < o.max_in_flight - 1)
    )


def plan(o: PolicyOptions, samples: int, *, prompt: str | None, vocabulary: str | None,
         ) -> DecodeOptions:
    """The options of a partial of ``samples`` of audio. Committing early, a partial's words
    become final text: it is decoded with the prompt a final gets (without it tiny.en loses
    case, punctuation and words), with word times (where to cut, what was committed) and with
    ``commit_beam_size``."""
    commit = o.commit_stable
    return DecodeOptions(
        language=o.language, languages=o.languages, task=o.task, word_timestamps=commit,
        prompt=prompt if commit else None, hotwords=vocabulary,
        beam_size=o.commit_beam_size if commit else o.partial_beam_size, temperatures=(0.0,),
        short_context=o.short_context and samples <= o.short_context_max_s * SAMPLE_RATE,
        short_fallback=False,  # tentative text: what the short window reads, or nothing
    )


def shown(o: PolicyOptions, request: Job, transcript: Transcript) -> list[Segment]:
    """The segments of a partial's result worth showing: no loop, no text on no speech, no
    recited vocabulary."""
    seconds = len(request.audio) / SAMPLE_RATE
    vocabulary = request.options.hotwords
    return [s for s in transcript.segments if not (
        segment_flags(s, o.quality) | word_loop(s.text, seconds)) & (LOOP_FLAGS | {"no_speech"})
        and not (vocabulary and hotwords.recites(vocabulary, s.text))]


def next_at(o: PolicyOptions, request: Job, now: float, backoff: float, *, heard: bool) -> float:
    """When the next partial may come, after ``request``'s result at ``now``. Committing early,
    the partials make the final text: a slow machine spaces them by their round trip
    (busy_factor) alone, not by the lag's backoff as well. No word yet (``heard`` False: the
    first try is early, on little speech): as soon as first_words_step_s more has come, not a
    whole interval later, so the first words show when Whisper can first read them; a busy
    machine still backs off."""
    if not heard and o.first_words:
        return now + (o.busy_factor * (now - request.issued_at) if backoff > 1 else 0.0)
    wait = max(o.partial_interval_s, o.busy_factor * (now - request.issued_at))
    return now + wait * (1.0 if o.commit_stable else backoff)


MAX_BACKOFF = 8.0  # the most times the base partial interval a lagging stream waits


@dataclass
class Lag:
    """How far results trail their audio: past ``max_lag_s`` the partial interval doubles (up
    to MAX_BACKOFF times), and it halves back once the lag is under half of that."""

    max_lag_s: float
    backoff: float = 1.0
    last_ms: float = 0.0

    def track(self, lag: float) -> None:
        self.last_ms = lag * 1000
        if lag > self.max_lag_s:
            self.backoff = min(MAX_BACKOFF, self.backoff * 2)
        elif lag < self.max_lag_s / 2:
            self.backoff = max(1.0, self.backoff / 2)
