"""`RemoteLiveEngine`: the microphone stays here, transcription happens on a server.

Two threads at the edge, nothing else:
- capture: reads the audio source, reports the input level, applies push-to-talk gating (only
  the pressed span, with the pre-roll, is sent: the stream core's `Segmentation` in
  push-to-talk mode, the same segmenter the local engine and the server run), and appends
  s16le blocks to the shared `AudioBuffer`;
- network: an asyncio loop running a *link* (`NativeLink` for ``ws://``/``wss://``,
  `WhisperLiveLink` for ``whisperlive://host:port``) that streams the buffer continuously,
  turns replies into engine events, and on a dropped connection reconnects with exponential
  backoff and resends every sample the server has not acknowledged.

Latency: every reply names the sample that triggered it; the client knows when it sent that
sample, so the round trip is measured on this machine's clock. `Metrics.decode_ms` is the
server's decode time and `Metrics.network_ms` is the round trip minus the server's own time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from engine.audio.sources import AudioSource, device_notice
from engine.core.form import OpenSentence, ensure_form
from engine.core.prompt import PromptOptions
from engine.core.sanitize import clean
from engine.core.segmenter import SegmentEnded, SegmenterOptions, SegmentEvent, SegmentPaused
from engine.core.stream import LevelMeter, Segmentation
from engine.errors import EngineError
from engine.events import (
    EngineFailed,
    Event,
    EventSink,
    FinalText,
    PartialText,
    SpeechEnded,
    SpeechStarted,
    StateChanged,
)
from engine.remote.buffer import AudioBuffer, SendLog
from engine.remote.link import Endpoint, RemoteOptions, Timing
from engine.types import SAMPLE_RATE, Audio, Word
from engine.wire.protocol import float_to_pcm16

log = logging.getLogger(__name__)


class RemoteLiveEngine:
    """`engine.events.LiveEngine` over a remote server. See the module docstring."""

    def __init__(self, sink: EventSink, *, url: str, source: AudioSource | None = None,
                 api_key: str | None = None, options: RemoteOptions | None = None,
                 language: str | None = None, mode: str | None = None,
                 input_path: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        base = options or RemoteOptions()
        if language is not None or mode is not None:
            from dataclasses import replace

            base = replace(base, language=language or base.language, mode=mode or base.mode)
        self.options = base
        self.endpoint = Endpoint.parse(url)
        self.api_key = api_key
        self.session_id = uuid.uuid4().hex
        self._sink = sink
        self._source = source
        self._input_path = input_path
        self._clock = clock
        self.buffer = AudioBuffer(int(base.max_buffer_s * SAMPLE_RATE))
        self.send_log = SendLog()
        self.vocabulary = base.vocabulary
        self._stop = threading.Event()
        self._aborted = threading.Event()
        self._main: asyncio.Task[EngineFailed | None] | None = None
        self._meter = LevelMeter(base.level_interval_ms)
        self._gate_lock = threading.Lock()
        self._gate = Segmentation(
            SegmenterOptions(mode="ptt", preroll_ms=base.preroll_ms), scorer=None,
        ) if base.mode == "ptt" else None
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._level: list[Audio] = []
        # Event state, touched only on the network thread.
        self._utterances: dict[tuple[int, int], int] = {}
        self._next_utterance = 1
        self._last_final_end = 0
        # The policy's rule for a final that goes on with an open sentence (engine.core.form).
        self._open = OpenSentence(int(PromptOptions().reset_after_s * SAMPLE_RATE))
        self._started_utterances: set[int] = set()

    # -- LiveEngine ----------------------------------------------------------------------

    def start(self) -> None:
        if self._threads:
            raise EngineError("engine already started")
        self._emit(StateChanged("loading", self.endpoint.url))
        if self._source is None:
            self._source = _default_source(self._input_path)
        network = threading.Thread(target=self._network_main, name="sottovoce-remote",
                                   daemon=True)
        capture = threading.Thread(target=self._capture_main, name="sottovoce-capture",
                                   daemon=True)
        self._threads = [network, capture]
        network.start()
        capture.start()

    def stop(self) -> None:
        """Stop capturing; the server finishes what it has and sends the last final."""
        self._stop.set()
        if self._source is not None:
            self._source.stop()

    def abort(self) -> None:
        """Stop at once (a second Ctrl+C): the connection is closed without waiting for the
        server's last final; the finals received so far have been emitted already."""
        self._aborted.set()
        self.stop()
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has finished already
                loop.call_soon_threadsafe(self._cancel_main)

    def _cancel_main(self) -> None:
        if self._main is not None:
            self._main.cancel()

    def begin_utterance(self) -> int | None:
        """Push-to-talk press (push-to-talk mode): send from here, with the pre-roll. Returns
        the stream position it applies to (None before the source exists)."""
        at = self._captured()
        if self._gate is not None:
            with self._gate_lock:
                self._gate.begin(at)
        return at

    def end_utterance(self) -> None:
        """Push-to-talk release: the server decodes the utterance now."""
        if self._gate is not None:
            with self._gate_lock:
                self._gate.end(self._captured())

    def set_vocabulary(self, terms: tuple[str, ...]) -> None:
        """Send a new vocabulary to the server (a ``vocabulary`` message, in order with the
        audio: what is sent after it is decoded with it). ``whisperlive://`` sends it as the
        ``hotwords`` option when it connects (WhisperLive servers ignore it)."""
        self.vocabulary = tuple(terms)
        self.notify()

    def _captured(self) -> int | None:
        """The source's sample count now (a press applies there), None before it exists."""
        return self._source.captured if self._source is not None else None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until both threads have finished (source ended or stopped, server said bye)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(remaining)
        return not any(t.is_alive() for t in self._threads)

    @property
    def journal_path(self) -> str | None:
        return None  # the server keeps what it transcribed; this client journals nothing

    # -- capture thread ------------------------------------------------------------------

    def _capture_main(self) -> None:
        source = self._source
        assert source is not None
        try:
            source.start()
            self._emit(StateChanged("listening"))
            while not self._stop.is_set():
                block = source.read(self.options.read_timeout_s)
                if notice := device_notice(source):  # the microphone changed: say so, go on
                    self._emit(EngineFailed(notice, recoverable=True))
                if block is None:
                    if source.finished:
                        break
                    continue
                for event in self._meter.feed(block, source.position):
                    self._emit(event)
                self._forward(block)
        except EngineError as exc:
            self._emit(EngineFailed(str(exc), recoverable=False))
        except Exception as exc:  # noqa: BLE001 - the thread's top: report, never die silently
            log.exception("capture crashed")
            self._emit(EngineFailed(f"internal error: {exc}", recoverable=False))
        finally:
            source.stop()
            if self._gate is not None:
                with self._gate_lock:
                    self._send_gated(self._gate.flush())
            self.buffer.close()
            self.notify()

    def _forward(self, block: Audio) -> None:
        """Hand a captured block to the network side: all of it in VAD mode (the server
        segments), only the pressed span with its pre-roll in push-to-talk mode."""
        if self._gate is None:
            self._append(block)
            return
        with self._gate_lock:
            self._send_gated(self._gate.feed(block))

    def _send_gated(self, events: list[SegmentEvent]) -> None:
        for event in events:
            if isinstance(event, SegmentEnded):
                self.buffer.mark_flush()  # the release: the server decodes the utterance now
                self.notify()
            elif not isinstance(event, SegmentPaused) and len(event.audio):
                self._append(event.audio)

    def _append(self, block: Audio) -> None:
        pcm = np.frombuffer(float_to_pcm16(block), dtype="<i2").astype(np.int16)
        self.buffer.append(pcm)
        self.notify()

    def notify(self) -> None:
        """Wake the network side (from any thread)."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            # RuntimeError: the network loop has already finished; nobody needs waking.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

    # -- network thread ------------------------------------------------------------------

    def _network_main(self) -> None:
        try:
            failure = asyncio.run(self._network())
        except asyncio.CancelledError:
            failure = None  # abort(): what the server sent so far was emitted
        except Exception as exc:  # noqa: BLE001 - the thread's top
            log.exception("network loop crashed")
            failure = EngineFailed(f"internal error: {exc}", recoverable=False)
        if failure is not None:
            self._emit(failure)
            self._stop.set()
            if self._source is not None:
                self._source.stop()
        self._emit(StateChanged("stopped"))

    async def _network(self) -> EngineFailed | None:
        self._wake = asyncio.Event()
        self._main = asyncio.current_task()
        self._loop = asyncio.get_running_loop()
        if self._aborted.is_set():  # (abort() before the loop ran: it could not cancel it)
            return None
        if self.endpoint.kind == "whisperlive":
            from engine.remote.whisperlive_link import WhisperLiveLink

            return await WhisperLiveLink(self).run()
        from engine.remote.native import NativeLink

        return await NativeLink(self).run()

    async def wait_for_audio(self) -> None:
        assert self._wake is not None
        await self._wake.wait()
        self._wake.clear()

    def now(self) -> float:
        return self._clock()

    # -- reply -> events (network thread) ------------------------------------------------

    def utterance(self, connection: int, server_id: int) -> int:
        key = (connection, server_id)
        if key not in self._utterances:
            self._utterances[key] = self._next_utterance
            self._next_utterance += 1
        return self._utterances[key]

    def on_partial(self, uid: int, committed: str, tentative: str, start: int,
                   timing: Timing) -> None:
        if uid not in self._started_utterances:
            self._started_utterances.add(uid)
            self._emit(SpeechStarted(utterance_id=uid, at=start))
        # The server's text is not trusted: nothing but printable text goes on (sanitize).
        self._emit(PartialText(utterance_id=uid, committed=clean(committed),
                               tentative=clean(tentative), start=start))
        self._emit(timing.metrics("partial", self.buffer.dropped))

    def on_final(self, uid: int, text: str, words: tuple[Word, ...], start: int, end: int,
                 timing: Timing, language: str | None = None) -> None:
        if end <= self._last_final_end:
            return  # already delivered before a reconnect
        text = clean(text)
        words = tuple(replace(w, text=clean(w.text)) for w in words)
        if start < self._last_final_end and words:
            words = tuple(w for w in words if w.end > self._last_final_end)
            text = "".join(w.text for w in words).strip()
        # Any server's finals (a WhisperLive server's too) reach the user with sentence form;
        # one that goes on with a sentence the last final left open keeps its first letter.
        text, words = ensure_form(text, words, end=self._gate is not None,
                                  start=not self._open.goes_on(start))
        self._open.ended(text, end)
        self._last_final_end = end
        if uid not in self._started_utterances:
            self._emit(SpeechStarted(utterance_id=uid, at=start))
        self._started_utterances.discard(uid)
        self._emit(SpeechEnded(utterance_id=uid, at=end))
        self._emit(FinalText(utterance_id=uid, text=text, words=words, start=start, end=end,
                             latency_ms=timing.rtt_ms, after_speech_end_ms=timing.rtt_ms,
                             language=language))
        self._emit(timing.metrics("final", self.buffer.dropped))

    def emit(self, event: Event) -> None:
        self._emit(event)

    def _emit(self, event: Event) -> None:
        try:
            self._sink(event)
        except Exception:  # noqa: BLE001 - a broken sink must not stop transcription
            log.exception("event sink raised on %s", type(event).__name__)




def _default_source(input_path: str | None) -> AudioSource:
    from engine.audio.sources import FileSource, MicrophoneSource

    if input_path:
        return FileSource(input_path, realtime=True)
    return MicrophoneSource()
