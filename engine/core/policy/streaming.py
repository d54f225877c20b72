"""The streaming policy: when to decode what, and which events to emit (sans-I/O).

One `StreamingPolicy` per audio stream (the desktop engine has one; the server runs one per
session). It never decodes, sleeps or reads a clock: the caller passes ``now`` (seconds on any
monotonic clock, real or simulated) to every call.

    caller                                   policy
    segmenter events (SegmentStarted...) --> handle(event, now)       -> [Event]
    "my worker is free"                  --> next_request(now)        -> Job | None
    decode finished                      --> on_result(id, transcript, now) -> [Event]
    decode failed                        --> on_failure(id, message, now)   -> [Event]

The caller asks for work only when it can run it, and at most ``max_in_flight`` requests are
out, so decode work never queues up behind a slow machine. Finals go first, oldest first;
partials are spaced by `partials.next_at` and the lag's backoff (`partials.Lag`).

The package, by job: `options` (PolicyOptions, `RULES`), `job` and `utterance` (a decode job,
the utterance's state), `speculation` (the speculative final), `commit` and `writer`
(committing early; writing finals), `partials` and `finals` (planning and judging decodes)
with `retries`, `hints` (what the policy tells the segmenter) and this module.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections import deque

from engine.core import hotwords
from engine.core.form import OpenSentence
from engine.core.policy import finals, partials
from engine.core.policy.finals import (
    DROPPED_MIN_WORDS,
    PROMPT_CHARS_PER_S,
    Judged,
    final_text,
    speech_segments,
)
from engine.core.policy.hints import AwaitReading, CutAt, Hint, PauseReads, Reading
from engine.core.policy.job import Job, JobKind, end_of, metrics_of
from engine.core.policy.options import PolicyOptions
from engine.core.policy.retries import Retry, rule
from engine.core.policy.speculation import usable
from engine.core.policy.utterance import Utterance
from engine.core.policy.writer import Writer
from engine.core.prompt import PromptTracker
from engine.core.segmenter import (
    SegmentAudio,
    SegmentEnded,
    SegmentEvent,
    SegmentPaused,
    SegmentStarted,
)
from engine.events import EngineFailed, Event, SpeechEnded, SpeechStarted
from engine.types import SAMPLE_RATE, DecodeOptions, DecodeRequest, Transcript

log = logging.getLogger(__name__)


class StreamingPolicy:
    """See the module docstring. Not thread-safe: call from one thread (or under one lock)."""

    def __init__(self, options: PolicyOptions | None = None) -> None:
        self.options = options or PolicyOptions()
        self.prompt = PromptTracker(self.options.prompt, language=self.options.language)
        self.vocabulary = self.options.vocabulary
        self._active: Utterance | None = None
        self._finals: deque[Utterance] = deque()
        self._in_flight: dict[int, tuple[Job, Utterance]] = {}
        self._hints: list[Hint] = []
        self._ids = itertools.count(1)  # utterance ids
        self._next_request = 1
        self._next_partial_at = 0.0
        self.lag = partials.Lag(self.options.max_lag_s)
        # The next final may go on with a sentence the last one left open: within the
        # prompt's memory, as the prompt carries that sentence.
        self._open = OpenSentence(int(self.options.prompt.reset_after_s * SAMPLE_RATE))
        self.writer = Writer(self.prompt, self._open, lambda: next(self._ids))

    @property
    def idle(self) -> bool:
        """Nothing in flight, pending or being spoken: a stream may close now."""
        return self._active is None and not self._finals and not self._in_flight

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def backoff(self) -> float:
        """How many times the base partial interval the policy currently waits (>= 1)."""
        return self.lag.backoff

    @property
    def last_lag_ms(self) -> float:
        return self.lag.last_ms

    def set_vocabulary(self, terms: tuple[str, ...]) -> None:
        """Bias the decodes issued from now on towards ``terms`` (() : none)."""
        self.vocabulary = tuple(terms)

    def set_language(self, language: str | None, languages: tuple[str, ...] = ()) -> None:
        """Decode in ``language`` from now on (None: detect among ``languages``). The prompt
        history is kept only while it is of that language (engine.core.prompt)."""
        self.options = dataclasses.replace(self.options, language=language,
                                           languages=tuple(languages))
        self.prompt.set_language(language)

    def hints(self) -> list[Hint]:
        """The hints for the segmenter since the last call, oldest first (engine.core.policy.
        hints); the stream core carries them out after every call into the policy."""
        out, self._hints = self._hints, []
        return out

    def handle(self, event: SegmentEvent, now: float) -> list[Event]:
        """Feed one segmenter event."""
        if isinstance(event, SegmentStarted):
            return self._start(event, now)
        if isinstance(event, SegmentAudio):
            if self._active is not None:
                self._active.speech |= event.speech
                self._active.append(event.audio, now)
                if event.speech:
                    self._active.speech_heard(
                        0.0 if self.options.commit_stable else self.options.sentence_cut_s)
            return []
        if isinstance(event, SegmentPaused):
            if self._active is not None:
                self.speculate(event.at, soft=event.soft)
            return []
        return self._end(event, now)

    def handle_all(self, events: list[SegmentEvent], now: float) -> list[Event]:
        """Feed the segmenter's events of one step; then a sentence cut may be due (`CutAt`)."""
        out: list[Event] = []
        for event in events:
            out.extend(self.handle(event, now))
        self._offer_cut()
        return out

    def next_request(self, now: float) -> Job | None:
        """The next decode to run now, or None; call whenever a worker is free."""
        if len(self._in_flight) >= self.options.max_in_flight:
            return None
        if self._finals:
            # One final at a time, in order: each is the next one's prompt.
            if self._final_in_flight():
                return None
            return self._final_request(self._finals.popleft(), now)
        utt = self._active
        if utt is not None and self._speculation_due(utt):
            return self._speculative_request(utt, now)
        if utt is None or not self._partial_due(utt, now):
            return None
        return self._partial_request(utt, now)

    def on_result(self, request_id: int, transcript: Transcript, now: float) -> list[Event]:
        """Feed a finished decode; results of unknown or cancelled requests are ignored."""
        entry = self._in_flight.pop(request_id, None)
        if entry is None:
            return []
        request, utt = entry
        if request.speculative and request is not utt.spec.job:
            return []  # speech resumed after the audio it decoded: thrown away
        # The speculative final of a pause the segmenter waits on (not one kept for a
        # sentence cut, which speech has gone on past): its text tells how long to wait.
        awaited = request.speculative and not utt.spec.resumed(utt.speech_upto)
        lag = max(0.0, now - request.audio_arrived_at)
        if not (request.kind is JobKind.PARTIAL and utt is not self._active):
            # (A partial of an utterance that has ended is thrown away; it ran beside that
            # utterance's final, and its slowness must not space out the next one's partials.)
            self.lag.track(lag)
        metrics = metrics_of(request, transcript, now, lag)
        if request.kind is JobKind.PARTIAL:
            events = [metrics, *self._partial_result(request, utt, transcript, now)]
        else:
            utt.decoded_at, utt.decode_ms = now, transcript.decode_ms
            if utt is self._active:  # speculative, the end not confirmed yet: keep it till then
                utt.spec.store_result(transcript, " ".join(s.text for s in speech_segments(
                    transcript.segments, self.options.quality)).strip())
                events = [metrics]
            else:
                events = [metrics, *self._final_result(request, utt, transcript, now)]
        if awaited:
            self._hints.append(PauseReads(self._reading()))
        self._offer_cut()
        return events

    def on_failure(self, request_id: int, message: str, now: float) -> list[Event]:
        """A decode raised: report it; a failed final closes its utterance with empty text."""
        entry = self._in_flight.pop(request_id, None)
        if entry is None:
            return []
        request, utt = entry
        events: list[Event] = [EngineFailed(f"decode failed: {message}", recoverable=True)]
        utt.decoded_at, utt.decode_ms = now, 0.0
        if request.speculative:
            if request is utt.spec.job:
                if not utt.spec.resumed(utt.speech_upto):
                    self._hints.append(PauseReads(None))  # nothing to tell: the usual wait
                utt.drop_speculation()
                if utt is not self._active:  # it had ended: decode its final the usual way
                    self._finals.append(utt)
            return events
        if request.kind is JobKind.FINAL:
            events.append(final_text(utt, "", (), request, now, None))
        return events

    def cancel(self) -> None:
        """Forget everything in flight or pending (a client's "cancel"); emits nothing."""
        self._active = None
        self._finals.clear()
        self._in_flight.clear()
        self._hints.clear()

    def discarded(self, job: Job) -> bool:
        """A speculative final thrown away (speech resumed): its result will be ignored, so a
        driver that can still take it back need not decode it."""
        entry = self._in_flight.get(job.request_id)
        return job.speculative and (entry is None or entry[1].spec.job is not job)

    def refuse_cut(self, cut: CutAt) -> None:
        """The segmenter could not make the cut `CutAt` asked for: let that speculation go."""
        utt = self._active
        if utt is not None and utt.spec.job is not None \
                and utt.spec.job.request_id == cut.request_id:
            utt.drop_speculation()

    # -- utterance lifecycle -------------------------------------------------------------

    def _start(self, event: SegmentStarted, now: float) -> list[Event]:
        events: list[Event] = []
        if self._active is not None:  # a segmenter never does this; be safe anyway
            end = self._active.start + self._active.samples
            events.extend(self._end(SegmentEnded(end, end, 1), now))
        utt = Utterance(id=next(self._ids), start=event.start, started_at=now,
                        speech=event.speech, first=event.start,
                        speech_upto=event.start + len(event.audio) if event.speech else 0)
        utt.append(event.audio, now)
        self._active = utt
        # Each utterance starts its own (first-words) partial cadence, not the last one's.
        self._next_partial_at = min(self._next_partial_at, now)
        if self.writer.committed.upto > utt.start:  # split past a commit by the segmenter
            utt.first = self.writer.committed.upto
            self.writer.trim(utt, now)
        events.append(SpeechStarted(utterance_id=utt.id, at=utt.first))
        return events

    def _end(self, event: SegmentEnded, now: float) -> list[Event]:
        utt = self._active
        if utt is None:
            return []
        self._active = None
        keep = utt.close(event.end, event.speech_end, event.soft, now)
        events: list[Event] = [SpeechEnded(utterance_id=utt.id, at=utt.end)]
        spec = utt.spec
        if event.speech_windows == 0 or keep == 0:
            utt.drop_speculation()
            events.append(final_text(utt, "", (), None, now, None))
        elif spec.issued and usable(
                spec.end, spec.soft, end=utt.end, speech_end=event.speech_end,
                # Cut where the speculation ends (a sentence cut): the speech after it is not
                # this utterance's.
                speech_upto=spec.upto if utt.end <= spec.end else utt.speech_upto,
                ended_soft=utt.soft):
            if spec.has_result:
                assert spec.job is not None and spec.result is not None
                events.extend(self._final_result(spec.job, utt, spec.result, now))
            # else: the speculative decode in flight is the final (on_result)
        else:
            utt.drop_speculation()
            self._finals.append(utt)
        return events

    # -- speculative finals (engine.core.policy.speculation) -----------------------------

    def speculate(self, at: int, soft: bool = False) -> None:
        """Decode the utterance in flight as its final once its audio reaches stream sample
        ``at`` (a push-to-talk release; a VAD pause), before its end is confirmed."""
        utt = self._active
        if utt is None or not self.options.speculative_finals:
            return
        if utt.spec.resumed(utt.speech_upto):
            # One kept for a sentence cut still waits for its verdict: the newer pause takes
            # its place.
            utt.drop_speculation()
        if not utt.spec.issued:
            utt.spec.schedule(at, soft)

    def _reading(self) -> Reading | None:
        """How the speculative final of the pause reads (`Speculation.reading`): "finished" (the
        pause is likely the end), "open" (likely inside a sentence), or None (nothing to tell,
        or its rule is switched off)."""
        reads = self._active.spec.reading(self._active.speech_upto) if self._active else None
        if (reads == "finished" and not self.options.shorten_end_wait) or (
                reads == "open" and not self.options.extend_end_wait):
            return None
        return reads

    def _offer_cut(self) -> None:
        """A `CutAt` hint for the utterance in flight once `Speculation.cut_offer` has one (a
        sentence cut, ``sentence_cut_s``); a speculation it rules out is dropped."""
        utt = self._active
        offer = utt.spec.cut_offer(utt.speech_upto) if utt is not None else None
        if isinstance(offer, CutAt):
            self._hints.append(offer)
        elif offer is False and utt is not None:
            utt.drop_speculation()

    def _final_in_flight(self) -> bool:
        return any(job.kind is JobKind.FINAL and (not job.speculative or job is utt.spec.job)
                   for job, utt in self._in_flight.values())

    def _speculation_due(self, utt: Utterance) -> bool:
        return (utt.speech and utt.spec.decode_due(utt.speech_upto, utt.start + utt.samples)
                and not self._finals and not self._final_in_flight())

    def _speculative_request(self, utt: Utterance, now: float) -> Job:
        # Exactly the audio up to the pause: a block that brought more with it (a network
        # chunk) must not make the decode cover audio past the end the utterance will have.
        samples = min(utt.samples, max(0, utt.spec.at - utt.start))
        utt.soft = utt.spec.soft  # as the segmenter will say at the end (or it is unusable)
        utt.speech_end_at = utt.arrived_at  # provisional, for the lag; _end sets the real one
        job = dataclasses.replace(self._final_request(utt, now, samples), speculative=True)
        self._in_flight[job.request_id] = (job, utt)
        utt.spec.issue(job, utt.speech_upto)
        if self.options.await_reading:
            self._hints.append(AwaitReading())
        return job

    # -- partials ------------------------------------------------------------------------

    def _partial_due(self, utt: Utterance, now: float) -> bool:
        return partials.due(self.options, utt, now, next_at=self._next_partial_at,
                            verdict_due=utt.spec.verdict_due(utt.speech_upto,
                                                             utt.start + utt.samples),
                            decoding=any(u is utt for _, u in self._in_flight.values()),
                            in_flight=len(self._in_flight),
                            final_in_flight=self._final_in_flight())

    def _partial_request(self, utt: Utterance, now: float) -> Job:
        o = self.options
        if o.commit_stable:
            self.writer.trim(utt, now)  # (a window that grew without commits)
        utt.partial_samples = utt.samples
        vocabulary, prompt = self._context(
            utt, max(1, int(PROMPT_CHARS_PER_S * utt.samples / SAMPLE_RATE)), now,
            prompt=o.commit_stable)  # (only a partial that commits words takes the prompt)
        return self._issue(utt, JobKind.PARTIAL,
                           partials.plan(o, utt.samples, prompt=prompt, vocabulary=vocabulary),
                           now)

    def _partial_result(self, request: Job, utt: Utterance, transcript: Transcript,
                        now: float) -> list[Event]:
        o = self.options
        if utt is not self._active:
            # The utterance ended meanwhile; its final supersedes this. It says nothing about
            # when the next utterance's partials may come (that one starts its own cadence).
            return []
        kept = partials.shown(o, request, transcript)
        if request.options.word_timestamps and (not kept or any(s.words for s in kept)):
            # Committing early (a runner that gives no word times commits nothing early).
            # Finals come out in the order spoken: none after an earlier one still to come.
            held = bool(self._finals) or any(job.kind is JobKind.FINAL and u is not utt
                                             for job, u in self._in_flight.values())
            events = self.writer.commit(utt, request, kept, transcript.language, now, held=held,
                                        end_hold_s=o.commit_end_hold_s)
        else:
            events = [utt.partial_text(" ".join(s.text for s in kept), end_of(request))]
        # No words yet: the first-words cadence, as for a new utterance.
        self._next_partial_at = partials.next_at(o, request, now, self.lag.backoff,
                                                 heard=bool(utt.heard.strip()))
        return events

    # -- finals (engine.core.policy.finals, .retries) ------------------------------------

    def _final_request(self, utt: Utterance, now: float, samples: int | None = None) -> Job:
        o = self.options
        utt.attempts += 1
        seconds = (utt.samples if samples is None else samples) / SAMPLE_RATE
        retry, utt.retry = utt.retry, None
        vocabulary, prompt = (None, None) if retry is Retry.REPLAY else self._context(
            utt, max(1, int(PROMPT_CHARS_PER_S * seconds)), now)
        options = finals.plan(o, retry, first=utt.attempts == 1, seconds=seconds,
                              soft=utt.soft, behind=bool(self._finals), prompt=prompt,
                              vocabulary=vocabulary)
        return self._issue(utt, JobKind.FINAL, options, now, arrived_at=utt.speech_end_at,
                           samples=samples)

    def _final_result(self, request: Job, utt: Utterance, transcript: Transcript,
                      now: float) -> list[Event]:
        o = self.options
        judged = self._judge(request, utt, transcript)
        if utt.earlier is not None:  # a retry that competes with the decode before it
            earlier, utt.earlier = utt.earlier, None
            judged = finals.choose(self._judge(earlier[0], utt, earlier[1]), judged)
        request, transcript = judged.request, judged.transcript
        words, text = self.writer.final_words(judged.kept, request, utt)
        retry = finals.next_retry(
            o, judged, decodes=utt.attempts, tried=utt.tried,
            # (Committing early, the final holds only the words not committed yet: fewer.)
            dropped=finals.dropped(text, utt, request, DROPPED_MIN_WORDS // (
                2 if o.commit_stable else 1)))
        if retry is not None:
            log.debug("final of utterance %d (%d words): retry %s", utt.id, len(text.split()),
                      retry.value)
            utt.plan_retry(retry, (request, transcript) if rule(retry).keeps == "best" else None)
            self._finals.appendleft(utt)
            return []
        flags = finals.quality_flags(judged, o.quality)
        return [self.writer.final(utt, text, words, request, flags, transcript.language, now,
                                  end_sentence=o.end_sentences)]

    def _judge(self, request: Job, utt: Utterance, transcript: Transcript) -> Judged:
        return finals.judge(self.options, request, transcript, soft=utt.soft,
                            speech_end=utt.speech_end, decodes=utt.attempts,
                            behind=bool(self._finals))

    # -- shared --------------------------------------------------------------------------

    def _context(self, utt: Utterance, room: int, now: float, prompt: bool = True
                 ) -> tuple[str | None, str | None]:
        """The vocabulary and the prompt for a decode of ``utt`` within ``room`` characters (in
        proportion to the audio: CTranslate2 crashes when a short window's prompt does not
        fit). The vocabulary, terms like something already heard first, takes its share
        first; audio the VAD doubted gets no style prompt, which would talk it into words."""
        terms = hotwords.by_relevance(self.vocabulary, utt.heard) if utt.heard else self.vocabulary
        vocabulary, left = hotwords.share(terms, room)
        return vocabulary, (self.prompt.prompt(now, left, anchor=not utt.soft)
                            if prompt and left is not None else None)

    def _issue(self, utt: Utterance, kind: JobKind, options: DecodeOptions, now: float,
               arrived_at: float | None = None, samples: int | None = None) -> Job:
        """A job decoding ``utt``'s audio (its first ``samples``; None: all of it)."""
        request = Job(
            request_id=self._next_request, utterance_id=utt.id, kind=kind, start=utt.start,
            issued_at=now, audio_arrived_at=utt.arrived_at if arrived_at is None else arrived_at,
            request=DecodeRequest(audio=utt.audio()[:samples].copy(), options=options,
                                  padding=self.options.padding),
        )
        self._next_request += 1
        self._in_flight[request.request_id] = (request, utt)
        return request
