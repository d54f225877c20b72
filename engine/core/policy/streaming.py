"""The streaming policy: when to decode what, and which events to emit (sans-I/O).

One `StreamingPolicy` per audio stream (the desktop engine has one; the server runs one per
session). It never decodes, sleeps or reads a clock: the caller passes ``now`` (seconds on any
monotonic clock, real or simulated) to every call.

    caller                                   policy
    segmenter events (SegmentStarted...) --> handle(event, now)       -> [Event]
    "my worker is free"                  --> next_request(now)        -> Job | None
    decode finished                      --> on_result(id, transcript, now) -> [Event]
    decode failed                        --> on_failure(id, message, now)   -> [Event]

Scheduling: the caller asks for work only when it can run it, and the policy keeps at most
``max_in_flight`` requests out, so decode work never queues up behind a slow machine. Finals
go first (oldest first); partials re-decode the whole growing utterance, no sooner than
``partial_interval_s`` and ``busy_factor`` x the last partial's round trip after the previous
one, so a slow machine decodes less often instead of drifting. When a result arrives more than
``max_lag_s`` after its newest audio, the partial interval doubles (and halves back when the
lag recovers) and finals are decoded greedily while others wait; the lag is reported in every
`Metrics` event.

The package, by job: `options` (PolicyOptions, the rule switches `RULES`), `job` and
`utterance` (a decode job, the utterance's state), `speculation` (the speculative final: a state
object with an enum), `commit` (committing early: the utterance's and the stream's state
objects), `partials` and `finals` (planning and judging decodes: pure functions) with `retries`
(every retry of a final in one table), `hints` (what the policy tells the segmenter, as events)
and this module, which schedules partials and finals and ties the rest together.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections import deque

from engine.core import hotwords
from engine.core.agreement import tokens
from engine.core.form import OpenSentence, ensure_form, reads_finished, reads_open
from engine.core.policy import finals, partials
from engine.core.policy.finals import (
    DROPPED_MIN_WORDS,
    PROMPT_CHARS_PER_S,
    Judged,
    final_text,
    segment_flags,
    speech_segments,
)
from engine.core.policy.hints import AwaitReading, CutAt, Hint, PauseReads
from engine.core.policy.job import Job, JobKind, end_of, placed, text_of
from engine.core.policy.options import PolicyOptions
from engine.core.policy.pieces import Committer
from engine.core.policy.retries import Retry, rule
from engine.core.policy.speculation import Reading, SpecState, usable
from engine.core.policy.utterance import Utterance
from engine.core.prompt import PromptTracker
from engine.core.segmenter import (
    SegmentAudio,
    SegmentEnded,
    SegmentEvent,
    SegmentPaused,
    SegmentStarted,
)
from engine.events import (
    EngineFailed,
    Event,
    Metrics,
    PartialText,
    SpeechEnded,
    SpeechStarted,
)
from engine.types import (
    SAMPLE_RATE,
    Audio,
    DecodeOptions,
    DecodeRequest,
    Segment,
    Transcript,
)

log = logging.getLogger(__name__)

MAX_BACKOFF = 8.0  # the most times the base partial interval a lagging stream waits


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
        self._backoff = 1.0
        self.last_lag_ms = 0.0
        # The next final may go on with a sentence the last one left open: within the
        # prompt's memory, as the prompt carries that sentence.
        self._open = OpenSentence(int(self.options.prompt.reset_after_s * SAMPLE_RATE))
        self.committer = Committer(self.prompt, self._open, lambda: next(self._ids))

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
        return self._backoff

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
                self._append(self._active, event.audio, now)
                if event.speech:
                    self._speech_heard(self._active)
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
            self._track_lag(lag)
        metrics = Metrics(
            chunk_rtt_ms=(now - request.issued_at) * 1000, decode_ms=transcript.decode_ms,
            network_ms=None, lag_ms=lag * 1000,
            rtf=transcript.decode_ms / 1000 / max(len(request.audio) / SAMPLE_RATE, 1e-3),
            dropped_frames=0, kind=request.kind.value,
        )
        if request.kind is JobKind.PARTIAL:
            events = [metrics, *self._partial_result(request, utt, transcript, now)]
        else:
            utt.decoded_at, utt.decode_ms = now, transcript.decode_ms
            if utt is self._active:  # speculative, the end not confirmed yet: keep it till then
                # Read once: a speculation kept for a sentence cut is asked on every window.
                text = " ".join(s.text for s in speech_segments(
                    transcript.segments, self.options.quality)).strip()
                utt.spec.store_result(transcript, text, "finished" if reads_finished(text)
                                      else "open" if reads_open(text) else None)
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
                self._drop_speculation(utt)
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
            self._drop_speculation(utt)

    # -- utterance lifecycle -------------------------------------------------------------

    def _start(self, event: SegmentStarted, now: float) -> list[Event]:
        events: list[Event] = []
        if self._active is not None:  # a segmenter never does this; be safe anyway
            end = self._active.start + self._active.samples
            events.extend(self._end(SegmentEnded(end, end, 1), now))
        utt = Utterance(id=next(self._ids), start=event.start, started_at=now,
                        speech=event.speech, first=event.start,
                        speech_upto=event.start + len(event.audio) if event.speech else 0)
        self._append(utt, event.audio, now)
        self._active = utt
        # Each utterance starts its own partial cadence (the first-words one): the spacing
        # of the previous utterance's partials is not this one's wait.
        self._next_partial_at = min(self._next_partial_at, now)
        if self.committer.committed.upto > utt.start:  # the segmenter split its utterance past a commit
            utt.first = self.committer.committed.upto
            self.committer.trim(utt, now)
        events.append(SpeechStarted(utterance_id=utt.id, at=utt.first))
        return events

    def _append(self, utt: Utterance, audio: Audio, now: float) -> None:
        if len(audio):
            utt.chunks.append(audio)
            utt.samples += len(audio)
            utt.arrived_at = now

    def _end(self, event: SegmentEnded, now: float) -> list[Event]:
        utt = self._active
        if utt is None:
            return []
        self._active = None
        utt.ended_at = now
        # Samples after the speech end had already arrived when the segmenter decided the
        # utterance was over (the min-silence wait); latency is measured from the speech end.
        received_after = max(0, utt.start + utt.samples - event.speech_end)
        utt.speech_end_at = now - received_after / SAMPLE_RATE
        utt.speech_end = event.speech_end
        utt.soft = event.soft
        keep = max(0, min(utt.samples, event.end - utt.start))
        utt.chunks = [utt.audio()[:keep]]
        utt.samples = keep
        utt.end = utt.start + keep
        events: list[Event] = [SpeechEnded(utterance_id=utt.id, at=utt.end)]
        spec = utt.spec
        if event.speech_windows == 0 or keep == 0:
            self._drop_speculation(utt)
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
            self._drop_speculation(utt)
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
            self._drop_speculation(utt)
        if not utt.spec.issued:
            utt.spec.schedule(at, soft)

    def _reading(self) -> Reading | None:
        """How the speculative final of the utterance in flight reads, once it is back and
        speech has not resumed since: "finished" (a finished sentence: the pause is likely the
        end), "open" (it goes on: the pause is likely inside a sentence), or None (no text,
        nothing to tell); None too for a rule switched off."""
        reads = self._active.spec.reading(self._active.speech_upto) if self._active else None
        if (reads == "finished" and not self.options.shorten_end_wait) or (
                reads == "open" and not self.options.extend_end_wait):
            return None
        return reads

    def _offer_cut(self) -> None:
        """A long utterance in flight may end where its speculative final ends although speech
        went on (``sentence_cut_s``): once that is back, reads as a finished sentence, speech
        has resumed after it and a partial that heard past it ends a sentence there too
        (`Speculation.judge_cut`): a `CutAt` hint. A speculation that reads otherwise is dropped
        here, so partials go on."""
        utt = self._active
        if utt is None or not utt.spec.has_result or not utt.spec.resumed(utt.speech_upto):
            return
        spec = utt.spec
        if spec.reads != "finished":
            self._drop_speculation(utt)
        elif spec.state is SpecState.CONFIRMED:
            assert spec.job is not None
            self._hints.append(CutAt(spec.end, spec.upto, spec.job.request_id))

    def _speech_heard(self, utt: Utterance) -> None:
        """A window of speech was appended: a speculation of the audio before it is stale,
        unless it may still mark a sentence end to cut a long utterance at (`_offer_cut`)."""
        utt.speech_upto = utt.start + utt.samples
        spec = utt.spec
        if spec.state is SpecState.DUE and spec.at < utt.speech_upto:
            spec.drop()  # its pause is over before its decode could start
        if spec.issued and not (self._may_cut(utt)
                                and (not spec.has_result or spec.reads == "finished")):
            self._drop_speculation(utt)

    def _may_cut(self, utt: Utterance) -> bool:
        o, spec = self.options, utt.spec
        return (o.sentence_cut_s > 0 and not o.commit_stable and not spec.soft
                and spec.job is not None and len(spec.job.audio) >= o.sentence_cut_s * SAMPLE_RATE)

    def _drop_speculation(self, utt: Utterance) -> None:
        # Its job may still be decoding; on_result ignores it (it is no longer utt.spec.job).
        if utt.spec.issued:
            utt.attempts, utt.retry, utt.tried = 0, None, []
        utt.spec.drop()

    def _final_in_flight(self) -> bool:
        return any(job.kind is JobKind.FINAL and (not job.speculative or job is utt.spec.job)
                   for job, utt in self._in_flight.values())

    def _speculation_due(self, utt: Utterance) -> bool:
        spec = utt.spec
        # (Speech already past the cut: that decode could never stand, `usable`.)
        return (spec.state is SpecState.DUE and utt.speech and utt.speech_upto <= spec.at
                and utt.start + utt.samples >= spec.at and not self._finals
                and not self._final_in_flight())

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
            self.committer.trim(utt, now)  # (a window that grew without commits)
        utt.partial_samples = utt.samples
        room = max(1, int(PROMPT_CHARS_PER_S * utt.samples / SAMPLE_RATE))
        vocabulary, left = hotwords.share(self._terms(utt), room)
        prompt = (self.prompt.prompt(now, left, anchor=not utt.soft)
                  if o.commit_stable and left is not None else None)
        return self._issue(utt, JobKind.PARTIAL, partials.plan(o, utt.samples, prompt=prompt,
                                                         vocabulary=vocabulary), now)

    def _partial_result(self, request: Job, utt: Utterance, transcript: Transcript,
                        now: float) -> list[Event]:
        o = self.options
        if utt is not self._active:
            # The utterance ended meanwhile; its final supersedes this. It says nothing about
            # when the next utterance's partials may come (that one starts its own cadence).
            return []
        self._next_partial_at = partials.next_at(o, request, now, self._backoff, heard=True)
        kept = partials.shown(o, request, transcript)
        # Committing early (commit_stable), from the words' times (a runner that gives none:
        # nothing is committed early).
        if request.options.word_timestamps and (not kept or any(s.words for s in kept)):
            return self._commit(utt, request, kept, transcript.language, now)
        text = " ".join(s.text for s in kept)
        if not utt.spec.judge_cut(end_of(request), text):
            self._drop_speculation(utt)
        committed, tentative = utt.agreement.update(tokens(text))
        utt.heard = f"{committed} {tentative}"
        utt.heard_upto = end_of(request)
        if not utt.heard.strip():
            self._next_partial_at = partials.next_at(o, request, now, self._backoff, heard=False)
        return [PartialText(utterance_id=utt.id, committed=committed, tentative=tentative,
                            start=utt.start)]

    def _commit(self, utt: Utterance, request: Job, kept: list[Segment], language: str | None,
                now: float) -> list[Event]:
        # Finals come out in the order spoken: nothing after an earlier utterance's final
        # still to come is final.
        held = bool(self._finals) or any(job.kind is JobKind.FINAL and u is not utt
                                         for job, u in self._in_flight.values())
        events = self.committer.commit(utt, request, kept, language, now, held=held)
        if not utt.heard:  # the first-words cadence, as for a new utterance
            self._next_partial_at = partials.next_at(self.options, request, now,
                                                     self._backoff, heard=False)
        return events

    # -- finals (engine.core.policy.finals, .retries) ------------------------------------

    def _final_request(self, utt: Utterance, now: float, samples: int | None = None) -> Job:
        o = self.options
        utt.attempts += 1
        seconds = (utt.samples if samples is None else samples) / SAMPLE_RATE
        retry, utt.retry = utt.retry, None
        prompt = vocabulary = None
        if retry is not Retry.REPLAY:
            # A short window has a small token budget, and CTranslate2 crashes when the prompt
            # does not fit in it: keep the prompt in proportion to the audio. The vocabulary
            # takes its share of that room first. No style prompt for audio the VAD doubted
            # (a hum): it would talk Whisper into words.
            vocabulary, left = hotwords.share(self._terms(utt),
                                              max(1, int(PROMPT_CHARS_PER_S * seconds)))
            prompt = self.prompt.prompt(now, left, anchor=not utt.soft) \
                if left is not None else None
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
        request, transcript, kept = judged.request, judged.transcript, judged.kept
        words_of = placed(kept, request, upto=utt.end)
        beyond = self.committer.committed.words_not_yet_committed(words_of, request.start, utt.first)
        text = (text_of(beyond) if len(beyond) < sum(len(s.words) for s in kept)
                else "".join(s.text for s in kept).strip())  # (none committed early)
        # A piece that goes on with the sentence the last final left open starts in lower
        # case: not a letter to capitalise.
        goes_on = self._open.goes_on(utt.first)
        retry = finals.next_retry(
            o, judged, decodes=utt.attempts, tried=utt.tried,
            # (Committing early, the final holds only the words not committed yet: fewer.)
            dropped=finals.dropped(text, utt, request, DROPPED_MIN_WORDS // (
                2 if o.commit_stable else 1)))
        if retry is not None:
            log.debug("final of utterance %d (%d words): retry %s", utt.id, len(text.split()),
                      retry.value)
            utt.retry = retry
            utt.tried.append(retry)
            if rule(retry).keeps == "best":
                utt.earlier = (request, transcript)
            self._finals.appendleft(utt)
            return []
        words = tuple(beyond)
        # "low_confidence" only chooses the beam rung: it neither marks the text nor keeps it
        # out of the prompt (the old rule; the beam decode was its remedy).
        quality = tuple(sorted((set(judged.flags)
                                | {f for s in kept for f in segment_flags(s, o.quality)})
                               - {"low_confidence"}))
        # The prompt takes Whisper's text only if it kept its form (engine.core.prompt); the
        # user always gets a capitalised, ended sentence (engine.core.form).
        self.committer.prompt_upto(utt.first, now)  # (what it committed early goes first)
        self.prompt.add(text, at=now, flags=quality, language=transcript.language,
                        goes_on=goes_on)
        text, words = ensure_form(text, words, end=o.end_sentences, start=not goes_on)
        self._open.ended(text, utt.end)
        return [final_text(utt, text, words, request, now, transcript.language)]

    def _judge(self, request: Job, utt: Utterance, transcript: Transcript) -> Judged:
        return finals.judge(self.options, request, transcript, soft=utt.soft,
                            speech_end=utt.speech_end, decodes=utt.attempts,
                            behind=bool(self._finals))

    # -- shared --------------------------------------------------------------------------

    def _terms(self, utt: Utterance) -> tuple[str, ...]:
        """The vocabulary, terms like something already heard in ``utt`` first."""
        return hotwords.by_relevance(self.vocabulary, utt.heard) if utt.heard else self.vocabulary

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

    def _track_lag(self, lag: float) -> None:
        self.last_lag_ms = lag * 1000
        if lag > self.options.max_lag_s:
            self._backoff = min(MAX_BACKOFF, self._backoff * 2)
        elif lag < self.options.max_lag_s / 2:
            self._backoff = max(1.0, self._backoff / 2)


