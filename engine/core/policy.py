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
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from engine.core import hotwords, ladder
from engine.core.agreement import LocalAgreement, common_prefix, comparable, tokens
from engine.core.form import (
    OpenSentence,
    ends_marked,
    ends_sentence_in,
    ensure_form,
    has_form,
    reads_finished,
    reads_open,
    starts_lower,
)
from engine.core.ladder import LIVE, LOOP_FLAGS, QualityThresholds, Rung, word_loop
from engine.core.prompt import PromptOptions, PromptTracker
from engine.core.segmenter import (
    SegmentAudio,
    SegmentEnded,
    SegmentEvent,
    SegmentPaused,
    SegmentStarted,
)
from engine.core.speculation import usable
from engine.events import (
    EngineFailed,
    Event,
    FinalText,
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
    ModelInfo,
    Segment,
    Transcript,
    Word,
)

log = logging.getLogger(__name__)

EARLY_END_S = 0.8  # the last word ending this long before the speech did: words were dropped
# A final missing this many different words the utterance's last partial heard in part of the
# same audio, with under DROPPED_SHARE of the partial's word count, dropped words (`_dropped`).
DROPPED_MIN_WORDS = 6
DROPPED_SHARE = 0.75
# A partial that heard this much past a sentence cut's pause without saying whether a sentence
# ends there (take_cut): the cut is given up. One that heard less than CUT_HEARD_S past it
# cannot tell yet (no word after the pause), so the verdict's partial waits for that much.
CUT_VERDICT_S = 4.0
CUT_HEARD_S = 0.5
PROMPT_CHARS_PER_S = 40  # about 10 tokens per second of audio
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
# reading (one run each, bench/streaming.py) 5.8 % WER instead of 7.2 % (offline 4.7 %), the
# word lag's median unchanged (1.2 s on a loaded machine).
COMMIT_MIN_PROB = 0.5
COMMIT_UNSURE_S = 2.0  # ... and waits no longer than this (a reading that flips back and forth)
_ABBREVIATION = re.compile(r"[A-Z][a-z]{0,2}\.")
COMMIT_KEEP = 100  # committed words remembered (a window's, and the repeat check's)
MAX_BACKOFF = 8.0


