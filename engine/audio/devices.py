"""The microphones a person can choose from, by the names their desktop shows.

On Linux the sound server (PulseAudio, or PipeWire's pulse service) knows the microphones by
name ("Blue Yeti", "Built-in Audio Analog Stereo"); PortAudio, through ALSA, sees only its
"pulse" and "default" devices. So where ``pactl`` answers, the list is the server's sources
(monitors of outputs left out), and a source is opened through PortAudio's "pulse" device with
``PULSE_SOURCE`` naming it (libpulse reads it when the stream connects; it is set only around
that call, under a lock). Elsewhere (Windows, macOS, plain ALSA) the list is PortAudio's.

A choice is remembered by name, never by index: an index changes when a USB headset is
plugged in. `find_input` matches an exact name first, then a case-insensitive fragment, and
takes a number as a PortAudio index (``sottovoce listen --device 3``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from engine.errors import AudioDeviceError, missing_dependency

log = logging.getLogger(__name__)

PACTL_TIMEOUT_S = 3.0
_env_lock = threading.Lock()


@dataclass(frozen=True)
class InputDevice:
    """A microphone. ``name`` is what the user sees and what the settings keep;
    ``pulse_source`` the sound server's id for it, or None for a PortAudio device (``index``)."""

    name: str
    pulse_source: str | None = None
    index: int | None = None
    is_default: bool = False


def pulse_sources() -> list[InputDevice] | None:
    """The sound server's microphones (no monitors), default first; None without ``pactl`` or
    a server."""
    tool = shutil.which("pactl")
    if tool is None:
        return None
    try:
        listed = subprocess.run([tool, "-f", "json", "list", "sources"], capture_output=True,
                                text=True, timeout=PACTL_TIMEOUT_S, check=True).stdout
        default = subprocess.run([tool, "get-default-source"], capture_output=True, text=True,
                                 timeout=PACTL_TIMEOUT_S, check=True).stdout.strip()
        sources = json.loads(listed)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        log.debug("pactl unavailable: %s", exc)
        return None
    devices = [InputDevice(str(s.get("description") or s["name"]), str(s["name"]),
                           is_default=s["name"] == default)
               for s in sources if isinstance(s, dict) and "name" in s
               and not s.get("monitor_source") and not str(s["name"]).endswith(".monitor")]
    return sorted(devices, key=lambda d: not d.is_default)


def sounddevice_module() -> Any:
    """The ``sounddevice`` module (PortAudio), or a clear error."""
    try:
        import sounddevice
    except ImportError as exc:
        raise missing_dependency("sounddevice", "client") from exc
    except OSError as exc:  # the PortAudio library itself is missing
        raise AudioDeviceError(f"PortAudio is not available ({exc}); install libportaudio2") from exc
    return sounddevice


def portaudio_inputs() -> list[InputDevice]:
    sd = sounddevice_module()
    default = int(sd.default.device[0])
    return [InputDevice(str(d["name"]), index=i, is_default=i == default)
            for i, d in enumerate(sd.query_devices()) if d["max_input_channels"] > 0]


def list_inputs() -> list[InputDevice]:
    """Every microphone, by name, the system default first."""
    pulse = pulse_sources()
    if pulse:
        return pulse
    return sorted(portaudio_inputs(), key=lambda d: not d.is_default)


def has_microphone() -> bool:
    """Whether there is a microphone at all. With a sound server, its own list decides:
    without a microphone it makes a monitor the default input, and PortAudio's "default"
    would record what the computer plays as if it were the microphone."""
    pulse = pulse_sources()
    if pulse is not None:
        return bool(pulse)
    try:
        return bool(portaudio_inputs())
    except AudioDeviceError:
        return False


def find_input(wanted: str | int, devices: list[InputDevice] | None = None) -> InputDevice | None:
    """The device ``wanted`` names: a PortAudio index (a number), an exact name, or a
    case-insensitive fragment of one; the sound server's microphones first, then PortAudio's
    own devices ("pulse", "default", "hw:1,0"); None when none matches."""
    if isinstance(wanted, int) or wanted.isdigit():
        return next((d for d in portaudio_inputs() if d.index == int(wanted)), None)
    for listed in ([list_inputs() if devices is None else devices]
                   + ([portaudio_inputs()] if devices is None else [])):
        exact = [d for d in listed if wanted in (d.name, d.pulse_source)]
        fragment = [d for d in listed if wanted.lower() in d.name.lower()]
        if exact or fragment:
            return (exact or fragment)[0]
    return None


@contextlib.contextmanager
def pulse_source_env(source: str | None) -> Iterator[None]:
    """``PULSE_SOURCE`` set to ``source`` while a stream is opened (None: left alone)."""
    if source is None:
        yield
        return
    with _env_lock:
        before = os.environ.get("PULSE_SOURCE")
        os.environ["PULSE_SOURCE"] = source
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("PULSE_SOURCE", None)
            else:
                os.environ["PULSE_SOURCE"] = before
