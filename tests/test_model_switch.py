"""Switching the model of a running live engine (LocalLiveEngine.reload), in the fast lane: real
speech through a real-time `FileSource` and the real VAD; the decodes come from scripted runners
standing for two models. The microphone is never closed: the first sentence is decoded by the
old model, the new one loads on a new inference thread while the second sentence is spoken, and
that sentence is decoded by the new model once it is in (nothing heard is lost). A model that
fails to load is reported and the old one goes on."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from support.events import Recorder
from support.runners import ThreadRecordingRunner

from engine.audio.decode import load_audio
from engine.audio.sources import FileSource
from engine.events import EngineFailed, FinalText, SpeechStarted
from engine.live import LiveOptions, LocalLiveEngine
from engine.types import SAMPLE_RATE, ModelInfo


class SlowModel(ThreadRecordingRunner):
    """A second model: other text, another name, and a load that takes ``load_s``."""

    def __init__(self, text: str, load_s: float = 1.5, fail_load: bool = False) -> None:
        super().__init__((text,), fail_load=fail_load)  # (its threads are noted)
        self.load_s = load_s

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(name="bigger", device="cpu", compute_type="int8", multilingual=False)

    def load(self) -> None:
        time.sleep(self.load_s)
        super().load()


def two_sentences(shared_audio: Path) -> np.ndarray:
    first = load_audio(shared_audio / "ls-tc-6930-75918-0000.wav")
    second = load_audio(shared_audio / "arctic-axb-a0006.wav")
    gap = np.zeros(int(2.5 * SAMPLE_RATE), np.float32)
    return np.concatenate([first, gap, second, gap]).astype(np.float32)


def run_with_reload(shared_audio: Path, new: SlowModel) -> tuple[Recorder, ThreadRecordingRunner]:
    old = ThreadRecordingRunner(("Old model text.",))
    rec = Recorder()
    switched = threading.Event()

    def sink(event: object) -> None:
        rec(event)  # type: ignore[arg-type]
        if isinstance(event, FinalText) and not switched.is_set():
            switched.set()
            engine.reload(new)  # the first final is in: switch (from the engine's thread)

    engine = LocalLiveEngine(sink, source=FileSource(audio=two_sentences(shared_audio),
                                                     realtime=True),
                             runner=old, options=LiveOptions(journal=False))
    engine.start()
    assert engine.wait(timeout=60), "engine did not stop"
    return rec, old


def test_a_new_model_loads_while_listening_and_decodes_what_came_meanwhile(
        shared_audio: Path) -> None:
    new = SlowModel("New model text.", load_s=3.0)
    rec, _old = run_with_reload(shared_audio, new)
    assert [f.text for f in rec.of(FinalText)] == ["Old model text.", "New model text."]
    assert rec.states() == ["loading", "ready", "listening",  # the first model
                            "loading", "ready", "listening",  # the switch
                            "stopped"]
    assert [e.detail for e in rec.events if getattr(e, "state", "") == "ready"] == [
        "scripted", "bigger"]
    # The new model was loaded on a new inference thread, which then did every decode of it.
    assert new.threads[0] == ("load", "sottovoce-inference")
    assert {kind for kind, _ in new.threads[1:]} == {"decode"}
    # The second sentence began while the new model was loading (the load takes 3 s, the gap
    # before the sentence 2.5 s): it is decoded in full once the model is in.
    started = [i for i, e in enumerate(rec.events) if isinstance(e, SpeechStarted)]
    ready = [i for i, e in enumerate(rec.events) if getattr(e, "state", "") == "ready"]
    assert len(started) == 2 and started[1] < ready[1]
    second = rec.of(FinalText)[1]
    assert second.end - second.start >= SAMPLE_RATE  # ~1.8 s of "God bless ..."
    assert not rec.of(EngineFailed)


def test_a_model_that_fails_to_load_leaves_the_old_one(shared_audio: Path) -> None:
    broken = SlowModel("never", load_s=0.2, fail_load=True)
    rec, _old = run_with_reload(shared_audio, broken)
    failures = rec.of(EngineFailed)
    assert len(failures) == 1 and failures[0].recoverable
    assert failures[0].message == ("could not load the new model (no such model: nothing-here); "
                                   "keeping scripted")
    assert [f.text for f in rec.of(FinalText)] == ["Old model text.", "Old model text."]
    assert rec.states()[-1] == "stopped"


@pytest.mark.model
def test_the_app_engine_switches_real_models_mid_speech(jfk_wav: Path, tmp_path: Path) -> None:
    """tiny.en hears "And so my fellow Americans, ask not ..."; then base is loaded into the
    running engine and decodes the sentence said again after a pause. (The pause is made 2.5 s:
    the clip's own pause inside the sentence ends an utterance on an idle machine, but on a busy
    one the engine rightly waits for the pause's reading and keeps the sentence whole, as a CI
    run did: one final, no switch before it.)"""
    import wave

    from app.engine_factory import EngineConfig, make_engine

    jfk = load_audio(jfk_wav)
    twice = np.concatenate([jfk, np.zeros(int(2.5 * SAMPLE_RATE), np.float32), jfk])
    said_twice = tmp_path / "jfk-twice.wav"
    with wave.open(str(said_twice), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes((np.clip(twice, -1, 1) * 32767).astype(np.int16).tobytes())

    rec = Recorder()
    switched = threading.Event()
    holder: list[object] = []

    def sink(event: object) -> None:
        rec(event)  # type: ignore[arg-type]
        if isinstance(event, FinalText) and event.text and not switched.is_set():
            switched.set()
            assert holder[0].switch_model("base", "cpu")  # type: ignore[attr-defined]

    engine = make_engine(EngineConfig(model="tiny.en", device="cpu", mode="vad",
                                      input_path=said_twice), sink)
    holder.append(engine)
    engine.start()
    assert engine.engine.wait(timeout=180)  # type: ignore[attr-defined]
    finals = [f for f in rec.of(FinalText) if f.text]
    assert [e.detail for e in rec.events if getattr(e, "state", "") == "ready"] == [
        "tiny.en", "base"]
    assert engine.model_info is not None and engine.model_info.name == "base"  # type: ignore[attr-defined]
    assert len(finals) >= 2, [f.text for f in finals]
    assert "ask what you can do for your country" in finals[-1].text.lower().replace(",", "")
    assert not rec.of(EngineFailed)
