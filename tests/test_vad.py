"""The VAD toolkit: Silero v6 (the real bundled ONNX model) on real speech, silence and noise,
streaming equals one call, the long-form piecewise scorer, the energy fallback and the factory;
the pure parts (levels, the quietest cut, hysteresis) on synthetic values."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from engine.audio.decode import load_audio
from engine.core.voice import (
    EnergyVad,
    Hysteresis,
    Onset,
    quietest,
    speech_regions,
    split_at_quiet,
    window_levels_db,
)
from engine.errors import EngineError
from engine.types import SAMPLE_RATE, VAD_WINDOW, SpeechScorer
from engine.vad import (
    CONTEXT,
    SileroVad,
    default_model_path,
    default_scorer,
    load_model,
    load_scorer,
    piecewise_probabilities,
    vad_pieces,
)

W = VAD_WINDOW


def rows(audio: np.ndarray) -> np.ndarray:
    """The whole windows of ``audio`` as (n, 512) rows (the stream core's job in the engine)."""
    count = len(audio) // W
    return np.asarray(audio[:count * W], dtype=np.float32).reshape(count, W)


@pytest.fixture(scope="module")
def vad() -> SileroVad:
    return load_scorer()


def test_speech_is_detected_in_real_speech(vad: SileroVad, jfk_wav: Path) -> None:
    vad.reset()
    audio = load_audio(jfk_wav)
    probs = vad.score(rows(audio))
    assert probs.shape == (len(audio) // W,) and probs.dtype == np.float32
    assert (probs > 0.5).mean() > 0.4  # most of the excerpt is speech
    assert probs.max() > 0.9


def test_silence_and_noise_are_not_speech(vad: SileroVad) -> None:
    vad.reset()
    assert vad.score(rows(np.zeros(SAMPLE_RATE * 5, dtype=np.float32))).max() < 0.1
    vad.reset()
    noise = np.random.default_rng(1).normal(0, 0.05, SAMPLE_RATE * 10).astype(np.float32)
    assert vad.score(rows(noise)).max() < 0.5


@pytest.mark.parametrize(("name", "block"), [
    ("arctic-aew-a0001.wav", 3),
    ("mfa-acoustic-corpus.wav", 7),  # 25 s: the fresh state is rebuilt three times
])
def test_scoring_in_blocks_matches_one_call(vad: SileroVad, shared_audio: Path, name: str,
                                            block: int) -> None:
    windows = rows(load_audio(shared_audio / name))
    vad.reset()
    whole = vad.score(windows)
    vad.reset()
    parts = [vad.score(windows[i:i + block]) for i in range(0, len(windows), block)]
    assert np.allclose(whole, np.concatenate(parts), atol=1e-5)


def test_a_new_voice_after_a_minute_of_another_is_still_speech(shared_audio: Path) -> None:
    reading = load_audio(shared_audio / "long-ljspeech-LJ001-0001-0032.wav")[:60 * SAMPLE_RATE]
    cold = load_audio(shared_audio / "mfa-cold-corpus.wav")
    gap = np.zeros(SAMPLE_RATE, dtype=np.float32)
    audio = np.concatenate([reading, gap, cold, gap])
    start = len(reading) + len(gap)
    span = slice(start // W, (start + len(cold)) // W)
    scores = {refresh: load_scorer(refresh_s=refresh).score(rows(audio)) for refresh in (0.0, 8.0)}
    assert np.mean(scores[0.0][span] > 0.5) < 0.1  # one continuous state drifts off this voice
    assert np.mean(scores[8.0][span] > 0.5) > 0.4
    # The continuous state still votes: no window scores lower than with it alone.
    assert np.all(scores[8.0] >= scores[0.0] - 1e-6)
    alone = load_scorer().score(rows(np.concatenate([gap, cold])))
    assert np.mean(alone > 0.5) > 0.55
    with pytest.raises(ValueError):
        SileroVad(refresh_s=-1)


def test_scorers_share_one_session_but_not_their_state(shared_audio: Path) -> None:
    a, b = load_scorer(), load_scorer()
    assert a._model is b._model is load_model(default_model_path())
    speech = rows(load_audio(shared_audio / "arctic-aew-a0001.wav"))
    noise = rows(np.random.default_rng(2).normal(0, 0.02, len(speech) * W).astype(np.float32))
    alone = load_scorer().score(speech)
    interleaved = []
    for i in range(0, len(speech), 5):  # two streams scored turn by turn
        interleaved.append(a.score(speech[i:i + 5]))
        b.score(noise[i:i + 5])
    assert np.array_equal(np.concatenate(interleaved), alone)
    assert isinstance(a, SpeechScorer)


def test_misuse_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="load"):
        SileroVad().score(np.zeros((1, W), dtype=np.float32))
    with pytest.raises(ValueError, match="512"):
        load_scorer().score(np.zeros(W, dtype=np.float32))  # one flat window, not (1, 512)
    assert load_scorer().score(np.zeros((0, W), dtype=np.float32)).shape == (0,)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(EngineError, match="VAD model"):
        SileroVad(bad).load()


def test_the_factory_falls_back_to_energy_with_a_warning(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert isinstance(default_scorer(), SileroVad)
    bad = tmp_path / "missing.onnx"
    monkeypatch.setattr("engine.vad.default_model_path", lambda: bad)
    with caplog.at_level(logging.WARNING, logger="engine.vad"):
        scorer = default_scorer()
    assert isinstance(scorer, EnergyVad) and isinstance(scorer, SpeechScorer)
    assert "energy detector" in caplog.text


# --- long form: fresh-state pieces cut at the quietest window -----------------------------


def test_piecewise_scores_each_piece_from_a_fresh_state(shared_audio: Path) -> None:
    audio = load_audio(shared_audio / "mfa-acoustic-corpus.wav")
    probs = piecewise_probabilities(audio)
    padded = np.pad(audio, (0, (-len(audio)) % W))
    pieces = vad_pieces(padded)
    assert len(pieces) >= 3 and probs.shape == (len(padded) // W,)
    for start, end in pieces:
        fresh = load_scorer(refresh_s=0).score(rows(padded[start:end]))
        assert np.allclose(probs[start // W:end // W], fresh, atol=1e-6)
    assert np.array_equal(probs, piecewise_probabilities(audio, workers=2))
    assert piecewise_probabilities(np.zeros(0, dtype=np.float32)).shape == (0,)


def test_the_bundled_model_is_faster_whispers(shared_audio: Path) -> None:
    """Long-form used faster-whisper's loader; ours scores the same file the same way, except
    that faster-whisper zeroes the last `CONTEXT` samples of each call's last window (it writes
    into the caller's array): the chunk plans on the shared files did not change (module notes
    of `engine.longform.chunking`)."""
    vad_module = pytest.importorskip("faster_whisper.vad")
    bundled = Path(vad_module.__file__).parent / "assets" / "silero_vad_v6.onnx"
    assert bundled.read_bytes() == default_model_path().read_bytes()
    windows = rows(load_audio(shared_audio / "arctic-aew-a0001.wav"))
    theirs = np.asarray(vad_module.get_vad_model()(windows.reshape(-1).copy())).reshape(-1)
    zeroed = windows.copy()
    zeroed[-1, -CONTEXT:] = 0
    assert np.allclose(load_model().score_fresh(zeroed), theirs, atol=1e-6)
    assert np.allclose(load_model().score_fresh(windows)[:-1], theirs[:-1], atol=1e-6)


# --- the pure toolkit -------------------------------------------------------------------


def test_window_levels_db() -> None:
    t = np.arange(W) / SAMPLE_RATE
    sine = np.sin(2 * np.pi * 500 * t).astype(np.float32)  # 16 whole periods
    levels = window_levels_db(np.stack([sine, 0.1 * sine, np.zeros(W, np.float32)]))
    assert np.allclose(levels, [-3.01, -23.01, -100.0], atol=0.01)
    assert window_levels_db(sine).shape == (1,)  # one flat window is one row


def test_quietest_picks_the_lowest_in_range() -> None:
    values = np.array([0.0, 5, 3, 1, 1, 4, 0], dtype=np.float32)
    assert quietest(values, 1, 6) == 3  # the first of equals; outside the range does not count
    assert quietest(list(values), 2, 3) == 2
    # Smoothed, a single low window between loud ones loses to a quiet stretch.
    spiky = np.array([9, 9, 0, 9, 9, 2, 2, 2, 9], dtype=np.float32)
    assert quietest(spiky, 0, 9) == 2 and quietest(spiky, 0, 9, smooth=True) == 6
    with pytest.raises(ValueError):
        quietest(values, 4, 4)


def test_split_at_quiet_cuts_in_the_pause_of_the_second_half() -> None:
    probs = np.full(100, 0.9, dtype=np.float32)
    probs[20:23] = 0.0  # in the first half of the allowed 60 windows: not chosen
    probs[45:48] = 0.1
    pieces = split_at_quiet(probs, 0, 100 * W, 60 * W)
    assert pieces == [(0, 46 * W), (46 * W, 100 * W)]
    flat = split_at_quiet(np.zeros(10, dtype=np.float32), 0, 10 * W, 10 * W)
    assert flat == [(0, 10 * W)]


def test_onset_needs_a_long_enough_run_that_peaked() -> None:
    onset = Onset(3)
    assert [onset.push(s, p) for s, p in [(True, True), (True, False), (False, False)]] == \
        [False, False, False]  # broken after two
    assert [onset.push(s, p) for s, p in [(True, False), (True, False), (True, False)]] == \
        [False, False, False]  # long enough, never peaked
    assert onset.push(True, True) and onset.run == 4
    onset.clear()
    assert onset.run == 0 and not onset.peaked
    with pytest.raises(ValueError):
        Onset(0)


def test_hysteresis_starts_high_and_holds_low() -> None:
    gate = Hysteresis(0.5, 0.35, start_windows=3)
    assert [gate.starts(p) for p in [0.9, 0.2, 0.4, 0.4]] == [False] * 4  # the click is cut off
    assert gate.starts(0.6) and gate.onset.run == 3  # 0.4, 0.4, 0.6: a run that peaked
    assert gate.holds(0.35) and not gate.holds(0.34)
    with pytest.raises(ValueError):
        Hysteresis(0.3, 0.5)


def test_speech_regions_keep_dips_above_the_end_threshold() -> None:
    probs = np.array([0.1, 0.4, 0.6, 0.4, 0.7, 0.2, 0.45, 0.3, 0.8, 0.9], dtype=np.float32)
    assert speech_regions(probs, 0.5, 0.35) == [(2, 5), (8, 10)]
    assert speech_regions(np.zeros(4, dtype=np.float32), 0.5, 0.35) == []


def test_energy_vad_scores_loudness() -> None:
    scorer = EnergyVad()
    t = np.arange(W) / SAMPLE_RATE
    sine = np.sin(2 * np.pi * 500 * t).astype(np.float32)
    # RMS of a unit sine is -3 dBFS; scaled to -42.5 dBFS it sits halfway from -50 to -35.
    halfway = sine * np.float32(10 ** (-39.5 / 20))
    probs = scorer.score(np.stack([sine, np.zeros(W, np.float32), halfway]))
    assert np.allclose(probs, [1.0, 0.0, 0.5], atol=1e-3) and probs.dtype == np.float32
    scorer.reset()  # stateless: nothing changes
    assert np.array_equal(scorer.score(np.stack([sine])), probs[:1])
    assert scorer.score(np.zeros((0, W), dtype=np.float32)).shape == (0,)
    with pytest.raises(ValueError):
        EnergyVad(floor_db=-30, full_db=-40)
