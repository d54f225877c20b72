"""Capturing what the computer plays, behind one interface: `output_capture(target)` returns an
`engine.audio.sources.AudioSource` like the microphone's, so the live engine, the remote client
and captions read it the same way.

Targets (`CaptureTarget.parse`):
- ``system``: what the computer plays, the monitor of the default output, following it when the
  default output changes (headphones plugged in, a Bluetooth device);
- ``app:NAME``: one application's playback stream (NAME: a fragment of its name, as
  `playing_apps` lists them), picked up again when the app stops and starts playing;
- ``device:NAME``: one named capture device or monitor, as is (an error when it goes away).

Linux: PulseAudio's API (PipeWire serves it too), `engine.audio.pulse`. Windows (WASAPI loopback)
and macOS (ScreenCaptureKit) would be further backends of this same function; they cannot be
built or tested here, so there they raise `AudioDeviceError` saying so.
"""

from __future__ import annotations

import sys

from engine.audio.sources import AudioSource
from engine.audio.targets import CaptureTarget, PlayingApp
from engine.errors import AudioDeviceError

__all__ = ["CaptureTarget", "PlayingApp", "output_capture", "playing_apps"]

def output_capture(target: CaptureTarget) -> AudioSource:
    """An audio source recording ``target`` (not started)."""
    if sys.platform.startswith("linux"):
        from engine.audio.pulse import PulseCapture

        return PulseCapture(target)
    raise AudioDeviceError(
        f"capturing {target.describe()} is not available on {sys.platform} yet: it needs a "
        "WASAPI loopback (Windows) or ScreenCaptureKit (macOS) backend behind "
        "engine.audio.outputs.output_capture")


def playing_apps() -> list[PlayingApp]:
    """The applications playing sound now (for a picker). [] where capture isn't available."""
    if not sys.platform.startswith("linux"):
        return []
    from engine.audio.pulse import list_playing_apps

    return list_playing_apps()
