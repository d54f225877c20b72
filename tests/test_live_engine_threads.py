"""LocalLiveEngine's own work, in the fast lane: threads, stop, flush, push-to-talk, failures.

Real parts everywhere but the decoder: real speech (the JFK clip) through a real `FileSource`
and the real Silero VAD into the stream core; the decodes come from `ScriptedRunner` (a real
`Runner` whose text is fixed), so what is checked is the driver: which thread loads and decodes,
that stop flushes the utterance in flight, that a press/release cuts exactly one utterance, and
that failures become events instead of hangs. The text the real model gives is checked by
test_live_engine.py.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from support.events import Recorder
from support.runners import JFK_TEXT, ThreadRecordingRunner

from engine.asr.fake import ScriptedRunner
from engine.audio.decode import load_audio
from engine.audio.sources import FileSource
from engine.core.policy import PolicyOptions
from engine.events import (
    EngineFailed,
    FinalText,
    LevelChanged,
    Metrics,
    PartialText,
    SpeechEnded,
    SpeechStarted,
)
from engine.live import CostModel, DecodeCost, LiveOptions, LocalLiveEngine, ReportedCost
from engine.types import SAMPLE_RATE

# In simulated time each decode costs what the scripted runner reports (`ReportedCost`), not
# what it took on this machine.
SCRIPTED = ReportedCost()


def run(source: FileSource, runner: ScriptedRunner, options: LiveOptions,
        during=None, cost: CostModel = SCRIPTED) -> Recorder:  # type: ignore[no-untyped-def]
    rec = Recorder()
    engine = LocalLiveEngine(rec, source=source, runner=runner,
                             options=replace(options, decode_cost=cost))
    engine.start()
    if during is not None:
        during(engine)
    assert engine.wait(timeout=60), "engine did not stop"
    return rec


def test_vad_mode_events_in_order_and_decodes_on_the_loading_thread(jfk_wav: Path) -> None:
    runner = ThreadRecordingRunner()
    rec = run(FileSource(jfk_wav, tail_silence_s=1.5), runner, LiveOptions(journal=False))
    assert rec.states() == ["loading", "ready", "listening", "stopped"]
    finals = rec.of(FinalText)
    assert finals and {f.text for f in finals} == {JFK_TEXT}  # one per pause-separated utterance
    started, ended = rec.of(SpeechStarted), rec.of(SpeechEnded)
    assert len(started) == len(ended) == len(finals)
    for final in finals:  # each utterance: started, ended, then its final
        kinds = [type(e) for e in rec.events if isinstance(e, (SpeechStarted, SpeechEnded,
                 FinalText)) and e.utterance_id == final.utterance_id]
        assert kinds == [SpeechStarted, SpeechEnded, FinalText]
    assert rec.of(PartialText) and rec.of(LevelChanged) and rec.of(Metrics)
    # The model is loaded on the inference worker, which lives as long as the engine and
    # runs every decode (a CTranslate2 model first used on an exited thread is 4-6x slower).
    assert runner.threads[0] == ("load", "sottovoce-inference")
    assert {name for _, name in runner.threads} == {"sottovoce-inference"}
    # The final covers the speech, on the source's timeline.
    duration = len(load_audio(jfk_wav))
    assert 0 <= finals[0].start < SAMPLE_RATE and duration - SAMPLE_RATE < finals[-1].end
    assert finals[-1].end <= duration + int(1.5 * SAMPLE_RATE)
    assert all(a.end <= b.start for a, b in zip(finals, finals[1:], strict=False))


def test_simulated_time_charges_each_decode_its_modelled_cost(jfk_wav: Path) -> None:
    cost = DecodeCost(fixed_s=0.25, per_audio_s=0.1, padded_s=1.0, beam_x=2.0)
    rec = run(FileSource(jfk_wav, tail_silence_s=1.5), ThreadRecordingRunner(),
              LiveOptions(journal=False), cost=cost)
    metrics = rec.of(Metrics)
    assert {m.kind for m in metrics} == {"partial", "final"}
    for m in metrics:  # each result came back exactly the model's cost after it was issued
        seconds = m.decode_ms / 1000 / m.rtf  # the request's audio
        assert m.chunk_rtt_ms == pytest.approx(m.decode_ms)
        # (x2 for a beam search, +1 s on the padded window)
        assert any(m.decode_ms / 1000 == pytest.approx(beam * (0.25 + 0.1 * seconds + padded))
                   for beam in (1.0, 2.0) for padded in (0.0, 1.0)), m
    with pytest.raises(ValueError):
        DecodeCost(fixed_s=-1)


def test_stop_flushes_the_utterance_in_flight(jfk_wav: Path) -> None:
    runner = ThreadRecordingRunner()

    def stop_mid_speech(engine: LocalLiveEngine) -> None:
        deadline = threading.Event()
        while engine._core is None or engine._source.position < 3 * SAMPLE_RATE:
            deadline.wait(0.02)
        engine.stop()

    rec = run(FileSource(jfk_wav, realtime=True), runner, LiveOptions(journal=False),
              during=stop_mid_speech)
    finals = rec.of(FinalText)
    assert finals and {f.text for f in finals} == {JFK_TEXT}  # the one cut by stop too
    assert len(rec.of(SpeechStarted)) == len(finals)
    assert 3 * SAMPLE_RATE <= finals[-1].end < len(load_audio(jfk_wav)) - SAMPLE_RATE
    assert rec.states()[-1] == "stopped" and not rec.of(EngineFailed)


def test_push_to_talk_cuts_one_utterance_with_preroll(jfk_wav: Path) -> None:
    options = LiveOptions(mode="ptt", journal=False, decode_cost=SCRIPTED)
    runner = ThreadRecordingRunner(("Ask not.",))
    rec = run(FileSource(jfk_wav), runner, options)
    assert not rec.of(FinalText)  # without a press, push-to-talk transcribes nothing

    press, release = 2 * SAMPLE_RATE, 4 * SAMPLE_RATE + 77  # not on a window border
    rec = Recorder()
    engine = LocalLiveEngine(rec, source=FileSource(jfk_wav), runner=runner, options=options)
    engine.begin_utterance(at=press)  # keys pressed before the engine is up still count
    engine.end_utterance(at=release)
    engine.start()
    assert engine.wait(timeout=60)
    finals = rec.of(FinalText)
    assert [f.text for f in finals] == ["Ask not."]
    segmenter = options.segmenter  # the pre-roll ring: preroll_ms and the start windows
    ring = (segmenter.windows(segmenter.preroll_ms) + segmenter.start_windows) * 512
    assert press - ring - 512 <= finals[0].start <= press - ring + 512
    assert release - 512 < finals[0].end <= release + 512


def test_a_press_over_silence_decodes_nothing() -> None:
    runner = ThreadRecordingRunner()
    rec = Recorder()
    silence = np.zeros(3 * SAMPLE_RATE, dtype=np.float32)
    engine = LocalLiveEngine(rec, source=FileSource(audio=silence), runner=runner,
                             options=LiveOptions(mode="ptt", journal=False,
                                                 decode_cost=SCRIPTED))
    engine.begin_utterance(at=SAMPLE_RATE // 2)
    engine.end_utterance(at=2 * SAMPLE_RATE)
    engine.start()
    assert engine.wait(timeout=60)
    assert [f.text for f in rec.of(FinalText)] == [""]  # closed, nothing to insert
    assert [kind for kind, _ in runner.threads] == ["load"]  # no decode was spent on it


def test_a_model_that_fails_to_load_ends_the_engine_with_its_message(jfk_wav: Path) -> None:
    rec = run(FileSource(jfk_wav), ThreadRecordingRunner(fail_load=True),
              LiveOptions(journal=False))
    failures = rec.of(EngineFailed)
    assert [f.message for f in failures] == ["no such model: nothing-here"]
    assert not failures[0].recoverable and rec.states()[-1] == "stopped"
    assert "listening" not in rec.states()


@pytest.mark.parametrize("speculative", [False, True])
def test_a_failed_decode_is_reported_and_the_engine_goes_on(jfk_wav: Path,
                                                            speculative: bool) -> None:
    runner = ThreadRecordingRunner(fail_decodes=1)
    audio = load_audio(jfk_wav)
    two = np.concatenate([audio, np.zeros(2 * SAMPLE_RATE, np.float32), audio])
    options = LiveOptions(journal=False, policy=PolicyOptions(
        partials=False, speculative_finals=speculative))
    rec = run(FileSource(audio=two, tail_silence_s=1.5), runner, options)
    failures = rec.of(EngineFailed)
    assert len(failures) == 1 and failures[0].recoverable
    assert "out of memory" in failures[0].message
    texts = [f.text for f in rec.of(FinalText)]
    if speculative:
        # The failed decode was a speculative final: the utterance's final is decoded again
        # the usual way, so nothing is lost.
        assert len(texts) > 1 and set(texts) == {JFK_TEXT}
    else:  # a failed final closes its utterance with empty text
        assert texts[0] == "" and len(texts) > 1 and set(texts[1:]) == {JFK_TEXT}
    assert rec.states()[-1] == "stopped"


def test_options_are_validated() -> None:
    with pytest.raises(ValueError):
        LiveOptions(mode="always")
    with pytest.raises(ValueError):
        LiveOptions(ptt_tail_ms=-1)
