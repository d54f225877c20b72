"""Servers for tests on 127.0.0.1: a free port, our server in its own process, the WhisperLive
venv's python, and a JSON GET."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("SOTTOVOCE_WHISPERLIVE_VENV", REPO / ".venv-whisperlive"))


def venv_python() -> Path:
    """The WhisperLive venv's python, building the venv if needed; skips with the reason."""
    python = VENV / "bin" / "python"
    check = [str(python), "-c", "import whisper_live.server"]
    if python.exists() and subprocess.run(check, capture_output=True, timeout=120).returncode == 0:
        return python
    build = subprocess.run(["bash", str(REPO / ".ci" / "whisperlive-venv.sh"), str(VENV)],
                           capture_output=True, text=True, timeout=900)
    if build.returncode != 0:
        reason = (build.stderr or build.stdout).strip().splitlines()[-3:]
        pytest.skip(f"WhisperLive venv could not be built: {' / '.join(reason)}")
    return python


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn_server(port: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--idle-timeout", "20"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the model is loaded and the port bound
    assert line.startswith("listening"), line
    return proc


def http_json(address: str, headers: dict[str, str] | None = None) -> dict[str, object]:
    request = urllib.request.Request(address, headers=headers or {})
    with urllib.request.urlopen(request, timeout=10) as response:
        data: dict[str, object] = json.loads(response.read())
        return data
