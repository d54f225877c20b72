"""A LiveEngine for UI tests that emits scripted events from its own thread, like the real one.

Why a fake: widget and wiring tests must assert exact text and event order without a microphone
or a model; the real engine (mic, VAD, model) is covered by the engine's tests and by
tests/test_e2e_desktop.py. Events come from a worker thread so the bridge's thread hop is real.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from engine.events import (
    Event,
    EventSink,
    FinalText,
    LevelChanged,
    Metrics,
    PartialText,
    SpeechEnded,
    SpeechStarted,
    StateChanged,
)
from engine.journal import Journal, new_session_id
from engine.types import Word


class FakeLiveEngine:
    def __init__(self, sink: EventSink, script: tuple[str, ...] = ("hello world",),
                 network_ms: float | None = None) -> None:
        self.sink = sink
        self.script = list(script)
        self.network_ms = network_ms
        self.calls: list[str] = []
        self.utterance = 0
        self.position = 0  # samples on the session timeline

    def _in_thread(self, work: Callable[[], None]) -> None:
        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        thread.join(5)

    def start(self) -> None:
        self.calls.append("start")

        def work() -> None:
            self.sink(StateChanged("loading", "fake"))
            self.sink(StateChanged("ready", "fake"))
            self.sink(StateChanged("listening"))
            for db in (-50.0, -30.0, -20.0):
                self.sink(LevelChanged(rms_db=db, peak_db=db + 6))
        self._in_thread(work)

    def begin_utterance(self) -> int:
        self.calls.append("begin")
        self.utterance += 1
        uid, start = self.utterance, self.position
        text = self.script[(uid - 1) % len(self.script)]
        first = text.split()[0]

        def work() -> None:
            self.sink(SpeechStarted(uid, start))
            self.sink(PartialText(uid, committed=first, tentative="maybe", start=start))
        self._in_thread(work)
        return start

    def set_language(self, language: str | None, languages: tuple[str, ...]) -> bool:
        self.calls.append(f"language {language} {','.join(languages)}")
        return True  # switched without a rebuild, as the local engine does

    def set_vocabulary(self, terms: tuple[str, ...]) -> None:
        self.calls.append("vocabulary: " + ", ".join(terms))

    def end_utterance(self) -> None:
        self.calls.append("end")
        uid, start = self.utterance, self.position
        text = self.script[(uid - 1) % len(self.script)]
        end = start + 16_000 * 2
        self.position = end + 16_000
        words = tuple(Word(" " + w, start + i * 8000, start + (i + 1) * 8000)
                      for i, w in enumerate(text.split()))

        def work() -> None:
            self.sink(SpeechEnded(uid, end))
            decode = 80.0 + 20 * uid
            rtt = decode + (self.network_ms or 0.0)
            self.sink(Metrics(chunk_rtt_ms=rtt, decode_ms=decode, network_ms=self.network_ms,
                              lag_ms=200.0 * uid, rtf=0.1, dropped_frames=0))
            self.sink(FinalText(uid, text, words, start, end, latency_ms=rtt, language="en"))
        self._in_thread(work)

    def stop(self) -> None:
        self.calls.append("stop")
        self._in_thread(lambda: self.sink(StateChanged("stopped")))

    # -- the rest of app.app_engine.RunningEngine: a scripted engine changes nothing in place
    model_info = None
    journal_path: str | None = None
    can_mute_input = False

    def abort(self) -> None:
        pass  # nothing is in flight between calls

    def wait(self, timeout: float | None = None) -> bool:
        return True  # its threads end with each call

    def mute_input(self, seconds: float, at: int | None = None) -> int | None:
        return None

    def switch_model(self, model: str, device: str) -> bool:
        return False

    def set_input_device(self, name: str) -> bool:
        return False


class JournalledEngine(FakeLiveEngine):
    """The scripted engine journalling its finals as engine.live.LocalLiveEngine does (in
    ``directory``; None: the user's journal folder, where History looks)."""

    def __init__(self, sink: EventSink, script: tuple[str, ...] = ("hello world",),
                 directory: Path | None = None) -> None:
        self.journal = Journal(new_session_id(), directory)

        def journalled(event: Event) -> None:
            if isinstance(event, FinalText):
                self.journal.append(event)
            sink(event)
        super().__init__(journalled, script)

    @property  # type: ignore[override]
    def journal_path(self) -> str:
        return str(self.journal.path)
