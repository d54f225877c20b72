"""Turn a stream of (512-sample window, speech probability) pairs into utterances (sans-I/O).

Rules, each there to prevent a complaint users make about peer apps:
- hysteresis (`engine.core.voice.Hysteresis`): speech starts after ``start_windows``
  consecutive windows at or above the lower ``end_threshold``, one of them at or above
  ``start_threshold`` (a click is not speech), and continues while windows stay at or above ``end_threshold`` (soft endings are not cut);
- it ends after ``min_silence_ms`` below ``end_threshold``, keeping ``end_pad_ms`` after the last
  speech window (trailing consonants are quiet); an utterance with less than ``short_ms`` of
  speech so far waits ``short_silence_ms`` instead, so words said one at a time ("one ... two
  ... three") reach the decoder together: Whisper loops or misreads a lone 1 s word, and
  loses the context between them;
- `shorten_end_wait()`: the utterance reads finished (its speculative final, decoded at the
  end pad, ends a sentence: engine.core.stream), so the silence that ends it is only
  ``finished_silence_ms``: the listener's "is that the end?" answered by what was said, not by
  the clock alone. Speech resuming before that restores the usual wait;
- `extend_end_wait()`: the mirror of `shorten_end_wait()`: the speculative final reads as a
  sentence that goes on (it trails off with "...", ends with a comma, or has no sentence end),
  so the silence that ends it is ``open_silence_ms``: a speaker who pauses mid-sentence ("And
  so, my fellow Americans ... ask not ...") is decoded as one utterance, read in context, not
  as fragments each decoded alone. Speech resuming clears it, like the hint above;
- `await_reading()`: while that speculative final is being decoded, the usual wait does not
  end the utterance (at most ``open_silence_ms`` does): the hint would otherwise come too late
  whenever the decode outlasts the wait, and waiting costs nothing, since no final could be
  shown before that decode is back anyway (docs/streaming-rules.md, "Under load").
  `keep_end_wait()` is the answer "nothing to tell" (the usual wait again);
- every utterance starts ``preroll_ms`` (>= 300 ms) before the first speech window, so the
  first word's onset is never cut;
- `flush()` (stop) ends the utterance in flight, so the last words are never lost;
- an utterance longer than ``max_ms`` is split at its quietest window in the second half
  (`engine.core.voice.quietest`), so the decoder never gets more than Whisper's 30 s window;
- `cut()`: the caller ends the utterance in flight at an earlier pause although speech went on
  after it (a long utterance whose speculative final there reads as a finished sentence:
  `engine.core.policy.PolicyOptions.sentence_cut_s`); the audio after the cut starts the next
  utterance, as with the split above;
- a second chance for voices Silero scores low (falsetto, whispering: 0.1-0.3, below any
  threshold that keeps noise out): a run of ``soft_windows`` windows at least ``soft_snr_db``
  above the noise floor (the quietest window of the last ``noise_floor_ms``), with a VAD score
  of at least ``soft_threshold`` somewhere in it, starts a *soft* utterance, which the energy
  carries while it lasts. Stationary noise never rises above its own floor and a click is
  shorter than the run. Unless Silero later scores a window of it >= ``start_threshold``,
  `SegmentEnded.soft` tells the policy to decode it carefully and let the decoder's no-speech
  probability have the last word.

Push-to-talk ("ptt" mode) ignores the VAD for start and end: `begin()` opens an utterance
(with the pre-roll ring) and `end()` closes it; speech windows are still counted so a press
with only silence can be recognised downstream, and a pause of the end pad while the key is
held is reported (`SegmentPaused`) so the final can be decoded before the key is let go.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from engine.core.voice import Hysteresis, Onset, quietest, window_levels_db
from engine.types import SAMPLE_RATE, VAD_WINDOW, Audio

MAX_ONSET = 32  # windows (~1 s) of soft onset kept before the window that triggers


@dataclass(frozen=True)
class SegmenterOptions:
    mode: str = "vad"  # "vad" | "ptt"
    start_threshold: float = 0.5
    end_threshold: float = 0.35
    start_windows: int = 3
    min_silence_ms: int = 500
    # Less speech than short_ms so far: wait short_silence_ms (one word at a time; docstring).
    # On the shared set 2000/800 merges the AMI clip's halves and "one two three" (one decode
    # instead of three lone words that looped, "1 1 1 1 1 1", and were retried padded).
    short_ms: int = 2000
    short_silence_ms: int = 800
    preroll_ms: int = 400
    end_pad_ms: int = 200
    max_ms: int = 30_000
    # The wait once the utterance reads finished (`shorten_end_wait`); 0 turns the hint off.
    finished_silence_ms: int = 400
    # The wait once the utterance reads as going on (`extend_end_wait`); 0 turns the hint off.
    open_silence_ms: int = 1200
    # Push-to-talk: the user said there is speech, so a lower bar decides whether a press held
    # anything worth decoding (Silero scores falsetto or whispering around 0.2).
    ptt_threshold: float = 0.15
    # The soft path (module docstring); soft_snr_db = 0 turns it off.
    soft_threshold: float = 0.15
    soft_snr_db: float = 25.0
    soft_windows: int = 8  # 256 ms: longer than a click or a key press
    noise_floor_ms: int = 3000
    min_floor_db: float = -70.0  # digital silence: speech must still be audible (>= -45 dBFS)

    def __post_init__(self) -> None:
        if self.mode not in ("vad", "ptt"):
            raise ValueError("mode must be 'vad' or 'ptt'")
        if not 0.0 < self.end_threshold <= self.start_threshold < 1.0:
            raise ValueError("need 0 < end_threshold <= start_threshold < 1")
        if not 0.0 < self.ptt_threshold < 1.0:
            raise ValueError("need 0 < ptt_threshold < 1")
        if self.start_windows < 1:
            raise ValueError("start_windows must be >= 1")
        if self.preroll_ms < 300:
            raise ValueError("preroll_ms must be >= 300 so first words are not cut")
        if min(self.min_silence_ms, self.short_silence_ms, self.short_ms, self.end_pad_ms,
               self.finished_silence_ms, self.open_silence_ms) < 0:
            raise ValueError("min_silence_ms, short_ms, short_silence_ms, end_pad_ms, "
                             "finished_silence_ms and open_silence_ms must be >= 0")
        if self.max_ms < 2_000:
            raise ValueError("max_ms must be >= 2000")
        if not 0.0 < self.soft_threshold <= self.end_threshold or self.soft_snr_db < 0:
            raise ValueError("need 0 < soft_threshold <= end_threshold and soft_snr_db >= 0")
        if self.soft_windows < 1 or self.noise_floor_ms < VAD_WINDOW * 1000 // SAMPLE_RATE:
            raise ValueError("soft_windows must be >= 1 and noise_floor_ms >= one window")

    def windows(self, ms: int) -> int:
        return max(0, -(-ms * SAMPLE_RATE // 1000 // VAD_WINDOW))  # ceil


@dataclass(frozen=True)
class SegmentStarted:
    """An utterance begins at sample ``start``; ``audio`` holds it from there up to now.
    ``speech`` is False for a push-to-talk press before any speech was heard."""

    start: int
    audio: Audio = field(repr=False, compare=False)
    speech: bool = True


@dataclass(frozen=True)
class SegmentAudio:
    """More audio of the utterance in flight (it may later be cut back by `SegmentEnded.end`);
    ``speech`` says whether the VAD called this window speech."""

    audio: Audio = field(repr=False, compare=False)
    speech: bool = True


@dataclass(frozen=True)
class SegmentEnded:
    """The utterance ends at sample ``end`` (padded); ``speech_end`` is the end of the last
    speech window (latency is measured from there); ``speech_windows`` counts windows the VAD
    called speech (0 means a push-to-talk press held over silence); ``soft`` says it was
    started by the soft path (energy and a weak VAD score: the decoder should confirm it)."""

    end: int
    speech_end: int
    speech_windows: int
    soft: bool = False


@dataclass(frozen=True)
class SegmentPaused:
    """The utterance in flight has been silent for the end pad, so if it ended now it would end
    at ``at`` (its audio up to here is exactly what its final decodes) unless speech resumes
    before the min-silence wait is over (VAD) or the key is let go (push-to-talk). The policy
    may decode it speculatively (``soft``: as `SegmentEnded.soft` would say)."""

    at: int
    soft: bool = False


SegmentEvent = SegmentStarted | SegmentAudio | SegmentPaused | SegmentEnded


class SpeechSegmenter:
    """State machine over VAD windows; see the module docstring. Not thread-safe."""

    def __init__(self, options: SegmenterOptions | None = None, *, position: int = 0) -> None:
        self.options = options or SegmenterOptions()
        o = self.options
        self._preroll = o.windows(o.preroll_ms)
        # Pre-roll plus room for a slow onset (a long soft run before the peak that triggers).
        self._ring: deque[Audio] = deque(maxlen=self._preroll + o.start_windows + MAX_ONSET)
        self._position = position  # stream position after the samples pushed so far
        self._gate = Hysteresis(o.start_threshold, o.end_threshold, o.start_windows)
        self._active = False
        self._start = 0
        self._windows: list[Audio] = []  # the utterance in flight, window by window
        self._levels: list[float] = []  # level (dB) per window of the utterance, for splitting
        self._silence = 0  # consecutive windows below end_threshold
        self._end_wait_shortened = False  # the utterance in flight reads finished
        self._end_wait_extended = False  # ... or reads as going on (`extend_end_wait`)
        self._awaiting = False  # ... or is still being read (`await_reading`)
        self._last_speech_end = 0
        self._speech_windows = 0
        self._floor = position  # end of the previous utterance: pre-roll never reaches back past it
        self._recent_db: deque[float] = deque(maxlen=max(1, o.windows(o.noise_floor_ms)))
        self._level = 0.0  # of the newest window (dB)
        self._loud = False  # the newest window stands soft_snr_db above the noise floor
        # A run of loud windows while idle, one of which had a VAD score >= soft_threshold.
        self._soft_onset = Onset(o.soft_windows)
        self._soft = False  # the utterance in flight was started by the soft path ...
        self._doubted = False  # ... and Silero has not been sure of any window of it since

    @property
    def position(self) -> int:
        return self._position

    @property
    def active(self) -> bool:
        return self._active

    def push(self, window: Audio, probability: float) -> list[SegmentEvent]:
        """Feed one window (``VAD_WINDOW`` samples) and its speech probability."""
        if len(window) != VAD_WINDOW:
            raise ValueError(f"window must have {VAD_WINDOW} samples, got {len(window)}")
        self._position += VAD_WINDOW
        self._ring.append(window)
        self._track_level(window)
        if not self._active:
            return self._push_idle(probability)
        return self._push_active(window, probability)

    def push_tail(self, audio: Audio) -> list[SegmentEvent]:
        """Samples shorter than a window, at a flush: they join the utterance in flight (or
        the pre-roll ring) unscored, so a flush never pads with silence."""
        if not len(audio):
            return []
        self._position += len(audio)
        self._ring.append(audio)
        if not self._active:
            return []
        self._windows.append(audio)
        self._levels.append(float(window_levels_db(audio)[0]))
        return [SegmentAudio(audio=audio, speech=False)]

    def begin(self) -> list[SegmentEvent]:
        """Push-to-talk press: open an utterance now, with the pre-roll ring."""
        if self._active:
            return []
        return [self._open(self._preroll + self.options.start_windows, speech_windows=0)]

    @property
    def paused(self) -> bool:
        """Speech was heard and has been followed by at least the end pad of silence: the audio
        so far is all the utterance would need if it ended now."""
        o = self.options
        return (self._active and self._speech_windows > 0
                and self._silence >= o.windows(o.end_pad_ms) > 0)

    def end(self) -> list[SegmentEvent]:
        """Push-to-talk release (or any forced end): close the utterance at the current position."""
        if not self._active:
            return []
        speech_end = self._last_speech_end if self._speech_windows else self._position
        return [self._close(self._position, speech_end)]

    def flush(self) -> list[SegmentEvent]:
        """Stop: close the utterance in flight, keeping everything pushed so far."""
        return self.end()

    def shorten_end_wait(self) -> list[SegmentEvent]:
        """VAD mode, during the silence after speech: the utterance reads finished, so it ends
        once the silence reaches ``finished_silence_ms`` (now, if it already has). Ignored once
        speech has resumed (the hint was about audio that is no longer the whole utterance)."""
        if self._in_pause() and self.options.finished_silence_ms:
            self._end_wait_shortened = True
        return self.keep_end_wait()

    def extend_end_wait(self) -> list[SegmentEvent]:
        """VAD mode, during the silence after speech: the utterance reads as going on, so only
        ``open_silence_ms`` of silence ends it (when that is longer than the usual wait).
        Ignored once speech has resumed, like `shorten_end_wait`."""
        if self._in_pause() and self.options.open_silence_ms:
            self._end_wait_extended = True
        return self.keep_end_wait()

    def await_reading(self) -> None:
        """VAD mode, during the silence after speech: the text that tells whether this pause
        is the end is being decoded; until `shorten_end_wait`, `extend_end_wait` or
        `keep_end_wait` brings it, only ``open_silence_ms`` of silence ends the utterance."""
        if self._in_pause() and self.options.open_silence_ms:
            self._awaiting = True

    def keep_end_wait(self) -> list[SegmentEvent]:
        """The awaited reading is back (`await_reading`): the wait it leaves ends the utterance
        now if the silence has already lasted that long."""
        self._awaiting = False
        if self._in_pause() and self._silent_long_enough():
            return [self._close_after_silence()]
        return []

    def _in_pause(self) -> bool:
        return self.options.mode == "vad" and self._active and self._silence > 0

    def _push_idle(self, probability: float) -> list[SegmentEvent]:
        if self.options.mode == "ptt":
            return []
        # Hysteresis on the way in too: a run of windows above the *end* threshold that peaks
        # above the start threshold (soft voices such as falsetto hover around 0.4-0.6).
        o = self.options
        starts = self._gate.starts(probability)
        soft = self._loud and probability >= o.soft_threshold
        soft_starts = self._soft_onset.push(self._loud, soft)
        if starts:
            # Keep the whole run that led here plus `preroll` windows before it.
            run = self._gate.onset.run
            return [self._open(self._preroll + run, speech_windows=run)]
        if soft_starts:
            # The same lead as a Silero start: background noise well above digital silence
            # can make a long run loud, and more leading noise changes what Whisper writes.
            run = self._soft_onset.run
            started = self._open(self._preroll + o.start_windows, speech_windows=run)
            self._soft = self._doubted = True
            return [started]
        return []

    def _track_level(self, window: Audio) -> None:
        """Update the noise floor and whether this window is loud above it (the soft path)."""
        o = self.options
        self._level = float(window_levels_db(window)[0])
        self._recent_db.append(self._level)
        floor = max(o.min_floor_db, min(self._recent_db))
        self._loud = o.soft_snr_db > 0 and self._level >= floor + o.soft_snr_db

    def _open(self, ring_windows: int, speech_windows: int) -> SegmentStarted:
        # Never re-send audio that already belonged to the previous utterance.
        fresh = (self._position - self._floor) // VAD_WINDOW
        ring_windows = min(ring_windows, fresh, len(self._ring))
        windows = list(self._ring)[-ring_windows:] if ring_windows else []
        self._active = True
        self._start = self._position - sum(len(w) for w in windows)
        self._windows = windows
        self._levels = [float(window_levels_db(w)[0]) for w in windows]
        self._silence = 0
        self._speech_windows = speech_windows
        self._last_speech_end = self._position
        self._gate.clear()
        self._soft_onset.clear()
        audio = np.concatenate(windows) if windows else np.zeros(0, dtype=np.float32)
        return SegmentStarted(start=self._start, audio=audio, speech=speech_windows > 0)

    def _push_active(self, window: Audio, probability: float) -> list[SegmentEvent]:
        o = self.options
        self._windows.append(window)
        self._levels.append(self._level)
        if o.mode == "vad":
            is_speech = self._gate.holds(probability)
        else:
            is_speech = probability >= o.ptt_threshold
        # Energy carries a soft-started utterance to its end (on the shared set, also through
        # a pause in the JFK clip that Whisper needs to hear as one); only one Silero never
        # became sure of is decoded as doubtful.
        self._doubted &= probability < o.start_threshold
        is_speech |= self._soft and self._loud
        events: list[SegmentEvent] = [SegmentAudio(audio=window, speech=is_speech)]
        if is_speech:
            self._silence = 0
            self._end_wait_shortened = self._end_wait_extended = self._awaiting = False
            self._speech_windows += 1
            self._last_speech_end = self._position
        else:
            self._silence += 1
        if self._silence == o.windows(o.end_pad_ms) and self._silence and self._speech_windows:
            # The end pad is complete: the audio so far is what a final would decode (VAD: if
            # the silence goes on; push-to-talk: if the key is let go before speech resumes).
            events.append(SegmentPaused(at=self._position, soft=self._doubted))
        if o.mode == "vad" and self._silent_long_enough():
            events.append(self._close_after_silence())
        elif len(self._windows) * VAD_WINDOW * 1000 >= o.max_ms * SAMPLE_RATE:
            events.extend(self._split())
        return events

    def _silent_long_enough(self) -> bool:
        return self._silence * VAD_WINDOW * 1000 >= self._min_silence() * SAMPLE_RATE

    def _min_silence(self) -> int:
        """Milliseconds of silence that end the utterance in flight."""
        o = self.options
        if self._end_wait_shortened:
            return min(o.finished_silence_ms, o.min_silence_ms)
        spoken = (self._last_speech_end - self._start) * 1000 // SAMPLE_RATE
        wait = o.min_silence_ms if spoken >= o.short_ms else max(o.min_silence_ms,
                                                                 o.short_silence_ms)
        return max(wait, o.open_silence_ms) if self._end_wait_extended or self._awaiting else wait

    def _close_after_silence(self) -> SegmentEnded:
        """VAD mode: the silence was long enough; the end pad stays with the utterance."""
        pad = self.options.windows(self.options.end_pad_ms) * VAD_WINDOW
        end = min(self._position, self._last_speech_end + pad)
        return self._close(end, self._last_speech_end)

    def cut(self, end: int, speech_end: int) -> list[SegmentEvent]:
        """End the utterance in flight at stream sample ``end`` (a window boundary inside it,
        after its first window), its last speech at ``speech_end``, although more audio has
        come since: that audio starts the next utterance. For a long utterance that paused at a
        sentence end and went on (module docstring). Anything else: no events."""
        windows = self._window_index(end)
        if not self._active or windows is None or speech_end > end:
            return []
        return self._cut_at(windows, speech_end, self._last_speech_end, self._silence)

    def _window_index(self, sample: int) -> int | None:
        """How many windows of the utterance in flight lie before ``sample`` (None: not at a
        window boundary strictly inside it)."""
        at = self._start
        for i, window in enumerate(self._windows):
            if at == sample:
                return i if i > 0 else None
            at += len(window)
        return None

    def _split(self) -> list[SegmentEvent]:
        """Cut the over-long utterance at its quietest window in the second half."""
        cut = quietest(self._levels, len(self._levels) // 2, len(self._levels))
        split = self._start + sum(len(w) for w in self._windows[:cut])
        return self._cut_at(cut, min(self._last_speech_end, split), self._position, 0)

    def _cut_at(self, windows: int, speech_end: int, last_speech_end: int, silence: int
                ) -> list[SegmentEvent]:
        """End the utterance after its first ``windows`` windows; the rest opens the next one,
        whose last speech ended at ``last_speech_end``, ``silence`` windows ago."""
        split = self._start + sum(len(w) for w in self._windows[:windows])
        rest = self._windows[windows:]
        rest_levels = self._levels[windows:]
        speech_windows, soft, doubted = self._speech_windows, self._soft, self._doubted
        ended = self._close(split, speech_end)  # (the hints were about the utterance it ends)
        self._active = True
        self._soft, self._doubted = soft, doubted
        self._silence = silence
        self._start = split
        self._windows = rest
        self._levels = rest_levels
        self._speech_windows = speech_windows  # unknown split of the count; any > 0 will do
        self._last_speech_end = last_speech_end
        audio = np.concatenate(rest) if rest else np.zeros(0, dtype=np.float32)
        return [ended, SegmentStarted(start=split, audio=audio)]

    def _close(self, end: int, speech_end: int) -> SegmentEnded:
        ended = SegmentEnded(end=end, speech_end=speech_end, speech_windows=self._speech_windows,
                             soft=self._doubted)
        self._floor = end
        self._active = False
        self._end_wait_shortened = self._end_wait_extended = self._awaiting = False
        self._soft = self._doubted = False
        self._windows = []
        self._levels = []
        self._silence = 0
        self._gate.clear()
        return ended