@dataclass(frozen=True)
class PolicyOptions:
    language: str | None = None
    # Auto-detection (language None) chooses among these only (DecodeOptions.languages);
    # `StreamingPolicy.set_language` changes both while running.
    languages: tuple[str, ...] = ()
    task: str = "transcribe"
    partials: bool = True
    min_partial_audio_s: float = 0.7
    partial_interval_s: float = 0.4
    min_new_audio_s: float = 0.2
    # Until the first words show, a partial is tried again once this much more audio is in
    # (a decode of under a second of audio takes ~40 ms here), so the first words appear
    # about when Whisper can first read them.
    first_words_step_s: float = 0.1
    busy_factor: float = 2.0
    max_lag_s: float = 1.5
    max_in_flight: int = 1
    partial_beam_size: int = 1
    # Greedy finals up to greedy_final_max_s: on the 26 English clips (bench/streaming.py,
    # tiny.en int8, 2-core CPU) beam 1/2/3/5 on every final gave 45/49/47/45 errors in 415
    # words, and a greedy 2-5 s final takes 0.58x the time of a beam-5 one (interleaved).
    # Longer finals (beam 5 there: 42 errors), retries of a final that failed a loop check and
    # soft utterances (rare, and the hard cases) take careful_beam_size.
    final_beam_size: int = 1
    greedy_final_max_s: float = 5.0
    careful_beam_size: int = 5
    # One sampled fallback, not faster-whisper's six: a long fallback chain costs seconds, and
    # a looping final is retried by this policy anyway (padded window, no prompt).
    final_temperatures: tuple[float, ...] = (0.0, 0.4)
    short_context: bool = True
    # Longer utterances take the padded window: it costs at most ~2x there, and a long short
    # window is where the fast path hallucinates most.
    short_context_max_s: float = 10.0
    retry_on_loop: bool = True
    # How a decode on the padded 30 s window (a fallback or retry of a final) encodes the window
    # after the audio (`DecodeRequest.padding`). "silence" cut those decodes from 550-950 ms to
    # ~150-300 ms here (bench/streaming.py --padding, one sitting: p95 of 2-5 s finals 309 vs
    # 755 ms, of end of speech -> final 1239 vs 1902 ms) for one word more wrong in 415 (42 vs
    # 41 errors; the padded-path clips alone, 9.6 vs 9.4 %): quality first, so "encoded".
    padding: Literal["encoded", "silence"] = "encoded"
    # Decode the final while the end is still being confirmed (engine.core.speculation).
    speculative_finals: bool = True
    # A long utterance ends at a sentence end even when the speaker goes on after a short
    # pause: once its speculative final covers this much audio, speech resuming does not throw
    # that decode away; if it reads as a finished sentence and the next partial, which heard
    # what followed, ends a sentence there too (Whisper ends any audio it is given with a
    # period; with the words after the pause it punctuates it as the sentence reads), the
    # utterance is cut where it paused (`take_cut`; the stream core does this in VAD mode
    # only) and the rest starts the next one. A fluent speaker pauses 100-450 ms between
    # sentences, under the 500 ms that ends an utterance: without this, their utterances ran to
    # the segmenter's 30 s limit, were split mid-sentence ("... in fourteen fifty-five. Has
    # never been surpassed"), their finals came 6-15 s after the words, and every partial past
    # 10 s took the padded window. 0: off.
    sentence_cut_s: float = 8.0
    # Continuous speech (a lecture, a video, a meeting rarely pauses for 500 ms): words are
    # made final while their utterance is still being spoken, once two successive partials
    # agree on them and on every word before them (LocalAgreement-2, as whisper_streaming;
    # three for a word of probability under COMMIT_MIN_PROB; never a number last, nor while
    # an earlier utterance's final is still to come: `_commit`).
    # Partials then ask for word times and take the prompt a final would; the agreed words
    # are emitted as the final of a piece of the utterance (SpeechEnded, FinalText; its text
    # joins the prompt), the rest goes on as the next utterance (SpeechStarted, a new id)
    # whose decodes start at the sentence the commit point is in (COMMIT_WINDOW_S) and never
    # repeat a committed word (`_beyond`); the finals' prompt gets the committed text that
    # leaves the window. A word said again and again is left to the final (`word_loop`).
    # Replaces the sentence cut. The stream core turns it off in push-to-talk, whose text
    # lands at the release. Off by default (dictation: its text lands when the utterance
    # ends); captions turn it on (app.captions) and show the pieces of a sentence as one
    # line (engine.core.captions.continues). `bench/streaming.py --commit` measures it.
    commit_stable: bool = False
    # An utterance only the segmenter's soft path heard (energy and a weak VAD score) keeps
    # a decoded segment only if the model agrees there is speech: no-speech probability below
    # this, whatever its log-probability (falsetto scores 0.2-0.4, a cough or a door higher).
    soft_no_speech: float = 0.5
    # The user's vocabulary (names, jargon) every decode is biased towards, in priority order
    # (`engine.core.hotwords`); `StreamingPolicy.set_vocabulary` changes it while running.
    vocabulary: tuple[str, ...] = ()
    prompt: PromptOptions = field(default_factory=PromptOptions)
    # A final ends its sentence (engine.core.form): push-to-talk yes (one dictation, one
    # sentence or more), VAD no (set by the stream core: it cuts sentences at pauses).
    end_sentences: bool = True
    quality: QualityThresholds = field(default_factory=QualityThresholds)

    def for_model(self, info: ModelInfo) -> PolicyOptions:
        """These options for a model: an English-only model's language is English (known from
        the start, so even the first final gets the English style prompt)."""
        if self.language is None and not info.multilingual:
            return dataclasses.replace(self, language="en")
        return self

    def __post_init__(self) -> None:
        if min(self.min_partial_audio_s, self.partial_interval_s, self.min_new_audio_s,
               self.first_words_step_s) < 0:
            raise ValueError("partial timings must be >= 0")
        if self.busy_factor < 1.0:
            raise ValueError("busy_factor must be >= 1 (a worker cannot be more than fully busy)")
        if self.max_lag_s <= 0 or self.max_in_flight < 1:
            raise ValueError("max_lag_s must be > 0 and max_in_flight >= 1")
        if not 0.0 < self.soft_no_speech <= 1.0:
            raise ValueError("soft_no_speech must be within (0, 1]")
        # DecodeOptions validates language, task and beam sizes.
        DecodeOptions(language=self.language, task=self.task, beam_size=self.partial_beam_size)
        if self.greedy_final_max_s < 0 or self.sentence_cut_s < 0:
            raise ValueError("greedy_final_max_s and sentence_cut_s must be >= 0")
        for beam_size in (self.final_beam_size, self.careful_beam_size):
            DecodeOptions(language=self.language, task=self.task, beam_size=beam_size,
                          temperatures=self.final_temperatures)


@dataclass(frozen=True)
class Job:
    """One piece of decode work of a stream: the `DecodeRequest` a runner decodes, and what the
    stream needs to place its result. ``start`` is the stream sample of ``request.audio[0]``;
    word times in the result are relative to it. ``audio_arrived_at`` is when its newest sample
    arrived."""

    request_id: int
    utterance_id: int
    kind: str  # "partial" | "final"
    start: int
    issued_at: float
    audio_arrived_at: float
    request: DecodeRequest
    speculative: bool = False  # a final decoded before its utterance is known to have ended

    @property
    def audio(self) -> Audio:
        return self.request.audio

    @property
    def options(self) -> DecodeOptions:
        return self.request.options


