"""The stream core: one audio stream's whole decision path, sans-I/O.

Every live path runs through it: the desktop engine (`engine.live`, microphone or file), the
server (`engine.server.session`, one per WebSocket session) and, for its push-to-talk gate, the
remote client (`engine.remote.client`). Drivers own threads, sockets and devices; they feed
samples with the time they arrived and run the decodes they are handed:

    driver                                   StreamCore
    samples + now                       -->  feed(audio, now)            -> [Event]
    push-to-talk press / release        -->  begin(at) / end(at)         (sample positions)
    stop, release on the wire, ``end``  -->  flush(now)                  -> [Event]
    "a decode stream is free"           -->  next_job(now)               -> Job | None
    decode finished / failed            -->  on_result / on_failure      -> [Event]

Inside: whole `VAD_WINDOW` windows are cut from the samples once, scored by the injected
`SpeechScorer` (Silero or the energy fallback, `engine.vad`), pushed through the
`SpeechSegmenter` (hysteresis, pre-roll, push-to-talk) and the `StreamingPolicy` (partials,
finals, prompts, retries). Positions are samples on the stream's own timeline, starting at
``offset`` (a resumed server session starts where the client's last ack was). A flush hands the
tail shorter than a window to the segmenter as it is, so no silence is ever added and no
position needs correcting later.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np

from engine.core.policy import AwaitReading, CutAt, Job, PauseReads, PolicyOptions, StreamingPolicy
from engine.core.segmenter import (
    SegmentAudio,
    SegmenterOptions,
    SegmentEvent,
    SegmentPaused,
    SegmentStarted,
    SpeechSegmenter,
)
from engine.events import Event, LevelChanged
from engine.types import SAMPLE_RATE, VAD_WINDOW, Audio, SpeechScorer, Transcript

EMPTY = np.zeros(0, dtype=np.float32)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamOptions:
    """How one stream is cut and decoded. ``mode`` ("vad": speech detection decides where
    utterances begin and end; "ptt": `begin`/`end` decide) wins over ``segmenter.mode``.
    ``level_interval_ms``: a `LevelChanged` event per this much audio (0: none)."""

    mode: str = "vad"
    policy: PolicyOptions = field(default_factory=PolicyOptions)
    segmenter: SegmenterOptions = field(default_factory=SegmenterOptions)
    level_interval_ms: int = 100

    def __post_init__(self) -> None:
        if self.mode not in ("vad", "ptt"):
            raise ValueError("mode must be 'vad' or 'ptt'")
        if self.level_interval_ms < 0:
            raise ValueError("level_interval_ms must be >= 0")


class LevelMeter:
    """RMS and peak (dBFS) of each ``interval_ms`` of audio: the input meter's events."""

    def __init__(self, interval_ms: int) -> None:
        self._every = interval_ms * SAMPLE_RATE // 1000
        self._blocks: list[Audio] = []
        self._samples = 0

    def feed(self, audio: Audio, end: int = -1) -> list[Event]:
        """``audio`` ending at stream position ``end``."""
        if self._every <= 0 or not len(audio):
            return []
        self._blocks.append(audio)
        self._samples += len(audio)
        if self._samples < self._every:
            return []
        block = np.concatenate(self._blocks)
        self._blocks, self._samples = [], 0
        rms = float(np.sqrt(np.mean(np.square(block, dtype=np.float64))))
        peak = float(np.max(np.abs(block)))
        return [LevelChanged(rms_db=db(rms), peak_db=db(peak), end=end)]


def db(value: float) -> float:
    """Amplitude -> dBFS, -100 for digital silence."""
    return max(-100.0, 20.0 * float(np.log10(value))) if value > 0 else -100.0


