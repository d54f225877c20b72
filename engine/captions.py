"""`CaptionEngine`: live captions of one source or two ("you and them"), as one `LiveEngine`.

Each source gets a live engine of its own (local or remote, built by the caller's factory, no
journal of its own); this driver labels their events with the source ("You", "Them"; no label
when there is one source), masks profanity when asked, keeps a line heard on both sources once
(`engine.core.captions.EchoGuard`), journals each final as it is shown (one caption session,
``<id>-captions.jsonl``) and, with translation below the original, decodes each final's audio
once more with Whisper's translate task and emits a `Translation` after the final.

Events from the engines' threads are handled under one lock, so the sink sees them one at a
time, in order; it must return quickly (as `LocalLiveEngine`'s sink).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from engine.asr.wrapper import RunnerWrapper
from engine.audio.sources import AudioSource
from engine.core.captions import CaptionLine, EchoGuard
from engine.errors import EngineError
from engine.events import (
    EngineFailed,
    Event,
    EventSink,
    FinalText,
    LiveEngine,
    PartialText,
    SpeechStarted,
    StateChanged,
    Translation,
)
from engine.journal import Journal, JournalError, caption_session_id
from engine.types import (
    SAMPLE_RATE,
    Audio,
    DecodeOptions,
    DecodeRequest,
    Runner,
)

log = logging.getLogger(__name__)

class SourceEngine(LiveEngine, Protocol):
    """The engine of one caption source: a live engine that can also stop at once."""

    def abort(self) -> None: ...


EngineBuilder = Callable[[AudioSource, EventSink], SourceEngine]
Masker = Callable[[str], str]


@dataclass(frozen=True)
class Feed:
    """One caption source: its label ("" when it is the only one) and its audio."""

    label: str
    source: AudioSource


class RecentAudio:
    """An `AudioSource` passing another's blocks through and keeping the last ``keep_s`` of
    them, so a final's audio can be decoded once more (translation). Reads and `span` are on
    the consumer's thread and the translator's: guarded by a lock."""

    def __init__(self, inner: AudioSource, keep_s: float = 60.0) -> None:
        self.inner = inner
        self.simulated = inner.simulated
        self._keep = int(keep_s * SAMPLE_RATE)
        self._blocks: list[Audio] = []
        self._first = 0  # sample position of _blocks[0]
        self._lock = threading.Lock()

    def start(self) -> None:
        self.inner.start()

    def stop(self) -> None:
        self.inner.stop()

    def take_notice(self) -> str | None:
        return None  # the caption engine does not report a device change it copies

    def read(self, timeout: float) -> Audio | None:
        block = self.inner.read(timeout)
        if block is not None and len(block):
            with self._lock:
                self._blocks.append(block)
                held = sum(len(b) for b in self._blocks)
                while held - len(self._blocks[0]) >= self._keep:
                    held -= len(self._blocks[0])
                    self._first += len(self._blocks.pop(0))
        return block

    def span(self, start: int, end: int) -> Audio:
        """Samples [start, end) as far as they are still kept."""
        with self._lock:
            if not self._blocks:
                return np.zeros(0, dtype=np.float32)
            audio = np.concatenate(self._blocks)
            first = self._first
        return audio[max(0, start - first):max(0, end - first)]

    @property
    def finished(self) -> bool:
        return self.inner.finished

    @property
    def position(self) -> int:
        return self.inner.position

    @property
    def captured(self) -> int:
        return self.inner.captured

    @property
    def dropped(self) -> int:
        return self.inner.dropped


class CaptionEngine:
    """See the module docstring. ``build`` makes one source's live engine; ``translate_with``:
    the runner that translates each final below it (None: no second line); ``mask``: the
    profanity mask (None: off); ``journal``: a caption session journal (None: not saved)."""

    def __init__(self, sink: EventSink, feeds: Sequence[Feed], build: EngineBuilder, *,
                 translate_with: Runner | None = None, mask: Masker | None = None,
                 journal: Journal | None = None, echo_window_s: float = 3.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not feeds:
            raise ValueError("captions need at least one source")
        self._sink = sink
        self._mask = mask
        self._journal = journal
        self._clock = clock
        self._lock = threading.RLock()
        self._guard = (EchoGuard(feeds[0].label, feeds[1].label, window_s=echo_window_s)
                       if len(feeds) == 2 else None)
        self._recent: dict[str, RecentAudio] = {}
        self._finals: dict[tuple[str, int], FinalText] = {}  # shown, by (source, utterance)
        self._running = {feed.label for feed in feeds}
        self._primary = feeds[0].label  # whose lifecycle states stand for all
        self._listening: set[str] = set()
        self._engines: list[SourceEngine] = []
        for feed in feeds:
            source = feed.source
            if translate_with is not None:
                source = self._recent.setdefault(feed.label, RecentAudio(feed.source))
            self._engines.append(build(source, self._labelled(feed.label)))
        self._translator = _Translator(translate_with, self._translated) if translate_with else None
        self._finished = threading.Event()

    @staticmethod
    def new_journal() -> Journal:
        return Journal(caption_session_id())

    # -- LiveEngine ----------------------------------------------------------------------------
    def start(self) -> None:
        if self._translator is not None:
            self._translator.start()
        for engine in self._engines:
            engine.start()

    def stop(self) -> None:
        for engine in self._engines:
            engine.stop()

    def abort(self) -> None:
        """Stop at once (a second Ctrl+C): each source's engine drops what it has not decoded
        yet and translations not started are skipped; the lines shown so far stay saved."""
        if self._translator is not None:
            self._translator.abort()
        for engine in self._engines:
            engine.abort()

    def begin_utterance(self) -> int | None:
        return None  # captions follow voice activity, not a key

    def end_utterance(self) -> None:
        return None

    def set_vocabulary(self, terms: tuple[str, ...]) -> None:
        for engine in self._engines:
            engine.set_vocabulary(terms)

    def wait(self, timeout: float | None = None) -> bool:
        return self._finished.wait(timeout)

    @property
    def journal_path(self) -> str | None:
        return str(self._journal.path) if self._journal is not None else None

    # -- events --------------------------------------------------------------------------------
    def _labelled(self, label: str) -> EventSink:
        def sink(event: Event) -> None:
            with self._lock:
                self._on_event(label, event)
        return sink

    def _on_event(self, label: str, event: Event) -> None:
        if isinstance(event, (SpeechStarted, PartialText, FinalText)):
            event = replace(event, source=label)
        if isinstance(event, SpeechStarted) and self._guard and label == self._guard.them:
            self._guard.speaking(True)
        if isinstance(event, PartialText) and self._guard and label == self._guard.them:
            self._guard.speaking(True, f"{event.committed} {event.tentative}")
        if isinstance(event, PartialText) and self._mask is not None:
            event = replace(event, committed=self._mask(event.committed),
                            tentative=self._mask(event.tentative))
        if isinstance(event, FinalText):
            self._on_final(event)
        elif isinstance(event, StateChanged):
            self._on_state(label, event)
        elif isinstance(event, EngineFailed):
            self._on_failed(label, event)
        else:
            self._emit(event)
        if self._guard is not None:
            self._guarded(self._guard.due(self._clock()))

    def _guarded(self, lines: list[CaptionLine]) -> None:
        """Show what the echo guard let through; close each dropped echo with an empty final
        (a viewer clears that source's partial text; nothing is printed or saved)."""
        assert self._guard is not None
        self._show(lines)
        for echo in self._guard.dropped:
            final = self._finals.pop((echo.source, int(echo.key.rsplit("#", 1)[1])), None)
            if final is not None:
                log.info("%s line kept once, as %s's: %s", echo.source, self._guard.them,
                         echo.text)
                self._emit(replace(final, text="", words=()))
        self._guard.dropped.clear()

    def _on_final(self, final: FinalText) -> None:
        if self._mask is not None and final.text:
            final = replace(final, text=self._mask(final.text))
        if self._guard is None:
            self._show_final(final)
            return
        if not final.text.strip():
            if final.source == self._guard.them:
                self._guard.speaking(False)
            self._emit(final)  # an empty final still closes its utterance for the viewer
            return
        self._finals[(final.source, final.utterance_id)] = final
        self._guarded(self._guard.final(final_line(final), self._clock()))

    def _show(self, lines: list[CaptionLine]) -> None:
        for line in lines:
            final = self._finals.pop((line.source, int(line.key.rsplit("#", 1)[1])), None)
            if final is not None:
                self._show_final(final)

    def _show_final(self, final: FinalText) -> None:
        if final.text.strip() and self._journal is not None:
            try:
                self._journal.append(final)
            except JournalError as exc:
                log.error("%s", exc)
                self._journal = None
                self._emit(EngineFailed(f"autosave stopped: {exc}", recoverable=True))
        self._emit(final)
        recent = self._recent.get(final.source)
        if (self._translator is not None and recent is not None and final.text.strip()
                and final.language != "en"):  # English needs no second line
            self._translator.submit(final, recent.span(final.start, final.end))

    def _translated(self, final: FinalText, text: str) -> None:
        with self._lock:
            if self._mask is not None:
                text = self._mask(text)
            if self._journal is not None:
                try:
                    self._journal.append_translation(final.utterance_id, final.source, text)
                except JournalError as exc:
                    log.error("%s", exc)
            self._emit(Translation(final.utterance_id, final.source, text, final.language))

    def _on_state(self, label: str, event: StateChanged) -> None:
        if event.state == "listening":
            # Listening once every source is: the last to open its audio says so.
            self._listening.add(label)
            if self._listening >= self._running:
                self._emit(event)
            return
        if event.state != "stopped":
            if label == self._primary:
                self._emit(event)
            return
        self._running.discard(label)
        if self._running:
            return
        if self._guard is not None:
            self._guarded(self._guard.flush())
        if self._translator is not None:
            self._lock.release()  # the translator's last result takes the lock
            try:
                self._translator.finish()
            finally:
                self._lock.acquire()
        if self._journal is not None:
            self._journal.close()
        self._emit(event)
        self._finished.set()

    def _on_failed(self, label: str, event: EngineFailed) -> None:
        message = f"{label}: {event.message}" if label else event.message
        others = self._running - {label}
        if not event.recoverable and others:
            message += f" (captions of {', '.join(sorted(others))} go on)"
            event = EngineFailed(message, recoverable=True)
        self._emit(replace(event, message=message))

    def _emit(self, event: Event) -> None:
        try:
            self._sink(event)
        except Exception:  # noqa: BLE001 - a broken sink must not stop captions
            log.exception("caption sink raised on %s", type(event).__name__)


class SharedRunner(RunnerWrapper):
    """A runner several caption engines (and the translator) share: one model in memory. Its
    calls are already safe from several threads (a replica each, the others wait); `load()`
    is made safe too, so the first caller loads and the others wait for it."""

    def __init__(self, runner: Runner) -> None:
        super().__init__(runner)
        self._lock = threading.Lock()

    @property
    def runner(self) -> Runner:
        return self.inner

    def load(self) -> None:
        with self._lock:
            self.inner.load()


def final_line(final: FinalText) -> CaptionLine:
    """A final as a caption line (its source, a key per utterance, times in seconds)."""
    return CaptionLine(final.source, f"{final.source}#{final.utterance_id}", final.text,
                       final.start / SAMPLE_RATE, final.end / SAMPLE_RATE, final.language)


class _Translator:
    """One thread translating finals in order (Whisper's translate task on their audio)."""

    def __init__(self, runner: Runner, done: Callable[[FinalText, str], None]) -> None:
        self._runner = runner
        self._done = done
        self._jobs: queue.Queue[tuple[FinalText, Audio] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="sottovoce-translate",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, final: FinalText, audio: Audio) -> None:
        if len(audio):
            self._jobs.put((final, audio.astype(np.float32, copy=False)))

    def abort(self) -> None:
        """Drop the finals waiting for a translation (the one being translated finishes)."""
        with contextlib.suppress(queue.Empty):
            while True:
                self._jobs.get_nowait()
        self._jobs.put(None)  # (in place of a finish() sentinel the loop above took)

    def finish(self, timeout: float = 120.0) -> None:
        self._jobs.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            final, audio = job
            try:
                self._runner.load()
                options = DecodeOptions(language=final.language, task="translate")
                transcript = self._runner.decode_batch(
                    [DecodeRequest(audio[-30 * SAMPLE_RATE:], options)])[0]
                self._done(final, transcript.text.strip())
            except (EngineError, ValueError) as exc:
                log.error("translating utterance %d failed: %s", final.utterance_id, exc)
            except Exception:  # noqa: BLE001 - the thread's top: log, keep translating
                log.exception("translating utterance %d failed", final.utterance_id)
