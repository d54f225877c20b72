"""What the settings' Microphone, Models and Languages pages need from the machine
(ui.settings_setup's service protocols): microphones with a live level and a record-and-play-back
test, the model catalogue with downloads on a thread, and the hotkey check.

The pages call these on the GUI thread; anything slow (a 3 s test, a download) runs on its own
thread and reports through the callbacks the page gives, which emit the page's signals.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from app.hotkeys import check_hotkey
from engine.audio.devices import list_inputs, sounddevice_module
from engine.audio.sources import MicrophoneSource
from engine.errors import EngineError
from engine.languages import LANGUAGES
from engine.model_catalog import (
    CATALOGUE,
    check_model_dir,
    directory_size,
    installed,
    is_english_only,
    recommend,
    this_machine,
)
from engine.model_download import ModelDownloadError, Progress, download, format_bytes, remove
from engine.types import SAMPLE_RATE
from ui.settings_dialog import SetupServices
from ui.settings_setup import ModelRow

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 0.1  # at most this often to the GUI


def level_db(block: np.ndarray) -> float:
    rms = float(np.sqrt(np.mean(np.square(block)))) if len(block) else 0.0
    return float(20 * np.log10(max(rms, 1e-6)))


class Microphones:
    """The microphones by name, one level meter at a time, and the 3 s test."""

    def __init__(self) -> None:
        self._meter: MicrophoneSource | None = None
        self._level: float | None = None

    def devices(self) -> list[tuple[str, bool]]:
        try:
            return [(d.name, d.is_default) for d in list_inputs()]
        except EngineError as exc:
            log.warning("cannot list microphones: %s", exc)
            return []

    def open_meter(self, name: str) -> None:
        self.close_meter()
        source = MicrophoneSource(name or None)
        try:
            source.start()
        except EngineError as exc:
            log.warning("level meter: %s", exc)
            return
        self._meter = source

    def level_db(self) -> float | None:
        """The loudest of the blocks that came since the last call (the meter's 50 ms)."""
        source = self._meter
        if source is None:
            return None
        loudest: float | None = None
        try:
            while (block := source.read(0)) is not None:
                level = level_db(block)
                loudest = level if loudest is None else max(loudest, level)
        except EngineError as exc:
            log.warning("level meter stopped: %s", exc)
            self.close_meter()
            return None
        if loudest is not None:
            self._level = loudest
        return self._level

    def close_meter(self) -> None:
        source, self._meter = self._meter, None
        self._level = None
        if source is not None:
            source.stop()

    def start_test(self, name: str, seconds: float, report: Callable[[str, bool], None]) -> None:
        threading.Thread(target=self._test, args=(name, seconds, report), daemon=True,
                         name="sottovoce-mic-test").start()

    def _test(self, name: str, seconds: float, report: Callable[[str, bool], None]) -> None:
        try:
            audio = record(name, seconds, lambda: report(f"Recording {seconds:.0f} s: speak "
                                                         "now…", False))
            peak = 20 * np.log10(max(float(np.max(np.abs(audio))) if len(audio) else 0, 1e-6))
            report(f"Playing back what was heard (peak {peak:.0f} dB)…", False)
            sd = sounddevice_module()
            sd.play(audio, SAMPLE_RATE, blocking=True)
            quiet = " — very quiet: is it the right microphone, or muted?" if peak < -45 else ""
            report(f"Done: {len(audio) / SAMPLE_RATE:.1f} s recorded, peak {peak:.0f} dB{quiet}",
                   True)
        except Exception as exc:  # noqa: BLE001 - the thread's top: the user sees why
            report(f"The test failed: {exc}", True)


def record(name: str, seconds: float, started: Callable[[], None] | None = None) -> np.ndarray:
    """``seconds`` of 16 kHz audio from microphone ``name`` ("": the default)."""
    source = MicrophoneSource(name or None)
    source.start()
    if started is not None:
        started()
    blocks = []
    wanted = int(seconds * SAMPLE_RATE)
    got = 0
    deadline = time.monotonic() + seconds + 5.0
    try:
        while got < wanted and time.monotonic() < deadline:
            block = source.read(0.2)
            if block is not None:
                blocks.append(block)
                got += len(block)
    finally:
        source.stop()
    audio = np.concatenate(blocks) if blocks else np.zeros(0, np.float32)
    return audio[:wanted]


class Models:
    """The catalogue and what is here, in words; downloads on a thread each."""

    def __init__(self) -> None:
        self._cancel: dict[str, threading.Event] = {}
        self._machine = this_machine()

    def rows(self, folders: tuple[str, ...]) -> list[ModelRow]:
        here = {m.name: m for m in installed(folders)}
        english = recommend(self._machine, english_only=True).model
        multi = recommend(self._machine, english_only=False).model
        rows = []
        for model in CATALOGUE:
            found = here.get(model.name)
            size = found.size_bytes if found is not None else model.size_mb * 1_000_000
            status = found.kind if found is not None else "not downloaded"
            rows.append(ModelRow(model.name, format_bytes(size), model.languages, status,
                                 model.note, model.name in (english, multi), model.english_only,
                                 found is not None, found is not None and found.removable))
        for found in here.values():
            if found.kind == "local":
                rows.append(ModelRow(found.name, format_bytes(found.size_bytes),
                                     "English only" if found.english_only else "99 languages",
                                     "local folder", "added by path", False, found.english_only,
                                     True, True))
        return rows

    def recommendation(self) -> str:
        english = recommend(self._machine, english_only=True)
        multi = recommend(self._machine, english_only=False)
        return (f"This machine: {self._machine.describe()}. Recommended: {english.model} "
                f"({english.device}, {english.compute_type}) for English, {multi.model} for "
                f"other languages — {english.reason}.")

    def download(self, name: str, progress: Callable[[str, int, int, str], None],
                 done: Callable[[str, str, bool], None]) -> None:
        cancel = threading.Event()
        self._cancel[name] = cancel
        threading.Thread(target=self._download, args=(name, cancel, progress, done),
                         daemon=True, name="sottovoce-download").start()

    def _download(self, name: str, cancel: threading.Event,
                  progress: Callable[[str, int, int, str], None],
                  done: Callable[[str, str, bool], None]) -> None:
        last = [0.0]

        def on_progress(p: Progress) -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S or p.done == p.total:
                last[0] = now
                progress(name, p.done, p.total, p.describe())

        try:
            path = download(name, progress=on_progress, cancel=cancel)
            done(name, f"{name} is downloaded and verified ({format_bytes(directory_size(path))}); "
                       "select it and press “Use this model”", True)
        except ModelDownloadError as exc:
            done(name, str(exc), False)
        except Exception as exc:  # noqa: BLE001 - the thread's top: the user sees why
            log.exception("download of %s failed", name)
            done(name, f"could not download {name}: {exc}", False)
        finally:
            self._cancel.pop(name, None)

    def cancel(self, name: str) -> None:
        event = self._cancel.get(name)
        if event is not None:
            event.set()

    def remove(self, name: str) -> str:
        try:
            freed = remove(name)
        except ModelDownloadError as exc:
            raise ValueError(str(exc)) from exc
        return f"Removed {name}: {format_bytes(freed)} freed"

    def check_folder(self, path: str) -> None:
        check_model_dir(Path(path).expanduser())


def setup_services() -> SetupServices:
    return SetupServices(microphones=Microphones(), models=Models(), languages=dict(LANGUAGES),
                         english_only=is_english_only, check_hotkey=check_hotkey)
