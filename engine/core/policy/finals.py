"""Planning and judging a final, as pure functions: which options its next decode takes
(`plan`), what a decode's checks say and which retry comes next (`judge`, by the table
`engine.core.policy.retries.RETRIES`), and which of two decodes stands (`choose`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from engine.core import ladder
from engine.core.agreement import comparable
from engine.core.ladder import LIVE, QualityThresholds, Rung
from engine.core.policy.job import Job, end_of
from engine.core.policy.options import PolicyOptions
from engine.core.policy.retries import MAX_FINAL_DECODES, RETRIES, Retry
from engine.core.policy.utterance import Utterance
from engine.events import FinalText
from engine.types import SAMPLE_RATE, DecodeOptions, Segment, Transcript, Word

EARLY_END_S = 0.8  # the last word ending this long before the speech did: words were dropped
# A final missing this many different words the utterance's last partial heard in part of the
# same audio, with under DROPPED_SHARE of the partial's word count, dropped words (`dropped`).
DROPPED_MIN_WORDS = 6
DROPPED_SHARE = 0.75
PROMPT_CHARS_PER_S = 40  # about 10 tokens per second of audio


def plan(o: PolicyOptions, retry: Retry | None, *, first: bool, seconds: float, soft: bool,
         behind: bool, prompt: str | None, vocabulary: str | None) -> DecodeOptions:
    """The options of a final's next decode: its first (``retry`` None; ``first``: no decode of
    it yet) or the ``retry`` the judge chose. ``seconds`` of audio; ``soft``: only the
    segmenter's soft path heard it; ``behind``: other finals wait; ``prompt``, ``vocabulary``:
    what the prompt tracker and the vocabulary offer it."""
    if retry is Retry.REPLAY:  # decoded as the partials that heard the words the final dropped
        return DecodeOptions(
            language=o.language, languages=o.languages, task=o.task, word_timestamps=True,
            beam_size=o.partial_beam_size, temperatures=(0.0,),
            short_context=o.short_context and seconds <= o.short_context_max_s,
            short_fallback=False)
    # Careful (beam search): long finals, retries, and soft utterances, whose audio the VAD
    # doubted and which also take the padded window; the ladder's beam rung changes only the
    # search, keeping the first attempt's window and prompt.
    beam = retry is Retry.BEAM
    careful = not first or soft or seconds > o.greedy_final_max_s
    short = o.short_context and not soft and seconds <= o.short_context_max_s
    # A retry on the padded window goes without prompt and vocabulary alike (a recited
    # list is retried without it).
    return DecodeOptions(
        language=o.language, languages=o.languages, task=o.task,
        prompt=prompt if first or beam else None,
        hotwords=vocabulary if first or beam else None, word_timestamps=True,
        # Behind (more finals waiting): greedy decoding is cheaper, so the backlog shrinks
        # instead of growing without bound. (A slow partial only backs partials off.)
        beam_size=(o.careful_beam_size if beam else 1 if behind
                   else o.careful_beam_size if careful else o.final_beam_size),
        temperatures=o.final_temperatures,
        short_context=short and (first or beam), short_fallback=o.short_fallback,
    )


@dataclass(frozen=True)
class Judged:
    """One final decode, judged: the segments that count as speech, the checks it fails, and
    the ladder's rung for it."""

    request: Job
    transcript: Transcript
    kept: list[Segment]
    flags: tuple[str, ...]
    rung: Rung

    @property
    def passes(self) -> bool:
        """No check fails but the advisory low confidence."""
        return not set(self.flags) - {"low_confidence"}

    @property
    def words(self) -> int:
        return len(self.transcript.text.split())


def judge(o: PolicyOptions, request: Job, transcript: Transcript, *, soft: bool,
          speech_end: int, decodes: int, behind: bool) -> Judged:
    """The checks on a final decode (`final_flags`) and the ladder's rung for it: the live
    ladder's rungs that are switched on, one retry after a first decode only (``decodes``: of
    this final so far), PADDED alone while other finals wait (``behind``: a low-confidence
    final is not worth the wait)."""
    kept = [s for s in speech_segments(transcript.segments, o.quality)
            if not (soft and s.no_speech_prob > o.soft_no_speech)]
    flags = final_flags(request, transcript, kept, speech_end, o.quality, o.early_end)
    rungs = dataclasses.replace(LIVE, rungs=tuple(
        r for r in LIVE.rungs if (o.beam_rung, o.padded_rung)[r is Rung.PADDED]
        and (r is Rung.PADDED or not behind)))
    if not o.retry_on_loop or decodes > 1:
        rungs = dataclasses.replace(rungs, max_retries=0)
    rung = ladder.next_rung(flags, (), seconds=len(request.audio) / SAMPLE_RATE,
                           greedy=ladder.is_greedy(request.options), ladder=rungs)
    return Judged(request, transcript, kept, flags, rung)


