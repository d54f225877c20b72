"""`sottovoce listen`: finals with latency and a summary; Ctrl+C flushes the last utterance."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.cli import main
from engine.journal import list_sessions, read_journal

pytestmark = pytest.mark.model
REPO = Path(__file__).resolve().parents[1]


def test_listen_to_a_file_in_simulated_time(shared_audio: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    wav = shared_audio / "cmusphinx-goforward.wav"
    assert main(["listen", "--input", str(wav), "--fast"]) == 0
    out, err = capsys.readouterr()
    assert "forward" in out.lower() and "ms after speech end" in out
    # (One utterance; the words its partials agreed on are finals of their own before it ends,
    # PolicyOptions.commit_stable: one line each.)
    assert re.search(r"\b[1-9]\d* utterances, 4 words", err) and "saved to" in err, err
    sessions = list_sessions()
    assert len(sessions) == 1
    assert "go forward" in " ".join(e.text for e in read_journal(sessions[0])).lower()


def test_usage_and_device_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["listen", "--fast"]) == 2
    assert main(["listen", "--device", "no-such-microphone", "--no-journal"]) == 1
    assert "error:" in capsys.readouterr().err


def test_ctrl_c_stops_cleanly_after_flushing(shared_audio: Path, tmp_path: Path) -> None:
    wav = shared_audio / "ls-dc-1272-128104-0000.wav"  # 5.9 s, one long sentence
    env = {**os.environ, "SOTTOVOCE_DATA_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "listen", "--input", str(wav)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    while line and "listening" not in line:
        line = proc.stderr.readline()
    time.sleep(3.0)  # mid-sentence (real-time playback); a human pressing Ctrl+C
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "stopping" in err and re.search(r"\b[1-9]\d* utterances", err), err
    assert "quilter" in out.lower() or "apostle" in out.lower(), out
    assert "gospel" not in out.lower()  # cut where Ctrl+C came, not played to the end
