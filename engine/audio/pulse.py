"""Capture of what the computer plays on Linux, through PulseAudio's API (PipeWire's
pipewire-pulse serves the same API). The only module importing `pulsectl`.

`pulsectl` (a well-kept binding of libpulse's introspection API) finds what to record (the
default output's monitor, an app's playback stream) and tells us when that changes; the
recording stream itself is PulseAudio's own recorder, `parec` (pulseaudio-utils), which
records a monitor (``-d``) or a single playback stream (``--monitor-stream=INDEX``) as raw
16 kHz mono float32 on a pipe: `pulsectl` has no recording streams, and a second hand-written
libpulse binding would be the ctypes code we want to avoid.

Threads (at the edge, as the microphone's PortAudio callback): a *watcher* listens to the
server's events (default output changed, streams added or removed) and re-resolves the target;
when it changed, the *recorder* is told to switch (its `parec` is ended and a new one started).
The recorder copies what `parec` writes into a bounded queue (drop-oldest, counted).
`read()` runs on the consumer's thread. When nothing is being recorded (the app is not playing,
the recorder is switching) or an app's stream has sent nothing for ``gap_fill_s`` (paused), it
hands out silence for the time that passed, so the timeline keeps pace with the clock and an
utterance cut off mid-word still ends. A monitor sends audio all the time, silence included: a
late block from it is only late (a busy machine), and no silence is made up in its place.
For one app the recorder also keeps a low-latency reader on the default output's monitor
(the *anchor*, its audio thrown away): an output with no low-latency client renders up to 2 s
ahead, and a stream that starts playing would have its first seconds mixed into the output
before its recording could begin; anchored, they are a few tens of milliseconds.
A ``device:`` target that goes away (or a server that goes away) raises `AudioDeviceError` from
`read()`: what was captured before has been handed out already.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shutil
import subprocess
import threading
import time
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from engine.audio.targets import CaptureTarget, PlayingApp
from engine.errors import AudioDeviceError
from engine.types import SAMPLE_RATE, Audio

log = logging.getLogger(__name__)

CLIENT_NAME = "Sottovoce captions"
# An app that has not played this long after the start is named as missing (a typo waits
# silently forever otherwise), once; the capture keeps waiting for it.
ABSENT_APP_NOTICE_S = 3.0
_APP_KEYS = ("application.name", "application.process.binary", "media.name")


def _pulsectl() -> Any:
    try:
        import pulsectl
    except ImportError as exc:  # the binding, or libpulse itself
        raise AudioDeviceError(
            f"capturing what the computer plays needs pulsectl and libpulse ({exc}): "
            "pip install pulsectl; apt install libpulse0") from exc
    return pulsectl


def _connect(name: str) -> Any:
    pulsectl = _pulsectl()
    try:
        return pulsectl.Pulse(name)
    except pulsectl.PulseError as exc:
        raise AudioDeviceError(
            f"no PulseAudio or PipeWire sound server to capture from ({exc})") from exc


def list_playing_apps() -> list[PlayingApp]:
    """The playback streams now open, newest first."""
    with _connect("sottovoce-list") as pulse:
        return [_app(s) for s in sorted(pulse.sink_input_list(), key=lambda s: -s.index)]


def _app(stream: Any) -> PlayingApp:
    props = stream.proplist
    name = props.get("application.name") or props.get("application.process.binary") or "?"
    return PlayingApp(int(stream.index), str(name), str(props.get("media.name", "")),
                      bool(getattr(stream, "corked", False)))


def resolve(pulse: Any, target: CaptureTarget) -> tuple[str, str] | None:
    """What to record for ``target`` now: ("device", source name) or ("stream", sink input
    index), or None when there is nothing (the app is not playing; the device is gone)."""
    if target.kind == "system":
        sink = pulse.server_info().default_sink_name
        for info in pulse.sink_list():
            if info.name == sink:
                return ("device", str(info.monitor_source_name))
        return None
    if target.kind == "device":
        names = {s.name for s in pulse.source_list()}
        return ("device", target.name) if target.name in names else None
    wanted = target.name.lower()
    streams = [s for s in pulse.sink_input_list()
               if any(wanted in str(s.proplist.get(k, "")).lower() for k in _APP_KEYS)]
    if not streams:
        return None
    # A playing stream before a paused (corked) one; the newest of those.
    best = max(streams, key=lambda s: (not getattr(s, "corked", False), s.index))
    return ("stream", str(best.index))


class PulseCapture:
    """An `AudioSource` recording a `CaptureTarget` (see the module docstring)."""

    simulated = False

    def __init__(self, target: CaptureTarget, *, block_ms: int = 32, max_queue_s: float = 5.0,
                 gap_fill_s: float = 1.0) -> None:
        self.target = target
        self._block_bytes = SAMPLE_RATE * block_ms // 1000 * 4
        self._queue: queue.Queue[npt.NDArray[np.float32]] = queue.Queue(
            maxsize=max(2, int(max_queue_s * 1000 / block_ms)))
        self._gap_fill_s = gap_fill_s
        self._stopped = threading.Event()
        self._changed = threading.Event()  # the server said something changed: re-resolve
        self._wake = threading.Event()  # the recorder's cue: the target changed, or stop
        self._lock = threading.Lock()
        self._want: tuple[str, str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._anchor: subprocess.Popen[bytes] | None = None
        self._failure: str | None = None
        self._position = 0
        self._dropped = 0
        self._covered_until = 0.0  # monotonic time up to which audio or silence was handed out
        self._threads: list[threading.Thread] = []
        self._watching: Any = None  # the watcher's connection, to wake it up on stop
        self.recording = ""  # what is being recorded now, for logs and tests
        self._absent_since: float | None = None  # an app target not found since (monotonic)

    # -- AudioSource ---------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self._stopped.is_set() and self._queue.empty()

    @property
    def position(self) -> int:
        return self._position

    @property
    def captured(self) -> int:
        return self._position + self._queue.qsize() * self._block_bytes // 4

    @property
    def dropped(self) -> int:
        return self._dropped

    def start(self) -> None:
        if shutil.which("parec") is None:
            raise AudioDeviceError("capturing what the computer plays needs parec "
                                   "(apt install pulseaudio-utils)")
        with _connect("sottovoce-resolve") as pulse:
            self._want = resolve(pulse, self.target)
        if self._want is None and self.target.kind == "device":
            raise AudioDeviceError(f"no audio device {self.target.name!r}")
        if self._want is None:
            log.info("%s: nothing playing yet; waiting for it", self.target.describe())
            if self.target.kind == "app":
                self._absent_since = time.monotonic()
        self._stopped.clear()
        if self.target.kind == "app":
            self._anchor = self._parec(["--device=@DEFAULT_MONITOR@"], subprocess.DEVNULL)
        self._covered_until = time.monotonic()
        for name, run in (("watch", self._watch), ("record", self._record)):
            thread = threading.Thread(target=run, name=f"sottovoce-pulse-{name}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self) -> None:
        """Stop and wait for the threads to end (none is left inside libpulse when the
        process exits)."""
        self._stopped.set()
        self._wake.set()
        self._end_process()
        anchor, self._anchor = self._anchor, None
        if anchor is not None and anchor.poll() is None:
            anchor.terminate()
            anchor.wait(5)
        watching = self._watching
        if watching is not None:
            with contextlib.suppress(Exception):  # already closed: nothing to wake
                watching.event_listen_stop()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)

    def read(self, timeout: float) -> Audio | None:
        try:
            block = self._queue.get(timeout=timeout)
        except queue.Empty:
            if self._failure is not None:
                raise AudioDeviceError(self._failure) from None
            return None if self._stopped.is_set() else self._silence()
        self._position += len(block)
        self._covered_until = max(self._covered_until, time.monotonic())
        return block

    def _silence(self) -> Audio | None:
        now = time.monotonic()
        gap = now - self._covered_until
        with self._lock:
            want, recording = self._want, self._proc is not None and self._proc.poll() is None
        if gap < self._gap_fill_s or (recording and want is not None and want[0] == "device"):
            return None
        self._covered_until = now
        silence = np.zeros(round(gap * SAMPLE_RATE), dtype=np.float32)
        self._position += len(silence)
        return silence

    def take_notice(self) -> str | None:
        """Once, when an app target has not been found for ``ABSENT_APP_NOTICE_S``: that no
        app of that name plays, and which do (`engine.audio.sources.device_notice`)."""
        since = self._absent_since
        if since is None or time.monotonic() - since < ABSENT_APP_NOTICE_S:
            return None
        self._absent_since = None
        with self._lock:
            if self._want is not None:
                return None  # it has started playing meanwhile
        try:
            names = sorted({app.name for app in list_playing_apps()}, key=str.lower)
        except AudioDeviceError:
            names = []
        playing = (f"playing now: {', '.join(names)}" if names
                   else "no app is playing sound now")
        return (f"no app named {self.target.name!r} is playing sound ({playing}); still "
                "waiting for it")

    # -- watcher: follows the default output, the app's streams, the device ------------------
    def _watch(self) -> None:
        pulsectl = _pulsectl()
        try:
            with pulsectl.Pulse("sottovoce-watch") as pulse:
                self._watching = pulse
                pulse.event_mask_set("server", "sink", "sink_input", "source")
                pulse.event_callback_set(self._on_event)
                while not self._stopped.is_set():
                    pulse.event_listen(timeout=0.5)
                    if self._changed.is_set() and not self._stopped.is_set():
                        self._changed.clear()
                        self._switch(resolve(pulse, self.target))
        except pulsectl.PulseError as exc:
            if not self._stopped.is_set():
                self._fail(f"the sound server went away ({exc})")
        except Exception as exc:  # noqa: BLE001 - the thread's top: report, never die silently
            log.exception("watching PulseAudio failed")
            self._fail(f"watching the sound server failed: {exc}")
        finally:
            self._watching = None

    def _on_event(self, _event: Any) -> None:
        self._changed.set()
        raise _pulsectl().PulseLoopStop  # leave event_listen to query (not allowed inside)

    def _switch(self, want: tuple[str, str] | None) -> None:
        with self._lock:
            if want == self._want:
                return
            log.info("%s: now %s (was %s)", self.target.describe(), want, self._want)
            self._want = want
        self._wake.set()
        if want is None and self.target.kind == "device":
            self._fail(f"the audio device {self.target.name!r} went away")
        self._end_process()  # the recorder starts on the new target

    def _fail(self, message: str) -> None:
        self._failure = message
        self._stopped.set()  # (read() raises it once the queue is empty)
        self._end_process()

    # -- recorder ------------------------------------------------------------------------------
    def _record(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                want = self._want
                proc = self._spawn(want) if want is not None else None
                self._proc = proc
            if proc is None:
                self._wake.wait(0.5)  # the watcher sets it; the timeout guards a lost wakeup
                self._wake.clear()
                continue
            assert proc.stdout is not None
            self._pump(proc.stdout)
            code = proc.wait()
            if code not in (0, -15) and not self._stopped.is_set():
                err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
                log.warning("parec for %s ended (%s): %s", self.recording, code, err)
                self._changed.set()  # re-resolve: the stream or device may be gone
                self._stopped.wait(0.2)

    def _spawn(self, want: tuple[str, str]) -> subprocess.Popen[bytes]:
        kind, name = want
        where = [f"--monitor-stream={name}"] if kind == "stream" else [f"--device={name}"]
        self.recording = f"{kind} {name}"
        return self._parec(where, subprocess.PIPE)

    @staticmethod
    def _parec(where: list[str], stdout: int) -> subprocess.Popen[bytes]:
        # PULSE_SOURCE (a microphone chosen for this process) would win over --monitor-stream.
        env = {k: v for k, v in os.environ.items() if k != "PULSE_SOURCE"}
        return subprocess.Popen(
            ["parec", "--raw", "--format=float32le", f"--rate={SAMPLE_RATE}", "--channels=1",
             "--latency-msec=20", f"--client-name={CLIENT_NAME}", *where],
            stdout=stdout, stderr=subprocess.PIPE, env=env)

    def _pump(self, stdout: IO[bytes]) -> None:
        pending = b""
        while True:
            chunk = stdout.read1(self._block_bytes)  # type: ignore[attr-defined]
            if not chunk:
                return
            pending += chunk
            usable = len(pending) - len(pending) % 4
            if usable:
                self._put(np.frombuffer(pending[:usable], dtype=np.float32).copy())
                pending = pending[usable:]

    def _put(self, block: npt.NDArray[np.float32]) -> None:
        try:
            self._queue.put_nowait(block)
        except queue.Full:  # the reader fell behind: drop the oldest block (fresh audio first)
            with contextlib.suppress(queue.Empty):
                self._dropped += len(self._queue.get_nowait())
            self._queue.put_nowait(block)

    def _end_process(self) -> None:
        with self._lock:
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