def next_retry(o: PolicyOptions, judged: Judged, *, decodes: int, tried: Iterable[Retry],
               dropped: bool) -> Retry | None:
    """The first row of `RETRIES` whose trigger holds for ``judged`` (``dropped``: words its
    last partial heard are missing), switched on, not tried yet, within `MAX_FINAL_DECODES`;
    None: this decode's text stands."""
    if decodes >= MAX_FINAL_DECODES:
        return None
    due = {Retry.BEAM: judged.rung is Rung.BEAM, Retry.PADDED: judged.rung is Rung.PADDED,
           Retry.REPLAY: dropped}
    done = set(tried)
    for row in RETRIES:
        if (due[row.retry] and row.retry not in done and getattr(o, row.switch)
                and (decodes == 1 or not row.first_only)):
            return row.retry
    return None


def choose(earlier: Judged, retry: Judged) -> Judged:
    """Of two decodes of one final (a "best" row of `RETRIES`): the one that passes the
    checks, then the one that reads more words; a tie keeps the earlier one."""
    if earlier.passes != retry.passes:
        return earlier if earlier.passes else retry
    return retry if retry.words > earlier.words else earlier


def final_flags(request: Job, transcript: Transcript, kept: list[Segment], speech_end: int,
                 thresholds: QualityThresholds, early_end: bool = True) -> tuple[str, ...]:
    """The ladder's checks on a whole final (loops over all its text, recited prompt, low
    confidence over the kept segments), plus an early stop."""
    seconds = len(request.audio) / SAMPLE_RATE
    chars = sum(len(s.text) for s in kept)
    avg_logprob = sum(s.avg_logprob * len(s.text) for s in kept) / chars if chars else 0.0
    probabilities = [w.probability for s in kept for w in s.words]
    greedy = ladder.is_greedy(request.options)
    # Whisper's -1.0 log-prob rule stays per segment (as before); the whole final's average
    # only feeds the low-confidence rung.
    flags = [f for f in ladder.check(
        transcript.text, seconds, avg_logprob=avg_logprob, prompt=request.options.prompt,
        hotwords=request.options.hotwords, word_loops=True,
        min_word_prob=min(probabilities, default=None), greedy=greedy, thresholds=thresholds)
        if f != "logprob"]
    words = [w for s in kept for w in s.words]
    return (*flags, *(sorted(early_end_of(words, request, speech_end)) if early_end else ()))


def dropped(text: str, utt: Utterance, request: Job, min_words: int) -> bool:
    """The utterance's last partial heard many words the final does not have, in audio whose
    speech the final's audio holds: the final dropped some (``min_words`` different words,
    `DROPPED_MIN_WORDS` or fewer, and the final under `DROPPED_SHARE` of the partial's length;
    a partial that said a sentence twice adds no new words). A partial that heard speech past
    the final's audio, as past a sentence cut's pause, says nothing of it."""
    final_end = end_of(request)
    if utt.heard_upto > final_end and utt.speech_end > final_end:
        return False
    heard, said = utt.heard.split(), text.split()
    missing = {comparable(w) for w in heard} - {comparable(w) for w in said} - {""}
    return len(missing) >= min_words and len(said) < DROPPED_SHARE * len(heard)


def early_end_of(words: list[Word], request: Job, speech_end: int) -> set[str]:
    """A short window sometimes stops decoding before the audio does (the last words of the
    utterance are lost): the last word ends well before the VAD's end of speech."""
    if not words or not (request.options.short_context or request.options.prompt
                         or request.options.hotwords):
        return set()
    if speech_end - (request.start + words[-1].end) > EARLY_END_S * SAMPLE_RATE:
        return {"early_end"}
    return set()


def speech_segments(segments: Iterable[Segment], thresholds: QualityThresholds
                    ) -> list[Segment]:
    """The segments the quality checks do not take for text on no speech."""
    return [s for s in segments if "no_speech" not in segment_flags(s, thresholds)]


def quality_flags(judged: Judged, thresholds: QualityThresholds) -> tuple[str, ...]:
    """The flags a final's text carries (into the prompt, the event): its checks' and its
    segments', but "low_confidence", which only chooses the beam rung."""
    segments = {f for s in judged.kept for f in segment_flags(s, thresholds)}
    return tuple(sorted((set(judged.flags) | segments) - {"low_confidence"}))


def final_text(utt: Utterance, text: str, words: tuple[Word, ...], request: Job | None,
               now: float, language: str | None) -> FinalText:
    """The `FinalText` of ``utt`` (``request``: the decode it was read from; None: no decode),
    with the times of its stages for the latency breakdown."""
    latency = (utt.decoded_at - request.issued_at) * 1000 if request is not None else 0.0
    stages = [("speech_end", utt.speech_end_at), ("ended", utt.ended_at)]
    if request is not None:
        stages += [("queued", request.issued_at),
                   ("decode_start", utt.decoded_at - utt.decode_ms / 1000),
                   ("decoded", utt.decoded_at)]
    return FinalText(
        utterance_id=utt.id, text=text, words=words, start=utt.first, end=max(utt.end, utt.first),
        latency_ms=latency, after_speech_end_ms=max(0.0, now - utt.speech_end_at) * 1000,
        language=language, stages=(*stages, ("emitted", now)),
    )


def segment_flags(segment: Segment, thresholds: QualityThresholds) -> set[str]:
    seconds = max(0, segment.end - segment.start) / SAMPLE_RATE
    return set(ladder.check(segment.text, seconds, avg_logprob=segment.avg_logprob,
                            no_speech_prob=segment.no_speech_prob, thresholds=thresholds))
