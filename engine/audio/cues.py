"""Start/stop cues: short soft tones played on the default output device, never recorded.

`cue_tone` makes them with numpy: ``CUE_MS`` of two partials with raised-cosine fades (no click),
rising for "start", falling for "stop", scaled by the volume (0-100; 100 peaks at
``MAX_PEAK``). `CuePlayer.play` hands the tone to PortAudio on a short worker thread (opening an
output stream can take tens of milliseconds on PulseAudio) and returns at once, so the GUI never
waits on the sound device. A failure to play is logged, never raised: a cue is a courtesy.

Keeping the cue out of the recording is the caller's half: the live engine mutes the captured
audio from the press on (engine.live.LocalLiveEngine.mute_input), at first for up to
``MUTE_GUARD_S``; once the tone has been played out (`play`'s ``on_done`` gets the seconds that
took), the mute is cut down to that time plus ``ECHO_TAIL_S`` (the input side's buffering), so
speech that follows the cue is kept. The stop cue is only played once the utterance's audio has
been cut (its SpeechEnded).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.audio.sources import _sounddevice

log = logging.getLogger(__name__)

CUE_MS = 80
FADE_MS = 20
RATE = 48000
MAX_PEAK = 0.5
TONES = {"start": (660.0, 880.0), "stop": (880.0, 587.0)}  # Hz at the start, at the end
# Muted from the press until the player reports (it always does, even on failure) ...
MUTE_GUARD_S = 1.5
# ... then up to when the tone was played out, plus what the input side may still hold.
ECHO_TAIL_S = 0.15


def cue_tone(kind: str, volume: int, rate: int = RATE) -> npt.NDArray[np.float32]:
    """The cue as float32 mono samples at ``rate``; silence for volume 0."""
    if kind not in TONES:
        raise ValueError(f"cue must be one of {', '.join(TONES)} (got {kind!r})")
    if not 0 <= volume <= 100:
        raise ValueError("volume must be between 0 and 100")
    n = rate * CUE_MS // 1000
    t = np.arange(n) / rate
    start_hz, end_hz = TONES[kind]
    # A glide: the phase is the integral of a linearly changing frequency.
    phase = 2 * np.pi * (start_hz * t + (end_hz - start_hz) * t * t / (2 * t[-1] + 2 / rate))
    tone = 0.8 * np.sin(phase) + 0.2 * np.sin(2 * phase)
    fade = rate * FADE_MS // 1000
    ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(fade) / fade)
    envelope = np.ones(n)
    envelope[:fade], envelope[-fade:] = ramp, ramp[::-1]
    peak = MAX_PEAK * (volume / 100.0) ** 2  # perceived loudness: roughly square law
    out = tone * envelope
    samples: npt.NDArray[np.float32] = (out / np.max(np.abs(out)) * peak).astype(np.float32)
    return samples


class CuePlayer:
    """Plays cues on the default output device without blocking the caller."""

    def __init__(self, rate: int = RATE) -> None:
        self.rate = rate
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def play(self, kind: str, volume: int, on_done: Callable[[float], None] | None = None
             ) -> threading.Thread | None:
        """Start playing; returns the worker (tests join it), None when there is nothing to play.
        ``on_done(seconds)`` is called on the worker once the tone has been played out (or has
        failed to play: then 0.0), with the seconds since this call."""
        if volume <= 0:
            return None
        tone = cue_tone(kind, volume, self.rate)
        thread = threading.Thread(target=self._play, args=(tone, time.monotonic(), on_done),
                                  name=f"sottovoce-cue-{kind}", daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        return thread

    def _play(self, tone: npt.NDArray[np.float32], asked: float,
              on_done: Callable[[float], None] | None) -> None:
        took = 0.0
        try:
            sd: Any = _sounddevice()
            # Leaving the block stops the stream, which waits until the tone has been played.
            with sd.OutputStream(samplerate=self.rate, channels=1, dtype="float32",
                                 latency="low") as stream:
                stream.write(tone.reshape(-1, 1))
            took = time.monotonic() - asked
        except Exception as exc:  # noqa: BLE001 - the thread's top; a cue is never worth a crash
            log.warning("could not play the cue: %s", exc)
        if on_done is not None:
            try:
                on_done(took)
            except Exception:  # noqa: BLE001 - the thread's top
                log.exception("cue callback failed")

    def wait(self, timeout: float = 5.0) -> None:
        """Wait for the cues being played (before quitting)."""
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout)