class Segmentation:
    """Windowing, VAD and the segmenter, with push-to-talk controls at sample positions.

    ``scorer`` None scores every window 0: push-to-talk alone decides (the remote client's
    gate, which only needs to know what to send). Not thread-safe.
    """

    def __init__(self, options: SegmenterOptions, scorer: SpeechScorer | None, *,
                 offset: int = 0) -> None:
        self.segmenter = SpeechSegmenter(options, position=offset)
        self._scorer = scorer
        self._pending = EMPTY  # samples short of a whole window
        self._controls: deque[tuple[str, int]] = deque()
        self._pauses: deque[int] = deque()  # speculate once the audio reaches these samples

    @property
    def position(self) -> int:
        """Stream position of the next sample expected."""
        return self.segmenter.position + len(self._pending)

    @property
    def active(self) -> bool:
        """An utterance is open (speech heard, or a push-to-talk press held)."""
        return self.segmenter.active

    def begin(self, at: int | None = None) -> None:
        """Push-to-talk press at stream sample ``at`` (default: now)."""
        self._controls.append(("begin", self.position if at is None else at))

    def end(self, at: int | None = None) -> None:
        """Push-to-talk release; samples before ``at`` (default: now) belong to the utterance."""
        self._controls.append(("end", self.position if at is None else at))

    def pause(self, at: int) -> None:
        """Push-to-talk release at ``at``: once the samples before it are in, the utterance in
        flight is reported paused there (`SegmentPaused`), so its final can be decoded while
        the tail after the release is still coming (engine.core.policy.speculation). If the speech
        had already paused by then (the segmenter's end pad of silence before the release),
        there is no last syllable for the tail to catch: the utterance ends at the release and
        the pending end (release + tail) is dropped."""
        self._pauses.append(at)

    def feed(self, audio: Audio) -> list[SegmentEvent]:
        data = np.concatenate([self._pending, audio]) if len(self._pending) else audio
        count = len(data) // VAD_WINDOW
        self._pending = np.array(data[count * VAD_WINDOW:], dtype=np.float32)
        if count == 0:
            return []
        windows = np.asarray(data[:count * VAD_WINDOW], dtype=np.float32).reshape(
            count, VAD_WINDOW)
        scores = self._scorer.score(windows) if self._scorer is not None else np.zeros(count)
        events: list[SegmentEvent] = []
        for window, probability in zip(windows, scores, strict=True):
            # A control at sample x acts before the window that holds x is pushed.
            events.extend(self._due_controls(self.segmenter.position + VAD_WINDOW))
            pushed = self.segmenter.push(window, float(probability))
            events.extend(pushed)
            spoke = any(isinstance(e, (SegmentStarted, SegmentAudio)) and e.speech
                        for e in pushed)
            while self._pauses and self._pauses[0] <= self.segmenter.position:
                if spoke and self.segmenter.active:
                    # Speech up to the release: the next window tells whether it goes on. A
                    # decode that speech goes on past is thrown away (policy.speculation:
                    # usable) after holding a decode stream a slow machine needs.
                    self._pauses[0] = self.segmenter.position + 1
                    break
                self._pauses.popleft()
                if self.segmenter.paused:
                    events.extend(self._end_now())
                elif self.segmenter.active:
                    events.append(SegmentPaused(at=self.segmenter.position))
        return events

    def flush(self) -> list[SegmentEvent]:
        """Close the utterance in flight with everything received so far (its last samples
        too, even less than a window); pending controls take effect first."""
        events = self._due_controls(self.position)
        self._pauses.clear()  # the end is now: nothing to speculate on
        tail, self._pending = self._pending, EMPTY
        if len(tail):
            events.extend(self.segmenter.push_tail(tail))
        return events + self.segmenter.flush()

    def _end_now(self) -> list[SegmentEvent]:
        """End the utterance in flight here, dropping the end control queued for it."""
        for control in self._controls:
            if control[0] == "end":
                self._controls.remove(control)
                break
        return self.segmenter.end()

    def _due_controls(self, upto: int) -> list[SegmentEvent]:
        events: list[SegmentEvent] = []
        while self._controls and self._controls[0][1] <= upto:
            kind, _ = self._controls.popleft()
            events.extend(self.segmenter.begin() if kind == "begin" else self.segmenter.end())
        return events


