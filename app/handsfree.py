"""Hands-free dictation: in toggle mode the recording stops itself after a silence.

`AutoStop` is the decision, pure (times are passed in): fed the input level readings of the
engine (`LevelChanged`, about ten a second) while recording, it says when ``after_s`` of silence
has followed the last speech. Within a push-to-talk utterance the engine reports no speech
start/end of its own (SpeechStarted/SpeechEnded are the press and the release), so speech here
is a level above the room's noise floor by ``MARGIN_DB`` and above ``MIN_SPEECH_DB``. The
noise floor is tracked all the time, not only while recording (`observe`): the quietest recent
reading, allowed to rise ``FLOOR_RISE_DB`` per reading so a room that got louder is followed;
digital silence (a muted start cue, -100 dBFS) says nothing about the room and is left out.
Readings arrive after their audio, so one of the audio before the press (the previous
recording's stop cue, say) can arrive after it: a reading whose stream position (``end``) is
not past the press's (``since``) is never speech of this recording. Before any speech the wait is ``after_s`` plus
``FIRST_WORD_GRACE_S``: time to start talking after the start cue. A recording that heard no
speech still stops, and inserts nothing (the engine gives an empty final for it).
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_SPEECH_DB = -50.0  # below this a reading is silence whatever the noise floor
MARGIN_DB = 12.0  # speech is this much louder than the room's noise floor
FIRST_WORD_GRACE_S = 2.0
FLOOR_RISE_DB = 0.05  # per reading: about 0.5 dB a second
DIGITAL_SILENCE_DB = -99.0


@dataclass
class AutoStop:
    """``after_s`` 0 never stops. Use: start(now) at the press, level(db, now) per reading;
    True means "stop now" (once: it then stays off until the next start)."""

    after_s: float
    running: bool = False
    heard_speech: bool = False
    since: int | None = None  # the press's stream position, once known
    _last_sound: float = 0.0
    _floor_db: float | None = None

    def start(self, now: float) -> None:
        self.running = self.after_s > 0
        self.heard_speech = False
        self.since = None
        self._last_sound = now + FIRST_WORD_GRACE_S

    def stop(self) -> None:
        self.running = False

    @property
    def floor_db(self) -> float | None:
        return self._floor_db

    def observe(self, rms_db: float) -> bool:
        """Track the noise floor with one reading; True when the reading is speech."""
        floor = self._floor_db
        # Until a floor is known, speech must clear the minimum by the margin too.
        threshold = MIN_SPEECH_DB + MARGIN_DB if floor is None else max(MIN_SPEECH_DB,
                                                                         floor + MARGIN_DB)
        speech = rms_db >= threshold
        if rms_db > DIGITAL_SILENCE_DB and not (floor is None and speech):
            self._floor_db = rms_db if floor is None else min(rms_db, floor + FLOOR_RISE_DB)
        return speech

    def level(self, rms_db: float, now: float, end: int = -1) -> bool:
        """One reading (any time) of the audio up to stream position ``end`` (-1: unknown);
        True when the recording should stop now."""
        speech = self.observe(rms_db)
        if not self.running:
            return False
        if speech and self.since is not None and 0 <= end <= self.since:
            return False  # audio from before the press, delivered late
        if speech:
            self.heard_speech = True
            self._last_sound = max(self._last_sound, now)
            return False
        if now - self._last_sound >= self.after_s:
            self.running = False
            return True
        return False
