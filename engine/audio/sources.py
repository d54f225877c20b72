"""Audio sources: a microphone (through engine.audio.devices, the one importer of sounddevice)
and a file played as one.

Both deliver 16 kHz mono float32 blocks through `read(timeout)` on the consumer's thread.

`MicrophoneSource`: PortAudio calls our callback on its own thread; the callback only copies the
block into a bounded queue. When the consumer falls behind, the *oldest* block is dropped (fresh
audio matters more for live text) and counted in `dropped`. Resampling from the device's native
rate happens in `read()`, off the audio thread. A device that cannot be opened raises
`AudioDeviceError` from `start()`; one that stops delivering raises it from `read()` (after
``stall_timeout_s`` without audio), so a pulled-out microphone is an error, never a hang
(with ``fallback``, the system default takes over instead, and the user is told). A
stall of the whole process (the callback needs the GIL like any Python thread) is not the
device's fault: the reader sees it as a wait that overran, and the device gets a fresh grace
period.

`FileSource`: the file as if it were spoken into a microphone, in real time (blocks are handed
out when their time comes) or in simulated time (as fast as they are read; the consumer then
uses `position` as its clock).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from engine.audio.devices import (
    InputDevice,
    find_input,
    list_inputs,
    pulse_source_env,
    pulse_sources,
    sounddevice_module,
)
from engine.audio.resample import StreamResampler
from engine.errors import AudioDeviceError
from engine.types import SAMPLE_RATE, Audio

log = logging.getLogger(__name__)


class AudioSource(Protocol):
    """What the live engine reads from. ``simulated`` sources define time by `position`."""

    simulated: bool

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def read(self, timeout: float) -> Audio | None:
        """The next block, or None if none came within ``timeout`` s (or the source is done)."""
        ...

    def take_notice(self) -> str | None:
        """What to tell the user about the device, once (a microphone that went and the default
        that took over); None: nothing, and always for sources without a device."""
        ...

    @property
    def finished(self) -> bool:
        """No more audio will come: stopped or at end of file, and everything read."""
        ...

    @property
    def position(self) -> int:
        """16 kHz samples handed out by `read()` so far."""
        ...

    @property
    def captured(self) -> int:
        """16 kHz samples captured so far (ahead of `position` when the reader lags)."""
        ...

    @property
    def dropped(self) -> int:
        """Samples lost to overflow (at the device's rate)."""
        ...


_sounddevice = sounddevice_module  # the one importer of sounddevice is engine.audio.devices


def list_input_devices() -> list[tuple[int, str, int]]:
    """(index, name, native rate) of every input-capable device."""
    sd = _sounddevice()
    return [(i, str(d["name"]), int(d["default_samplerate"]))
            for i, d in enumerate(sd.query_devices()) if d["max_input_channels"] > 0]


def resolve_input_device(device: int | str | None) -> tuple[int, str, int]:
    """Find an input device by index, exact name or case-insensitive name fragment."""
    inputs = list_input_devices()
    if not inputs:
        raise AudioDeviceError("no audio input device found (is a microphone or PulseAudio there?)")
    if device is None:
        default = int(_sounddevice().default.device[0])
        return next((d for d in inputs if d[0] == default), inputs[0])
    if isinstance(device, int) or (isinstance(device, str) and device.isdigit()):
        found = [d for d in inputs if d[0] == int(device)]
    else:
        found = [d for d in inputs if d[1] == device] or [
            d for d in inputs if device.lower() in d[1].lower()]
    if not found:
        names = ", ".join(f"{i}: {n}" for i, n, _ in inputs)
        raise AudioDeviceError(f"no input device {device!r}; available: {names}")
    return found[0]


def device_notice(source: AudioSource) -> str | None:
    """What a source has to tell the user about its device (`AudioSource.take_notice`), once."""
    notice = source.take_notice()
    return str(notice) if notice else None


# A read that returns this much later than its timeout means this process, not the device,
# stopped: see MicrophoneSource._check_alive.
PROCESS_STALL_S = 0.25
# A sound-server microphone silent this long is looked for in the server's list (unplugged?).
GONE_CHECK_S = 0.5


class MicrophoneSource:
    """Live capture from an input device: a name (as the desktop shows it, or a fragment of
    one), a PortAudio index, or None for the system default.

    ``fallback``: a named device that is not there, or that vanishes while recording (a USB
    headset pulled out), is replaced by the system default instead of failing; the switch is
    reported by `take_notice()`, the audio already captured is kept, and the timeline goes on
    (``captured`` and ``position`` never jump back). While on the default, the named device is
    looked for every ``return_check_s`` and taken back when it reappears.
    """

    simulated = False

    def __init__(self, device: int | str | None = None, *, block_ms: int = 32,
                 max_queue_s: float = 5.0, stall_timeout_s: float = 5.0,
                 fallback: bool = False, return_check_s: float = 2.0) -> None:
        if block_ms <= 0 or max_queue_s <= 0 or stall_timeout_s <= 0:
            raise ValueError("block_ms, max_queue_s and stall_timeout_s must be > 0")
        self._device = device if device != "" else None
        self._fallback = fallback
        self._return_check_s = return_check_s
        self._block_ms = block_ms
        self._max_queue_s = max_queue_s
        self._stall_timeout_s = stall_timeout_s
        # Blocks at the device's rate, each with the resampler of the device it came from.
        self._queue: queue.Queue[tuple[StreamResampler, npt.NDArray[np.float32]]] = \
            queue.Queue(maxsize=1)
        self._stream: Any = None
        self._resampler = StreamResampler(SAMPLE_RATE)
        self._stopped = threading.Event()
        self._failure: str | None = None
        self._position = 0
        self._captured_before = 0  # 16 kHz samples captured from earlier devices
        self._captured_native = 0
        self._discarded_native = 0  # captured, then dropped from the full queue
        self._dropped = 0
        self._rate = SAMPLE_RATE
        self._last_block_at = 0.0
        self._on_fallback = False
        self._next_return_check = 0.0
        self._pulse_source: str | None = None
        self._next_gone_check = 0.0
        self._notices: queue.Queue[str] = queue.Queue()
        self._wanted: tuple[int | str | None] | None = None  # a switch asked for by prefer()
        self.device_name = ""

    @property
    def finished(self) -> bool:
        return self._stopped.is_set() and self._queue.empty()

    @property
    def position(self) -> int:
        return self._position

    @property
    def captured(self) -> int:
        # Blocks dropped from the queue never reach `position`; leaving them out keeps this on
        # the same timeline, so push-to-talk boundaries don't drift late after an overflow.
        native = self._captured_native - self._discarded_native
        return self._captured_before + native * SAMPLE_RATE // self._rate

    @property
    def dropped(self) -> int:
        return self._dropped

    def prefer(self, device: str | None) -> None:
        """Capture from ``device`` (a name; None: the system default) from now on, without
        stopping: the switch happens on the reading thread, between two blocks."""
        self._wanted = (device or None,)

    def _take_preference(self) -> None:
        wanted, self._wanted = self._wanted, None
        if wanted is None or self._stopped.is_set() or self._stream is None:
            return
        self._device = wanted[0]
        device = self._find(self._device)
        if self._device is not None and device is None:
            self._switch(None, f"The microphone {self._device!r} is not connected; recording "
                               "from the system default microphone")
        else:
            shown = device.name if device is not None else "the system default microphone"
            self._switch(device, f"Recording from {shown}")
            self._on_fallback = False

    def take_notice(self) -> str | None:
        """A message for the user about a device switch, once; None when there is none."""
        try:
            return self._notices.get_nowait()
        except queue.Empty:
            return None

    def start(self) -> None:
        self._queue = queue.Queue(maxsize=max(2, int(self._max_queue_s * 1000 / self._block_ms)))
        self._stopped.clear()
        device = self._find(self._device)
        if device is None and self._device is not None:
            missing = f"microphone {self._device!r} is not connected"
            if not self._fallback:
                names = ", ".join(repr(d.name) for d in list_inputs())
                raise AudioDeviceError(f"{missing}; available: {names or 'none'}")
            self._notices.put(f"The {missing}; recording from the system default microphone")
            self._on_fallback = True
            self._next_return_check = time.monotonic() + self._return_check_s
        self._open(device)

    def _find(self, wanted: int | str | None) -> InputDevice | None:
        if wanted is None:
            return None
        return find_input(wanted)

    def _open(self, device: InputDevice | None) -> None:
        """Open ``device`` (None: the system default) and capture from it."""
        sd = sounddevice_module()
        wanted: int | str | None = None
        if device is not None:
            wanted = device.index if device.pulse_source is None else "pulse"
        index, name, rate = resolve_input_device(wanted)
        if device is not None:
            name = device.name
        elif self._device is not None or self._on_fallback:
            name = next((d.name for d in list_inputs() if d.is_default), name)
        blocksize = max(1, rate * self._block_ms // 1000)
        self._captured_before = self.captured
        self._captured_native = self._discarded_native = 0
        self._rate, self.device_name = rate, name
        self._pulse_source = device.pulse_source if device is not None else None
        self._resampler = StreamResampler(rate)
        self._failure = None
        try:
            with pulse_source_env(device.pulse_source if device is not None else None):
                stream = sd.InputStream(
                    device=index, channels=1, samplerate=rate, dtype="float32",
                    blocksize=blocksize, callback=self._callback,
                    finished_callback=self._on_finished)
                stream.start()
        except Exception as exc:  # noqa: BLE001 - PortAudioError and ValueError alike
            raise AudioDeviceError(f"could not open input device {name!r}: {exc}") from exc
        self._stream = stream
        self._last_block_at = time.monotonic()
        log.info("capturing from %r (#%d) at %d Hz", name, index, rate)

    def _close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.stop()
                stream.close()
            except Exception as exc:  # noqa: BLE001 - a vanished device may fail to close
                log.warning("closing the input stream failed: %s", exc)

    def stop(self) -> None:
        self._stopped.set()
        self._close()

    def read(self, timeout: float) -> Audio | None:
        if self._wanted is not None:
            self._take_preference()
        asked_at = time.monotonic()
        try:
            resampler, block = self._queue.get(timeout=timeout)
        except queue.Empty:
            try:
                self._check_alive(overslept=time.monotonic() - asked_at - timeout)
            except AudioDeviceError as exc:
                if not self._fallback or self._on_fallback or self._device is None:
                    raise
                self._switch(None, f"The microphone {self.device_name!r} stopped ({exc}); "
                             "recording from the system default microphone. Nothing already "
                             "heard is lost")
            self._maybe_return()
            return None
        audio = resampler.process(block)
        self._position += len(audio)
        self._maybe_return()
        return audio

    def _switch(self, device: InputDevice | None, notice: str) -> None:
        """Close the current device and capture from ``device`` (None: the default) instead;
        blocks already queued are kept and read first."""
        log.warning("%s", notice)
        self._close()
        self._on_fallback = device is None and self._device is not None
        self._next_return_check = time.monotonic() + self._return_check_s
        self._open(device)
        self._notices.put(notice)

    def _maybe_return(self) -> None:
        """On the default after a fallback: take the named device back once it is there."""
        if not self._on_fallback or self._stopped.is_set():
            return
        now = time.monotonic()
        if now < self._next_return_check:
            return
        self._next_return_check = now + self._return_check_s
        device = self._find(self._device)
        if device is not None:
            self._switch(device, f"The microphone {device.name!r} is back; recording from it")

    def _gone(self) -> bool:
        """A sound-server microphone that is no longer listed (asked at most every
        GONE_CHECK_S: a microphone delivers a block every few ms, so this runs only when
        one stopped)."""
        if self._pulse_source is None or time.monotonic() < self._next_gone_check:
            return False
        self._next_gone_check = time.monotonic() + GONE_CHECK_S
        listed = pulse_sources()
        return listed is not None and all(d.pulse_source != self._pulse_source for d in listed)

    def _check_alive(self, overslept: float = 0.0) -> None:
        if self._stopped.is_set():
            return
        if self._failure is not None:
            raise AudioDeviceError(self._failure)
        if overslept > PROCESS_STALL_S:
            # This thread woke up long after it asked to: the whole process was stalled (a GUI
            # call held the GIL, say a clipboard read waiting out a hung owner; or the machine
            # slept), and the audio callback, which needs the GIL too, could not deliver either.
            # Not the device's fault: it gets a fresh grace period.
            log.warning("the process stalled for %.1f s; audio from that time is lost", overslept)
            self._last_block_at = max(self._last_block_at, time.monotonic())
            return
        silent_for = time.monotonic() - self._last_block_at
        if silent_for > GONE_CHECK_S and self._gone():
            raise AudioDeviceError(f"input device {self.device_name!r} was disconnected")
        if silent_for > self._stall_timeout_s:
            raise AudioDeviceError(
                f"no audio from input device {self.device_name!r} for {silent_for:.1f} s")

    def _callback(self, indata: npt.NDArray[np.float32], frames: int, _time: Any,
                  status: Any) -> None:
        # PortAudio's thread: copy and enqueue only. Overflow policy: drop the oldest block.
        # Liveness is stamped here, where the device delivers, not where the reader reads: a
        # reader that was busy must not mistake its own delay for a dead microphone.
        self._last_block_at = time.monotonic()
        if status and status.input_overflow:
            self._dropped += frames
        item = (self._resampler, indata[:, 0].copy())
        self._captured_native += frames
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            with contextlib.suppress(queue.Empty):
                oldest = len(self._queue.get_nowait()[1])
                self._dropped += oldest
                self._discarded_native += oldest
            self._queue.put_nowait(item)

    def _on_finished(self) -> None:
        if not self._stopped.is_set():
            self._failure = f"input device {self.device_name!r} stopped delivering audio"


class FileSource:
    """A file (or an array) played as a microphone, in real or simulated time."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, audio: Audio | None = None,
                 realtime: bool = False, block_ms: int = 32, lead_silence_s: float = 0.0,
                 tail_silence_s: float = 0.0) -> None:
        if (path is None) == (audio is None):
            raise ValueError("give exactly one of path or audio")
        if block_ms <= 0 or lead_silence_s < 0 or tail_silence_s < 0:
            raise ValueError("block_ms must be > 0 and silences >= 0")
        self.simulated = not realtime
        self._path = path
        self._audio = audio
        self._block = SAMPLE_RATE * block_ms // 1000
        self._lead = int(lead_silence_s * SAMPLE_RATE)
        self._tail = int(tail_silence_s * SAMPLE_RATE)
        self._data: Audio = np.zeros(0, dtype=np.float32)
        self._position = 0
        self._started_at = 0.0
        self._stopped = threading.Event()

    @property
    def finished(self) -> bool:
        return self._stopped.is_set() or self._position >= len(self._data)

    @property
    def position(self) -> int:
        return self._position

    @property
    def captured(self) -> int:
        if self.simulated:
            return self._position
        elapsed = int((time.monotonic() - self._started_at) * SAMPLE_RATE)
        return min(len(self._data), max(self._position, elapsed))

    @property
    def dropped(self) -> int:
        return 0

    @property
    def duration(self) -> int:
        """Total samples this source will deliver (silences included); known after start()."""
        return len(self._data)

    def start(self) -> None:
        if self._audio is None:
            from engine.audio.decode import load_audio  # raises AudioDecodeError, clearly

            assert self._path is not None
            self._audio = load_audio(self._path)
        silence = np.zeros
        self._data = np.concatenate([silence(self._lead, np.float32), self._audio,
                                     silence(self._tail, np.float32)])
        self._position = 0
        self._stopped.clear()
        self._started_at = time.monotonic()

    def stop(self) -> None:
        self._stopped.set()

    def take_notice(self) -> str | None:
        return None  # a file has no device to lose

    def read(self, timeout: float) -> Audio | None:
        if self.finished:
            return None
        end = min(len(self._data), self._position + self._block)
        if not self.simulated:
            due = self._started_at + end / SAMPLE_RATE
            wait = due - time.monotonic()
            # Wait for the block's time to come, waking early if stop() is called.
            if wait > 0 and self._stopped.wait(min(wait, timeout)):
                return None
            if time.monotonic() < due:
                return None
        block = self._data[self._position:end]
        self._position = end
        return block
