"""Runners and scorers for tests that are not about the model: a scripted runner that notes the
thread of each call, a runner that hears nothing, a VAD that hears no speech."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from engine.asr.fake import ScriptedRunner
from engine.errors import EngineError
from engine.types import DecodeRequest, ModelInfo, Transcript

JFK_TEXT = "And so my fellow Americans, ask not what your country can do for you."


class ThreadRecordingRunner(ScriptedRunner):
    """The scripted runner, noting the thread of every load and decode."""

    def __init__(self, script: Sequence[str] = (JFK_TEXT,), fail_load: bool = False,
                 fail_decodes: int = 0) -> None:
        super().__init__(script)
        self.threads: list[tuple[str, str]] = []
        self._fail_load = fail_load
        self._fail_decodes = fail_decodes

    def load(self) -> None:
        self.threads.append(("load", threading.current_thread().name))
        if self._fail_load:
            raise EngineError("no such model: nothing-here")
        super().load()

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        self.threads.append(("decode", threading.current_thread().name))
        if self._fail_decodes > 0:
            self._fail_decodes -= 1
            raise RuntimeError("out of memory")
        return super().decode_batch(requests)


class SilentRunner:
    info = ModelInfo("silent", "cpu", "none", False)
    streams = 1
    device = "cpu"

    def load(self) -> None:
        pass

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        return [Transcript(segments=(), duration=len(r.audio)) for r in requests]


class QuietScorer:
    def score(self, windows: np.ndarray) -> np.ndarray:
        return np.zeros(len(windows), dtype=np.float32)

    def reset(self) -> None:
        pass
