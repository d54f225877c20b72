"""`sottovoce listen`: finals with latency and a summary; Ctrl+C flushes the last utterance."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from app.cli import main
from bench.evaluation import error_rate, read_manifest
from engine.audio.decode import load_audio
from engine.journal import list_sessions, read_journal
from engine.types import SAMPLE_RATE

pytestmark = pytest.mark.model
REPO = Path(__file__).resolve().parents[1]
REPEATS = 10
FINAL_LINE = re.compile(r"\[ *[0-9.]+s\] (.+?)   \(-?[0-9]+ ms after speech end, decode [0-9]+ ms\)$")


def write_wav(path: Path, audio: np.ndarray) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes((np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes())


def test_listen_to_a_file_in_simulated_time(shared_audio: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A file in simulated time: final lines with their latency, a summary that counts exactly
    the words printed, and the same finals saved in one journal session; the words are the
    clip's (WER against its reference, not tiny.en's exact words)."""
    wav = shared_audio / "cmusphinx-goforward.wav"  # "go forward ten meters"
    assert main(["listen", "--input", str(wav), "--fast"]) == 0
    out, err = capsys.readouterr()
    finals = [FINAL_LINE.match(line) for line in out.splitlines() if line.strip()]
    assert finals and all(finals), out
    texts = [m.group(1) for m in finals if m]
    # (One utterance; the words its partials agreed on are finals of their own before it ends,
    # PolicyOptions.commit_stable: one line each.)
    words = sum(len(t.split()) for t in texts)
    assert re.search(rf"\b{len(texts)} utterances, {words} words", err) and "saved to" in err, err
    said = next(e.text for e in read_manifest(shared_audio / "manifest.jsonl")
                if e.path.name == wav.name)
    assert error_rate([said], [" ".join(texts)]) <= 0.5, texts  # 2 words of 4 as margin
    sessions = list_sessions()
    assert len(sessions) == 1
    assert [e.text for e in read_journal(sessions[0])] == texts


def test_usage_and_device_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["listen", "--fast"]) == 2
    assert main(["listen", "--device", "no-such-microphone", "--no-journal"]) == 1
    assert "error:" in capsys.readouterr().err


def test_ctrl_c_stops_cleanly_after_flushing(shared_audio: Path, tmp_path: Path) -> None:
    """Ctrl+C once the first final is out (an event, not a clock) while a long recording plays
    in real time: the command says it is stopping, exits 0, its summary counts exactly the
    finals it printed, the journal holds those finals (the stop flushed them to disk), and far
    fewer words came than the file holds (it stopped where Ctrl+C came, not at the file's end)."""
    sentence = load_audio(shared_audio / "ls-dc-1272-128104-0000.wav")  # 5.9 s, one sentence
    wav = tmp_path / "ten-times.wav"
    # A minute of speech, a second's pause after each sentence: the first final is the first
    # sentence however slow the decodes are (without pauses it was one utterance cut by
    # length, and on a busy machine the first cut came 45 s in).
    pause = np.zeros(SAMPLE_RATE, dtype=sentence.dtype)
    write_wav(wav, np.concatenate([sentence, pause] * REPEATS))
    env = {**os.environ, "SOTTOVOCE_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "listen", "--input", str(wav)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # (blocks until the first final is printed)
    assert FINAL_LINE.match(first), first
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "stopping" in err, err
    finals = [FINAL_LINE.match(line) for line in (first + rest).splitlines() if line.strip()]
    assert all(finals), first + rest
    texts = [m.group(1) for m in finals if m]
    words = sum(len(t.split()) for t in texts)
    assert re.search(rf"\b{len(texts)} utterances, {words} words", err), (texts, err)
    (session,) = list_sessions(tmp_path / "data")
    assert [e.text for e in read_journal(session)] == texts
    said = next(e.text for e in read_manifest(shared_audio / "manifest.jsonl")
                if e.path.name == "ls-dc-1272-128104-0000.wav")
    assert words <= len(said.split()) * REPEATS // 2, texts  # cut, not played to the end