class StreamCore:
    """One stream from samples to events; see the module docstring. Not thread-safe: drivers
    call it from one thread or under one lock."""

    def __init__(self, options: StreamOptions, scorer: SpeechScorer | None, *,
                 offset: int = 0) -> None:
        self.options = options
        # Push-to-talk: the release ends a dictation, never a sentence read mid-press.
        ptt = options.mode == "ptt"
        # Nor are words committed before it (PolicyOptions.commit_stable).
        self.policy = StreamingPolicy(replace(
            options.policy, end_sentences=ptt,
            sentence_cut_s=0.0 if ptt else options.policy.sentence_cut_s,
            commit_stable=options.policy.commit_stable and not ptt))
        self.segmentation = Segmentation(replace(options.segmenter, mode=options.mode), scorer,
                                         offset=offset)
        self._meter = LevelMeter(options.level_interval_ms)

    @property
    def position(self) -> int:
        return self.segmentation.position

    @property
    def idle(self) -> bool:
        """Nothing being spoken, pending or decoding: the stream may close now."""
        return self.policy.idle and not self.segmentation.active

    @property
    def in_flight(self) -> int:
        return self.policy.in_flight

    def begin(self, at: int | None = None) -> None:
        self.segmentation.begin(at)

    def end(self, at: int | None = None) -> None:
        self.segmentation.end(at)

    def set_vocabulary(self, terms: tuple[str, ...]) -> None:
        """The vocabulary the decodes issued from now on are biased towards."""
        self.policy.set_vocabulary(terms)

    def set_language(self, language: str | None, languages: tuple[str, ...] = ()) -> None:
        """The language of the decodes issued from now on (None: detect among ``languages``)."""
        self.policy.set_language(language, languages)

    def speculate(self, at: int) -> None:
        """Decode the utterance in flight as its final once its audio reaches sample ``at``
        (a push-to-talk release), before the end is confirmed (engine.core.policy.speculation)."""
        self.segmentation.pause(at)

    def feed(self, audio: Audio, now: float) -> list[Event]:
        """Samples that arrived at ``now`` -> the events they cause."""
        events = self._meter.feed(audio, self.position + len(audio))
        events += self._handle(self.segmentation.feed(audio), now)
        return events

    def flush(self, now: float) -> list[Event]:
        """End the utterance in flight now (stop, push-to-talk release on the wire, ``end``)."""
        return self._handle(self.segmentation.flush(), now)

    def next_job(self, now: float) -> Job | None:
        """The next decode to run, or None; call whenever a decode stream is free."""
        job = self.policy.next_request(now)
        self._follow(now)  # (AwaitReading: no events)
        return job

    def on_result(self, job: Job, transcript: Transcript, now: float) -> list[Event]:
        return self.policy.on_result(job.request_id, transcript, now) + self._follow(now)

    def on_failure(self, job: Job, message: str, now: float) -> list[Event]:
        return self.policy.on_failure(job.request_id, message, now) + self._follow(now)

    def _follow(self, now: float) -> list[Event]:
        """Carry out the policy's hints to the segmenter in the order they came (engine.core.
        policy.hints), and the events they cause. The pause hints are VAD mode's: in
        push-to-talk the release ends the utterance."""
        events: list[Event] = []
        segmenter = self.segmentation.segmenter
        vad = self.options.mode == "vad"
        while hints := self.policy.hints():
            for hint in hints:
                if isinstance(hint, AwaitReading) and vad:
                    # The speculative final's text will tell how long this pause must last.
                    segmenter.await_reading()
                elif isinstance(hint, PauseReads) and vad:
                    # A finished sentence: less than the usual wait; one that goes on, longer.
                    events += self.policy.handle_all(
                        segmenter.shorten_end_wait() if hint.reading == "finished"
                        else segmenter.extend_end_wait() if hint.reading == "open"
                        else segmenter.keep_end_wait(), now)
                elif isinstance(hint, CutAt):  # (never in push-to-talk: sentence_cut_s is 0)
                    log.debug("sentence cut at %.2f s", hint.end / SAMPLE_RATE)
                    cut = segmenter.cut(hint.end, hint.speech_end)
                    if not cut:  # (not expected: both hold the same utterance)
                        self.policy.refuse_cut(hint)
                    events += self.policy.handle_all(cut, now)
        return events

    def cancel(self) -> None:
        """Forget everything in flight or pending; emits nothing."""
        self.policy.cancel()

    def _handle(self, segment_events: list[SegmentEvent], now: float) -> list[Event]:
        return self.policy.handle_all(segment_events, now) + self._follow(now)
