"""Switching the model of a running live engine (LocalLiveEngine.reload), in the fast lane: real
speech through a `FileSource` and the real VAD; the decodes come from scripted runners standing
for two models. The microphone is never closed: the first sentence is decoded by the old model,
the new one loads on a new inference thread while the second sentence is spoken, and that
sentence is decoded by the new model once it is in (nothing heard is lost). A model that fails
to load is reported and the old one goes on. The source runs in simulated time: the new model's
load is held until the engine reports the second sentence's start (an event), so no clock
decides what overlaps what."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from support.events import Recorder
from support.runners import ThreadRecordingRunner

from bench.evaluation import ManifestEntry, error_rate, normalize
from engine.audio.decode import load_audio
from engine.audio.sources import FileSource
from engine.events import EngineFailed, FinalText, SpeechStarted
from engine.live import LiveOptions, LocalLiveEngine
from engine.types import SAMPLE_RATE, ModelInfo

LOAD_HANG_S = 120  # bounds a hang only


class SlowModel(ThreadRecordingRunner):
    """A second model: other text, another name, and a load that lasts until ``loaded`` is set
    (the test sets it on an event, so no clock decides what happens during the load)."""

    def __init__(self, text: str, fail_load: bool = False) -> None:
        super().__init__((text,), fail_load=fail_load)  # (its threads are noted)
        self.loaded = threading.Event()

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(name="bigger", device="cpu", compute_type="int8", multilingual=False)

    def load(self) -> None:
        # The timeout only bounds a hang: the test sets the event.
        assert self.loaded.wait(LOAD_HANG_S), "the test never let the load finish"
        super().load()


def two_sentences(shared_audio: Path) -> np.ndarray:
    first = load_audio(shared_audio / "ls-tc-6930-75918-0000.wav")
    second = load_audio(shared_audio / "arctic-axb-a0006.wav")
    gap = np.zeros(int(2.5 * SAMPLE_RATE), np.float32)
    return np.concatenate([first, gap, second, gap]).astype(np.float32)


def run_with_reload(shared_audio: Path, new: SlowModel, *, load_until_speech: int = 0,
                    realtime: bool = True) -> tuple[Recorder, ThreadRecordingRunner]:
    """Plays two sentences and switches to ``new`` at the first final. The new model's load
    ends once the engine has reported the start of speech number ``load_until_speech`` (at
    once when 0)."""
    old = ThreadRecordingRunner(("Old model text.",))
    rec = Recorder()
    switched = threading.Event()
    speech = 0
    if load_until_speech == 0:
        new.loaded.set()

    def sink(event: object) -> None:
        nonlocal speech
        rec(event)  # type: ignore[arg-type]
        if isinstance(event, SpeechStarted):
            speech += 1
            if speech == load_until_speech:
                new.loaded.set()
        if isinstance(event, FinalText) and not switched.is_set():
            switched.set()
            engine.reload(new)  # the first final is in: switch (from the engine's thread)

    engine = LocalLiveEngine(sink, source=FileSource(audio=two_sentences(shared_audio),
                                                     realtime=realtime),
                             runner=old, options=LiveOptions(journal=False))
    engine.start()
    assert engine.wait(timeout=60), "engine did not stop"
    return rec, old


def test_a_new_model_loads_while_listening_and_decodes_what_came_meanwhile(
        shared_audio: Path) -> None:
    """The switch starts at the first final and its load lasts until the second sentence has
    begun: the sentence heard during the load is decoded, in full, by the new model; the old
    one decoded the first; the states show the switch."""
    new = SlowModel("New model text.")
    rec, _old = run_with_reload(shared_audio, new, load_until_speech=2, realtime=False)
    assert [f.text for f in rec.of(FinalText)] == ["Old model text.", "New model text."]
    assert rec.states() == ["loading", "ready", "listening",  # the first model
                            "loading", "ready", "listening",  # the switch
                            "stopped"]
    assert [e.detail for e in rec.events if getattr(e, "state", "") == "ready"] == [
        "scripted", "bigger"]
    # The new model was loaded on a new inference thread, which then did every decode of it.
    assert new.threads[0] == ("load", "sottovoce-inference")
    assert {kind for kind, _ in new.threads[1:]} == {"decode"}
    # The second sentence began while the new model was loading (the load waited for it): it
    # is decoded in full once the model is in.
    started = [i for i, e in enumerate(rec.events) if isinstance(e, SpeechStarted)]
    ready = [i for i, e in enumerate(rec.events) if getattr(e, "state", "") == "ready"]
    assert len(started) == 2 and started[1] < ready[1]
    second = rec.of(FinalText)[1]
    assert second.end - second.start >= SAMPLE_RATE  # ~1.8 s of "God bless ..."
    assert not rec.of(EngineFailed)


def test_a_model_that_fails_to_load_leaves_the_old_one(shared_audio: Path) -> None:
    """A load that fails is reported (recoverable) and the old model decodes on."""
    broken = SlowModel("never", fail_load=True)
    # (Nothing here hangs on the timing of the speech: the file is read as fast as it goes.)
    rec, _old = run_with_reload(shared_audio, broken, realtime=False)
    failures = rec.of(EngineFailed)
    assert len(failures) == 1 and failures[0].recoverable
    assert failures[0].message == ("could not load the new model (no such model: nothing-here); "
                                   "keeping scripted")
    assert [f.text for f in rec.of(FinalText)] == ["Old model text.", "Old model text."]
    assert rec.states()[-1] == "stopped"


@pytest.mark.model
def test_the_app_engine_switches_real_models_mid_speech(jfk_wav: Path, tmp_path: Path,
                                                        manifest: list[ManifestEntry]) -> None:
    """tiny.en hears "And so my fellow Americans, ask not ..."; then base is loaded into the
    running engine and decodes the sentence said again after a pause: its finals are the end
    of what was said (WER against as many last words of the sentence said twice). (The pause is made 2.5 s:
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
    # What base heard is the end of the sentence said again (a property, not tiny's or base's
    # exact words: kernels differ by processor).
    base_ready = max(i for i, e in enumerate(rec.events) if getattr(e, "state", "") == "ready")
    by_base = " ".join(e.text for e in rec.events[base_ready:]
                       if isinstance(e, FinalText) and e.text)
    said = next(e.text for e in manifest if e.path.name == jfk_wav.name)
    heard = normalize(by_base).split()
    assert len(heard) >= 4, by_base
    # (Base may also decode the end of the first saying, in flight when it came in.)
    said_last = " ".join(normalize(f"{said} {said}").split()[-len(heard):])
    assert error_rate([said_last], [by_base]) <= 0.25, (said_last, by_base)
    assert not rec.of(EngineFailed)