@dataclass
class _Utterance:
    id: int
    start: int
    started_at: float
    chunks: list[Audio] = field(default_factory=list)
    samples: int = 0
    arrived_at: float = 0.0  # when the newest sample arrived
    partial_samples: int = 0  # audio length at the last partial request
    agreement: LocalAgreement = field(default_factory=LocalAgreement)
    speech: bool = False  # any speech heard yet (a ptt press may start on silence)
    end: int = 0
    speech_end_at: float = 0.0
    speech_end: int = 0  # session sample where the last speech window ended
    attempts: int = 0
    retry: Rung = Rung.ACCEPT  # the quality ladder's rung for the next final attempt
    restyle: bool = False  # the next attempt is the style retry (see _final_result)
    soft: bool = False  # only the segmenter's soft path heard speech (see soft_no_speech)
    heard: str = ""  # the latest partial's text: which vocabulary terms go first
    heard_upto: int = 0  # ... and the stream sample after the audio it decoded (`_dropped`)
    replay: bool = False  # the next attempt decodes as the partials do (see _final_result)
    replayed: bool = False
    skipping: tuple[Job, Transcript] | None = None  # the final that dropped words, meanwhile
    speech_upto: int = 0  # stream sample after the last audio a window called speech
    ended_at: float = 0.0  # when the segmenter (or a flush) closed it
    spec_at: int | None = None  # speculate once the audio reaches this sample
    spec_soft: bool = False
    spec: Job | None = None  # the speculative final that may stand for the final
    spec_result: Transcript | None = None  # ... once it is back, before the utterance ended
    spec_upto: int = 0  # speech_upto when it was issued (speech may resume after it: take_cut)
    spec_confirmed: bool = False  # a partial past its pause ends a sentence there (take_cut)
    spec_text: str = ""  # spec_result's spoken text, and how it reads (`reading`)
    spec_reads: Literal["finished", "open"] | None = None
    decoded_at: float = 0.0  # when the result its final is made of came back
    decode_ms: float = 0.0
    # Committing early (PolicyOptions.commit_stable): where this utterance's own words begin
    # (``start``, or the end of the words committed before it: its audio may start earlier,
    # COMMIT_WINDOW_S), and the last partial's words past the committed ones (LocalAgreement-2).
    first: int = 0
    hypothesis: list[Word] = field(default_factory=list)
    earlier: list[Word] = field(default_factory=list)  # ... and the one before it

    def audio(self) -> Audio:
        if not self.chunks:
            return np.zeros(0, dtype=np.float32)
        if len(self.chunks) > 1:
            self.chunks = [np.concatenate(self.chunks)]
        return self.chunks[0]


