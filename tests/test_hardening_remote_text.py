"""Issue 41, text from servers and other programs: a hostile transcription server on 127.0.0.1
(the native protocol over a real WebSocket) whose ready, partial, final and error frames carry
escape sequences, against the real remote engine and `sottovoce listen`'s printer; and
`sottovoce listen --list-apps` with a real PulseAudio client whose names are escape sequences."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.events import EngineFailed, Event, FinalText, PartialText, StateChanged
from engine.types import Word
from engine.wire import protocol as p

REPO = Path(__file__).resolve().parents[1]
ESC = "\x1b[2J\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\u202e\x7f\x08"
KEY = "sk-remote-0123456789"


def _silence(path: Path, seconds: float) -> Path:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(b"\0\0" * int(16000 * seconds))
    return path


@pytest.fixture
def hostile_server() -> Iterator[str]:
    """Answers the first audio frame with a partial, a final and a fatal error, all laced."""
    from websockets.sync.server import serve

    def handler(ws) -> None:  # type: ignore[no-untyped-def]
        ws.recv(timeout=10)  # the hello
        ws.send(p.encode_server(p.Ready("s", f"tiny{ESC}.en")))
        ws.recv(timeout=10)  # audio
        ws.send(p.encode_server(p.Partial(1, f"go{ESC} on", f"and{ESC}", 0, 8000)))
        words = (Word(f" Hello{ESC}", 0, 8000), Word(" there.\x1b[1A", 8000, 16000))
        ws.send(p.encode_server(p.Final(1, f"Hello{ESC} there.\x1b[1A", words, 0, 16000,
                                        decode_ms=5.0)))
        ws.send(p.encode_server(p.Error(p.UNAUTHORIZED, f"{ESC}no access for Authorization: "
                                        f"Bearer {KEY}\r\n\x1b[0m")))
        ws.recv(timeout=10)  # until the client goes

    with serve(handler, "127.0.0.1", 0) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}"
        server.shutdown()
        thread.join(10)


def test_a_hostile_servers_text_reaches_the_events_as_text_alone(hostile_server: str,
                                                                 tmp_path: Path) -> None:
    from app.commands.listen import CaptionPrinter
    from engine.audio.sources import FileSource
    from engine.remote.client import RemoteLiveEngine

    events: list[Event] = []
    engine = RemoteLiveEngine(events.append, url=hostile_server,
                              source=FileSource(str(_silence(tmp_path / "s.wav", 2.0)),
                                                realtime=False))
    engine.start()
    assert engine.wait(60), "the engine did not stop after the server's fatal error"
    partial = next(e for e in events if isinstance(e, PartialText))
    final = next(e for e in events if isinstance(e, FinalText))
    failed = next(e for e in events if isinstance(e, EngineFailed))
    ready = next(e for e in events if isinstance(e, StateChanged) and e.state == "ready")
    assert (partial.committed, partial.tentative) == ("go on", "and")
    assert final.text == "Hello there."
    assert [w.text for w in final.words] == [" Hello", " there."]
    assert ready.detail == "tiny.en"
    assert failed.message == ("server error unauthorized: no access for Authorization: "
                              "Bearer [redacted]")
    printer = CaptionPrinter(io.StringIO())
    for event in events:
        printer(event)
    assert printer.out.getvalue() == "Hello there.\n"  # type: ignore[attr-defined]


def test_listen_prints_text_alone_whatever_the_engine_says(capsys) -> None:  # type: ignore[no-untyped-def]
    """The printer's own line of defence: a local model's text is not trusted either."""
    from app.commands.listen import Printer

    printer = Printer(sys.stdout)
    printer(FinalText(1, f"Hi{ESC} you.", (), 0, 16000, 10.0, 20.0))
    printer(EngineFailed(f"decoder said {ESC}no", recoverable=True))
    out, err = capsys.readouterr()
    assert out == "[   0.00s] Hi you.   (20 ms after speech end, decode 10 ms)\n"
    assert err == "error: decoder said no\n"


def test_transcribe_prints_the_transcript_with_its_own_line_breaks_alone(capsys) -> None:  # type: ignore[no-untyped-def]
    from app.commands.transcribe import _print_result

    _print_result("a.wav", f"[00:00] One{ESC}.\r\n[00:02] Two\tthree.\n", True, 0)
    assert capsys.readouterr().out == "==> a.wav <==\n[00:00] One.\n[00:02] Two\tthree.\n"


def _pulse_ok() -> bool:
    try:
        return subprocess.run(["pactl", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.e2e
def test_list_apps_prints_another_programs_names_as_text_alone(tmp_path: Path) -> None:
    if not _pulse_ok():
        pytest.skip("needs a PulseAudio server: source .ci/desktop.sh")
    sink = f"sv_hostile_{os.getpid()}"
    module = subprocess.run(["pactl", "load-module", "module-null-sink", f"sink_name={sink}"],
                            capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    wav = _silence(tmp_path / "quiet.wav", 120.0)
    player = subprocess.Popen(["paplay", f"--device={sink}", f"--client-name=evil{ESC}app",
                               f"--stream-name=song{ESC}title", str(wav)])
    try:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        lines: list[bytes] = []
        for _ in range(100):  # until the stream shows (paplay connects in its own time)
            out = subprocess.run([sys.executable, "-m", "app.cli", "listen", "--list-apps"],
                                 cwd=REPO, env=env, capture_output=True, timeout=60).stdout
            lines = [line for line in out.splitlines() if line.startswith(b"evil")]
            if lines:
                break
            if player.poll() is not None:
                pytest.fail("paplay ended")
        assert lines == [b"evilapp\tsongtitle"]
    finally:
        player.terminate()
        player.wait(10)
        subprocess.run(["pactl", "unload-module", module], timeout=10, check=False)