class StreamingPolicy:
    """See the module docstring. Not thread-safe: call from one thread (or under one lock)."""

    def __init__(self, options: PolicyOptions | None = None) -> None:
        self.options = options or PolicyOptions()
        self.prompt = PromptTracker(self.options.prompt, language=self.options.language)
        self.vocabulary = self.options.vocabulary
        self._active: _Utterance | None = None
        self._finals: deque[_Utterance] = deque()
        self._in_flight: dict[int, tuple[Job, _Utterance]] = {}
        self._next_utterance = 1
        self._next_request = 1
        self._next_partial_at = 0.0
        self._backoff = 1.0
        self.last_lag_ms = 0.0
        # The next final may go on with a sentence the last one left open: within the
        # prompt's memory, as the prompt carries that sentence.
        self._open = OpenSentence(int(self.options.prompt.reset_after_s * SAMPLE_RATE))
        # Committing early: the end of the last word committed, the last words committed,
        # their language, and up to where they have gone to the prompt.
        self._committed = 0
        self._said: list[Word] = []
        self._said_language: str | None = None
        self._prompted = 0

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

    def handle(self, event: SegmentEvent, now: float) -> list[Event]:
        """Feed one segmenter event."""
        if isinstance(event, SegmentStarted):
            return self._start(event, now)
        if isinstance(event, SegmentAudio):
            if self._active is not None:
                self._active.speech |= event.speech
                self._append(self._active, event.audio, now)
                if event.speech:
                    self._spoke(self._active)
            return []
        if isinstance(event, SegmentPaused):
            if self._active is not None:
                self.speculate(event.at, soft=event.soft)
            return []
        return self._end(event, now)

    def handle_all(self, events: list[SegmentEvent], now: float) -> list[Event]:
        out: list[Event] = []
        for event in events:
            out.extend(self.handle(event, now))
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
        if request.speculative and request is not utt.spec:
            return []  # speech resumed after the audio it decoded: thrown away
        lag = max(0.0, now - request.audio_arrived_at)
        self._track_lag(lag)
        metrics = Metrics(
            chunk_rtt_ms=(now - request.issued_at) * 1000, decode_ms=transcript.decode_ms,
            network_ms=None, lag_ms=lag * 1000,
            rtf=transcript.decode_ms / 1000 / max(len(request.audio) / SAMPLE_RATE, 1e-3),
            dropped_frames=0, kind=request.kind,
        )
        if request.kind == "partial":
            return [metrics, *self._partial_result(request, utt, transcript, now)]
        utt.decoded_at, utt.decode_ms = now, transcript.decode_ms
        if utt is self._active:  # speculative, the end not confirmed yet: keep it till then
            utt.spec_result = transcript
            # Read once: a speculation kept for a sentence cut is asked on every window.
            utt.spec_text = " ".join(
                s.text for s in _spoken(transcript.segments, self.options.quality)).strip()
            utt.spec_reads = ("finished" if reads_finished(utt.spec_text)
                              else "open" if reads_open(utt.spec_text) else None)
            return [metrics]
        return [metrics, *self._final_result(request, utt, transcript, now)]

    def on_failure(self, request_id: int, message: str, now: float) -> list[Event]:
        """A decode raised: report it; a failed final closes its utterance with empty text."""
        entry = self._in_flight.pop(request_id, None)
        if entry is None:
            return []
        request, utt = entry
        events: list[Event] = [EngineFailed(f"decode failed: {message}", recoverable=True)]
        utt.decoded_at, utt.decode_ms = now, 0.0
        if request.speculative:
            if request is utt.spec:
                self._drop_speculation(utt)
                if utt is not self._active:  # it had ended: decode its final the usual way
                    self._finals.append(utt)
            return events
        if request.kind == "final":
            events.append(self._final_text(utt, "", (), request, now, None))
        return events

    def cancel(self) -> None:
        """Forget everything in flight or pending (a client's "cancel"); emits nothing."""
        self._active = None
        self._finals.clear()
        self._in_flight.clear()

    # -- utterance lifecycle -------------------------------------------------------------

    def _start(self, event: SegmentStarted, now: float) -> list[Event]:
        events: list[Event] = []
        if self._active is not None:  # a segmenter never does this; be safe anyway
            end = self._active.start + self._active.samples
            events.extend(self._end(SegmentEnded(end, end, 1), now))
        utt = _Utterance(id=self._next_utterance, start=event.start, started_at=now,
                         speech=event.speech, first=event.start,
                         speech_upto=event.start + len(event.audio) if event.speech else 0)
        self._next_utterance += 1
        self._append(utt, event.audio, now)
        self._active = utt
        if self._committed > utt.start:  # the segmenter split its utterance past a commit
            utt.first = self._committed
            self._trim(utt, now)
        events.append(SpeechStarted(utterance_id=utt.id, at=utt.first))
        return events

    def _append(self, utt: _Utterance, audio: Audio, now: float) -> None:
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
        if event.speech_windows == 0 or keep == 0:
            self._drop_speculation(utt)
            events.append(self._final_text(utt, "", (), None, now, None))
        elif utt.spec is not None and usable(
                _end_of(utt.spec), utt.spec_soft, end=utt.end, speech_end=event.speech_end,
                # Cut where the speculation ends (take_cut): the speech after it is not this
                # utterance's.
                speech_upto=utt.spec_upto if utt.end <= _end_of(utt.spec) else utt.speech_upto,
                ended_soft=utt.soft):
            if utt.spec_result is not None:
                events.extend(self._final_result(utt.spec, utt, utt.spec_result, now))
            # else: the speculative decode in flight is the final (on_result)
        else:
            self._drop_speculation(utt)
            self._finals.append(utt)
        return events

    # -- speculative finals (engine.core.speculation) ------------------------------------

    def speculate(self, at: int, soft: bool = False) -> None:
        """Decode the utterance in flight as its final once its audio reaches stream sample
        ``at`` (a push-to-talk release; a VAD pause), before its end is confirmed."""
        utt = self._active
        if utt is None or not self.options.speculative_finals:
            return
        if utt.spec is not None and _resumed(utt):
            # One kept for a sentence cut still waits for its verdict (take_cut): the newer
            # pause takes its place.
            self._drop_speculation(utt)
        if utt.spec is None:
            utt.spec_at, utt.spec_soft = at, soft

    def reading(self) -> Literal["finished", "open"] | None:
        """How the speculative final of the utterance in flight reads, once it is back:
        "finished" (a finished sentence, `engine.core.form.reads_finished`: the pause is likely
        the end), "open" (it goes on, `engine.core.form.reads_open`: the pause is likely inside
        a sentence), or None (no text, nothing to tell, or speech has resumed since)."""
        utt = self._active
        if utt is None or utt.spec is None or utt.spec_result is None or _resumed(utt):
            return None
        return utt.spec_reads

    def discarded(self, job: Job) -> bool:
        """A speculative final thrown away (speech resumed): its result will be ignored, so a
        driver that can still take it back need not decode it."""
        entry = self._in_flight.get(job.request_id)
        return job.speculative and (entry is None or entry[1].spec is not job)

    def spoken_past(self, job: Job) -> bool:
        """Speech resumed after the audio of the speculative final ``job`` (kept as a possible
        sentence cut, `take_cut`): its pause is over, so its text no longer tells how long
        that pause must last."""
        entry = self._in_flight.get(job.request_id)
        return entry is not None and entry[1].spec is job and _resumed(entry[1])

    def take_cut(self) -> tuple[int, int] | None:
        """Where to end the long utterance in flight although speech went on: ``(end,
        speech_end)`` of its speculative final once that is back, reads as a finished sentence,
        speech has resumed after it and a partial that heard past it ends a sentence there too
        (``sentence_cut_s``); the caller ends the utterance there
        (`engine.core.segmenter.SpeechSegmenter.cut`). A speculation that reads otherwise is
        dropped here, so partials go on. None: nothing to cut (now)."""
        utt = self._active
        if utt is None or utt.spec is None or utt.spec_result is None or not _resumed(utt):
            return None
        if utt.spec_reads != "finished":
            self._drop_speculation(utt)
            return None
        return (_end_of(utt.spec), utt.spec_upto) if utt.spec_confirmed else None

    def refuse_cut(self) -> None:
        """The cut `take_cut` offered could not be made: let that speculation go."""
        if self._active is not None:
            self._drop_speculation(self._active)

    def _verdict_due(self, utt: _Utterance) -> bool:
        """A speculation kept for a sentence cut is back, unconfirmed, and the utterance has
        audio far enough past its pause for a partial to tell (`_judge_cut`)."""
        spec = utt.spec
        return (spec is not None and utt.spec_result is not None and not utt.spec_confirmed
                and _resumed(utt)
                and utt.start + utt.samples - _end_of(spec) >= CUT_HEARD_S * SAMPLE_RATE)

    def _judge_cut(self, utt: _Utterance, partial: Job, text: str) -> None:
        """A partial of ``utt`` came back: if it heard past the pause of a speculation kept for
        a sentence cut, it confirms the cut or lets the speculation go (`take_cut`)."""
        spec = utt.spec
        if (spec is None or utt.spec_result is None or utt.spec_confirmed
                or _end_of(partial) <= _end_of(spec)):
            return
        verdict = ends_sentence_in(utt.spec_text, text)
        if verdict:
            utt.spec_confirmed = True
        elif verdict is False or _end_of(partial) - _end_of(spec) >= CUT_VERDICT_S * SAMPLE_RATE:
            self._drop_speculation(utt)

    def _spoke(self, utt: _Utterance) -> None:
        """A window of speech was appended: a speculation of the audio before it is stale,
        unless it may still mark a sentence end to cut a long utterance at (`take_cut`)."""
        utt.speech_upto = utt.start + utt.samples
        if utt.spec_at is not None and utt.spec_at < utt.speech_upto:
            utt.spec_at = None  # its pause is over before its decode could start
        if utt.spec is not None and not (
                self._may_cut(utt.spec, utt)
                and (utt.spec_result is None or utt.spec_reads == "finished")):
            self._drop_speculation(utt)

    def _may_cut(self, spec: Job, utt: _Utterance) -> bool:
        o = self.options
        return (o.sentence_cut_s > 0 and not o.commit_stable and not utt.spec_soft
                and len(spec.audio) >= o.sentence_cut_s * SAMPLE_RATE)

    def _drop_speculation(self, utt: _Utterance) -> None:
        # Its job may still be decoding; on_result ignores it (it is no longer utt.spec).
        if utt.spec is not None:
            utt.attempts, utt.retry = 0, Rung.ACCEPT
        utt.spec, utt.spec_result, utt.spec_at = None, None, None
        utt.spec_confirmed, utt.spec_text, utt.spec_reads = False, "", None

    def _final_in_flight(self) -> bool:
        return any(job.kind == "final" and (not job.speculative or job is utt.spec)
                   for job, utt in self._in_flight.values())

    def _speculation_due(self, utt: _Utterance) -> bool:
        return (utt.spec is None and utt.spec_at is not None and utt.speech
                and utt.start + utt.samples >= utt.spec_at and not self._finals
                and not self._final_in_flight())

    def _speculative_request(self, utt: _Utterance, now: float) -> Job:
        # Exactly the audio up to the pause: a block that brought more with it (a network
        # chunk) must not make the decode cover audio past the end the utterance will have.
        at = utt.spec_at
        samples = None if at is None else min(utt.samples, max(0, at - utt.start))
        utt.spec_at = None
        utt.spec_upto = utt.speech_upto
        utt.soft = utt.spec_soft  # as the segmenter will say at the end (or it is unusable)
        utt.speech_end_at = utt.arrived_at  # provisional, for the lag; _end sets the real one
        job = dataclasses.replace(self._final_request(utt, now, samples), speculative=True)
        self._in_flight[job.request_id] = (job, utt)
        utt.spec = job
        return job

    # -- partials ------------------------------------------------------------------------

    def _partial_due(self, utt: _Utterance, now: float) -> bool:
        o = self.options
        return (
            o.partials
            and utt.speech
            # A sentence cut waiting for its verdict does not wait out the partial interval
            # or a slow machine's backoff: on this CPU a long utterance's partial takes the
            # padded window (~0.5-1 s), and the cut is only worth it while it is early.
            and (now >= self._next_partial_at or self._verdict_due(utt))
            and utt.samples >= o.min_partial_audio_s * SAMPLE_RATE
            and utt.samples - utt.partial_samples >= SAMPLE_RATE * (
                o.min_new_audio_s if utt.heard.strip() else o.first_words_step_s)
            and not any(u is utt for _, u in self._in_flight.values())
            # (A speculation kept for a sentence cut waits for a partial past its pause.)
            and (utt.spec is None or (utt.spec_result is not None and _resumed(utt)))
            and utt.spec_at is None
            # With two decode streams or more, the last free one is kept for a final.
            and (o.max_in_flight == 1 or self._final_in_flight()
                 or len(self._in_flight) < o.max_in_flight - 1)
        )

    def _partial_request(self, utt: _Utterance, now: float) -> Job:
        o = self.options
        # Committing early, a partial's words become final text: it is decoded with the
        # prompt a final gets (without it, tiny.en loses case and punctuation, and more words:
        # on the 231 s reading 7.2-7.8 % WER, with it 5.6-6.7 %), and with word times (where
        # to cut, what was committed).
        commit = o.commit_stable
        if commit:
            self._trim(utt, now)  # (a window that grew without commits)
        utt.partial_samples = utt.samples
        room = max(1, int(PROMPT_CHARS_PER_S * utt.samples / SAMPLE_RATE))
        vocabulary, left = hotwords.share(self._terms(utt), room)
        options = DecodeOptions(
            language=o.language, languages=o.languages, task=o.task, word_timestamps=commit,
            prompt=(self.prompt.prompt(now, left, anchor=not utt.soft)
                    if commit and left is not None else None),
            hotwords=vocabulary,
            beam_size=o.partial_beam_size, temperatures=(0.0,),
            short_context=o.short_context and utt.samples <= o.short_context_max_s * SAMPLE_RATE,
            short_fallback=False,  # tentative text: what the short window reads, or nothing
        )
        return self._issue(utt, "partial", options, now)

    def _partial_result(self, request: Job, utt: _Utterance, transcript: Transcript,
                        now: float) -> list[Event]:
        o = self.options
        wait = max(o.partial_interval_s, o.busy_factor * (now - request.issued_at))
        # Committing early, the partials make the final text: a slow machine spaces them by
        # their round trip (busy_factor) alone, not by the lag's backoff as well.
        self._next_partial_at = now + wait * (1.0 if o.commit_stable else self._backoff)
        if utt is not self._active:
            return []  # the utterance ended meanwhile; its final supersedes this
        seconds = len(request.audio) / SAMPLE_RATE
        vocabulary = request.options.hotwords
        kept = [s for s in transcript.segments if not (
            _flags(s, o.quality) | word_loop(s.text, seconds)) & (LOOP_FLAGS | {"no_speech"})
            and not (vocabulary and hotwords.recites(vocabulary, s.text))]
        # Committing early (commit_stable), from the words' times (a runner that gives none:
        # nothing is committed early).
        if request.options.word_timestamps and (not kept or any(s.words for s in kept)):
            return self._commit(utt, request, kept, transcript.language, now)
        text = " ".join(s.text for s in kept)
        self._judge_cut(utt, request, text)
        committed, tentative = utt.agreement.update(tokens(text))
        utt.heard = f"{committed} {tentative}"
        utt.heard_upto = _end_of(request)
        if not utt.heard.strip():
            # No word yet (the first try is early, on little speech): ask again as soon as
            # first_words_step_s more has come, not a whole interval later, so the first words
            # show when Whisper can first read them. A busy machine still backs off.
            self._next_partial_at = now + (o.busy_factor * (now - request.issued_at)
                                           if self._backoff > 1 else 0.0)
        return [PartialText(utterance_id=utt.id, committed=committed, tentative=tentative,
                            start=utt.start)]

    def _commit(self, utt: _Utterance, request: Job, kept: list[Segment],
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
        thrice = common_prefix([w.text for w in utt.earlier], [w.text for w in words])
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
        utt.earlier, utt.hypothesis = utt.hypothesis[agreed:], words[agreed:]
        utt.heard = _text(utt.hypothesis)
        utt.heard_upto = _end_of(request)
        if not utt.heard:  # as below: the next words show as soon as Whisper can read them
            self._next_partial_at = now + (self.options.busy_factor * (now - request.issued_at)
                                           if self._backoff > 1 else 0.0)
        return [*events, PartialText(utterance_id=utt.id, committed="", tentative=utt.heard,
                                     start=utt.first)]

    def _commit_piece(self, utt: _Utterance, words: list[Word], request: Job,
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

    def _trim(self, utt: _Utterance, now: float) -> None:
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
        """The words committed early that end by stream sample ``upto`` join the prompt."""
        words = [w for w in self._said if w.start >= self._prompted and w.end <= upto]
        if words:
            self.prompt.add(_text(words), at=now, language=self._said_language)
        self._prompted = max(self._prompted, upto)

    def _beyond(self, words: list[Word], job: Job, utt: _Utterance) -> list[Word]:
        """The words of ``job``'s result (of ``utt``) past those committed early
        (whisper_streaming's hypothesis buffer), if its audio reaches back to the last words
        committed before ``utt``'s first word (to COMMIT_TOUCH_S after the last one: a window
        cut at its end may still hear its tail): after the last committed words where the
        decode says them again near that point (the longest run of up to COMMIT_NGRAM, within
        COMMIT_SLACK words of it; a single word right at it), else the words that lie mostly
        after it (word times drift between decodes by a word or so, which alone would lose
        or repeat one)."""
        before = [w for w in self._said if w.start < utt.first][-COMMIT_NGRAM:]
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

    # -- finals --------------------------------------------------------------------------

    def _final_request(self, utt: _Utterance, now: float, samples: int | None = None) -> Job:
        o = self.options
        utt.attempts += 1
        seconds = (utt.samples if samples is None else samples) / SAMPLE_RATE
        if utt.replay:  # decoded as the partials that heard the words the final dropped
            utt.replay, utt.replayed = False, True
            return self._issue(utt, "final", DecodeOptions(
                language=o.language, languages=o.languages, task=o.task, word_timestamps=True,
                beam_size=o.partial_beam_size, temperatures=(0.0,),
                short_context=o.short_context and seconds <= o.short_context_max_s,
                short_fallback=False), now, arrived_at=utt.speech_end_at, samples=samples)
        first = utt.attempts == 1
        # Behind (more finals waiting): greedy decoding is cheaper, so the backlog shrinks
        # instead of growing without bound. (A slow partial only backs partials off.)
        behind = bool(self._finals)
        # A short window has a small token budget, and CTranslate2 crashes when the prompt
        # does not fit in it: keep the prompt in proportion to the audio.
        # The vocabulary takes its share of that room first.
        vocabulary, left = hotwords.share(self._terms(utt), max(1, int(PROMPT_CHARS_PER_S * seconds)))
        # No style prompt for audio the VAD doubted (a hum): it would talk Whisper into words.
        prompt = self.prompt.prompt(now, left, anchor=not utt.soft) if left is not None else None
        # Careful (beam search): long finals, retries, and soft utterances, whose audio the
        # VAD doubted; those also take the padded window (mfa-falsetto2: 3 errors in 10 words
        # greedy on the short window, none padded with beam 5). Both are rare. The ladder's
        # beam rung (a greedy final of low confidence) keeps the first attempt's window and
        # prompt: only the search changes.
        beam = utt.retry is Rung.BEAM
        careful = not first or utt.soft or seconds > o.greedy_final_max_s
        short = o.short_context and not utt.soft and seconds <= o.short_context_max_s
        restyle, utt.restyle = utt.restyle, False
        if restyle:  # the padded window, the first attempt's search, the style prompt alone
            prompt, beam, short = self.prompt.anchor(), True, False
            careful = utt.soft or seconds > o.greedy_final_max_s
        # A retry on the padded window goes without prompt and vocabulary alike (a recited
        # list is retried without it).
        options = DecodeOptions(
            language=o.language, languages=o.languages, task=o.task, prompt=prompt if first or beam else None,
            hotwords=vocabulary if first or beam else None, word_timestamps=True,
            beam_size=(o.careful_beam_size if beam and not restyle else 1 if behind
                       else o.careful_beam_size if careful else o.final_beam_size),
            # (The style retry never samples: a sampled decode is where the form got lost.)
            temperatures=(0.0,) if restyle else o.final_temperatures,
            short_context=short and (first or beam),
        )
        return self._issue(utt, "final", options, now, arrived_at=utt.speech_end_at,
                           samples=samples)

    def _final_result(self, request: Job, utt: _Utterance, transcript: Transcript,
                      now: float) -> list[Event]:
        o = self.options
        if utt.skipping is not None:
            # The replay (below): its text stands only if it has more words than the decode
            # it replays (a partial's own misreading can ask for a replay that reads no more).
            (first, skipped), utt.skipping = utt.skipping, None
            if len(skipped.text.split()) >= len(transcript.text.split()):
                request, transcript = first, skipped
        kept = [s for s in _spoken(transcript.segments, o.quality)
                if not (utt.soft and s.no_speech_prob > o.soft_no_speech)]
        flags = _final_flags(request, transcript, kept, utt.speech_end, o.quality)
        rungs = LIVE if o.retry_on_loop else dataclasses.replace(LIVE, max_retries=0)
        if self._finals:  # behind: a low-confidence final is not worth the wait
            rungs = dataclasses.replace(rungs, rungs=(Rung.PADDED,))
        greedy = ladder.is_greedy(request.options)
        tried = (utt.retry,) if utt.attempts > 1 else ()
        rung = ladder.next_rung(flags, tried, seconds=len(request.audio) / SAMPLE_RATE,
                                greedy=greedy, ladder=rungs)
        if rung in (Rung.BEAM, Rung.PADDED):
            # A prompt or a short window can start a loop or stop early: retry with neither;
            # a greedy final of low confidence: retry with beam search.
            utt.retry = rung
            self._finals.appendleft(utt)
            return []
        placed = self._beyond(_placed(kept, request, upto=utt.end), request, utt)
        text = (_text(placed) if len(placed) < sum(len(s.words) for s in kept)
                else "".join(s.text for s in kept).strip())  # (none committed early)
        # (Committing early, the final holds only the words not committed yet: fewer to drop.)
        if not utt.replayed and _dropped(text, utt, request, DROPPED_MIN_WORDS // (
                2 if o.commit_stable else 1)):
            # Whisper skipped part of the audio (a long window jumps a sentence; a voice that
            # changes, as when a second microphone takes over): a retry on the padded window
            # without prompt skipped the same words, while the partials, greedy, without a
            # prompt, read them. One more decode their way; it stands if it reads more.
            log.debug("final of utterance %d: %d words, its last partial %d: replayed",
                      utt.id, len(text.split()), len(utt.heard.split()))
            utt.replay, utt.skipping = True, (request, transcript)
            self._finals.appendleft(utt)
            return []
        # A piece that goes on with the sentence the last final left open starts in lower
        # case: neither a lost form to restyle nor a letter to capitalise.
        goes_on = self._open.goes_on(utt.first)
        if (utt.attempts == 1 and not self._finals and o.retry_on_loop and starts_lower(text)
                and not goes_on and not utt.soft and self.prompt.anchor() is not None):
            # Whisper lost its case, and with it the punctuation (steered by the window or the
            # prompt): decode once more on the padded window with only the style prompt, which
            # restores both; the repair (ensure_form below) is the last resort, as it can't
            # bring back commas. (A fragment without a period is how Whisper writes a
            # sentence cut at a pause: that one only gets the period.)
            utt.restyle = True
            self._finals.appendleft(utt)
            return []
        words = tuple(placed)
        # "low_confidence" only chooses the beam rung: it neither marks the text nor keeps it
        # out of the prompt (the old rule; the beam decode was its remedy).
        quality = tuple(sorted((set(flags) | {f for s in kept for f in _flags(s, o.quality)})
                               - {"low_confidence"}))
        # The prompt takes Whisper's text only if it kept its form (engine.core.prompt); the
        # user always gets a capitalised, ended sentence (engine.core.form).
        self._prompt_upto(utt.first, now)  # (what it committed early goes first)
        self.prompt.add(text, at=now, flags=quality, language=transcript.language)
        text, words = ensure_form(text, words, end=o.end_sentences, start=not goes_on)
        self._open.ended(text, utt.end)
        return [self._final_text(utt, text, words, request, now, transcript.language)]

    def _final_text(self, utt: _Utterance, text: str, words: tuple[Word, ...],
                    request: Job | None, now: float, language: str | None) -> FinalText:
        latency = (utt.decoded_at - request.issued_at) * 1000 if request is not None else 0.0
        stages = [("speech_end", utt.speech_end_at), ("ended", utt.ended_at)]
        if request is not None:
            stages += [("queued", request.issued_at),
                       ("decode_start", utt.decoded_at - utt.decode_ms / 1000),
                       ("decoded", utt.decoded_at)]
        return FinalText(
            utterance_id=utt.id, text=text, words=words, start=utt.first,
            end=max(utt.end, utt.first),
            latency_ms=latency, after_speech_end_ms=max(0.0, now - utt.speech_end_at) * 1000,
            language=language, stages=(*stages, ("emitted", now)),
        )

    # -- shared --------------------------------------------------------------------------

    def _terms(self, utt: _Utterance) -> tuple[str, ...]:
        """The vocabulary, terms like something already heard in ``utt`` first."""
        return hotwords.by_relevance(self.vocabulary, utt.heard) if utt.heard else self.vocabulary

    def _issue(self, utt: _Utterance, kind: str, options: DecodeOptions, now: float,
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


def _end_of(job: Job) -> int:
    """The stream sample after the last one ``job`` decodes."""
    return job.start + len(job.audio)


def _resumed(utt: _Utterance) -> bool:
    """Speech was heard after the audio of ``utt``'s speculative final."""
    return utt.spec is not None and utt.speech_upto > _end_of(utt.spec)


def _placed(segments: Iterable[Segment], job: Job, upto: int | None = None) -> list[Word]:
    """The words of ``segments`` (decoded by ``job``) on the stream's timeline, ending at
    ``upto`` at the latest."""
    return [Word(w.text, job.start + w.start,
                 job.start + w.end if upto is None else min(job.start + w.end, upto),
                 w.probability)
            for s in segments for w in s.words]


def _text(words: Iterable[Word]) -> str:
    return "".join(w.text for w in words).strip()


def _final_flags(request: Job, transcript: Transcript, kept: list[Segment], speech_end: int,
                 thresholds: QualityThresholds) -> tuple[str, ...]:
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
    return (*flags, *sorted(_early_end(words, request, speech_end)))


def _dropped(text: str, utt: _Utterance, request: Job, min_words: int) -> bool:
    """The utterance's last partial heard many words the final does not have, in audio whose
    speech the final's audio holds: the final dropped some (``min_words`` different words,
    `DROPPED_MIN_WORDS` or fewer, and the final under `DROPPED_SHARE` of the partial's length; a partial that said a
    sentence twice adds no new words). A partial that heard speech past the final's audio, as
    past a sentence cut's pause, says nothing of it."""
    final_end = _end_of(request)
    if utt.heard_upto > final_end and utt.speech_end > final_end:
        return False
    heard, said = utt.heard.split(), text.split()
    missing = {comparable(w) for w in heard} - {comparable(w) for w in said} - {""}
    return len(missing) >= min_words and len(said) < DROPPED_SHARE * len(heard)


def _early_end(words: list[Word], request: Job, speech_end: int) -> set[str]:
    """A short window sometimes stops decoding before the audio does (the last words of the
    utterance are lost): the last word ends well before the VAD's end of speech."""
    if not words or not (request.options.short_context or request.options.prompt
                         or request.options.hotwords):
        return set()
    if speech_end - (request.start + words[-1].end) > EARLY_END_S * SAMPLE_RATE:
        return {"early_end"}
    return set()


def _spoken(segments: Iterable[Segment], thresholds: QualityThresholds) -> list[Segment]:
    """The segments the quality checks do not take for text on no speech."""
    return [s for s in segments if "no_speech" not in _flags(s, thresholds)]


def _flags(segment: Segment, thresholds: QualityThresholds) -> set[str]:
    seconds = max(0, segment.end - segment.start) / SAMPLE_RATE
    return set(ladder.check(segment.text, seconds, avg_logprob=segment.avg_logprob,
                            no_speech_prob=segment.no_speech_prob, thresholds=thresholds))
