"""Hardening of the command line: `sottovoce listen` stopped by Ctrl+C (once, twice), SIGTERM
and SIGHUP from each source and against a server that never answers ``end`` ends with the
conventional status, no traceback, no abort, and what was heard saved.

Children run with SIGINT restored to its default (a background job of a non-interactive shell
starts with it ignored); each step waits on the child's own lines, never on a sleep.
"""

from __future__ import annotations

import asyncio
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.pulse import Sinks, pulse_missing

from bench.evaluation import normalize
from engine.journal import is_caption_session, list_sessions, read_journal
from engine.wire import protocol as p

REPO = Path(__file__).resolve().parents[1]
QUILTER = "ls-dc-1272-128104-0000.wav"  # 5.9 s, one long sentence
JFK = "jfk-inaugural-1961-excerpt.wav"
STALLED_LINE = "The stalled server heard this."


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


CHILDREN: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_child_left() -> Iterator[None]:
    """A test that failed half-way leaves no `listen` running."""
    yield
    while CHILDREN:
        proc = CHILDREN.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


CAPTION = "<a caption of the JFK clip>"
JFK_WORDS = set(normalize("And so my fellow Americans ask not what your country can do for you "
                          "ask what you can do for your country").split())


def reads_jfk(text: str) -> bool:
    """Three of the clip's words at least: a caption of it, on any processor."""
    return len(set(normalize(text).split()) & JFK_WORDS) >= 3


class Child:
    """`sottovoce listen ...` in a child process; its stdout and stderr lines awaited."""

    def __init__(self, *args: str, data_dir: Path, **env_vars: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1",
                   SOTTOVOCE_DATA_DIR=str(data_dir), **env_vars)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "listen", *args], cwd=REPO, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_default_sigint)
        CHILDREN.append(self.proc)
        self.lines: dict[str, list[str]] = {"out": [], "err": []}
        self._new: queue.Queue[None] = queue.Queue()
        for name, stream in (("out", self.proc.stdout), ("err", self.proc.stderr)):
            threading.Thread(target=self._read, args=(name, stream), daemon=True).start()

    def _read(self, name: str, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines[name].append(line.rstrip("\n"))
            self._new.put(None)
        self._new.put(None)

    def wait_for(self, name: str, needle: str, timeout: float = 240) -> str:
        """The first line of ``name`` (out, err) holding ``needle`` (``CAPTION``: any line
        with three of the JFK clip's words, whatever words this processor's model writes)."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines[name]:
                if (reads_jfk(line) if needle is CAPTION else needle in line):
                    return line
            if self.proc.poll() is not None and self._new.empty():
                break
            try:
                self._new.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
        raise AssertionError(f"no {needle!r} in std{name}: {self.lines}")

    def finish(self) -> int:
        code = self.proc.wait(180)
        while self.proc.stdout and not self.proc.stdout.closed and self._new.qsize():
            self._new.get_nowait()
        return code

    @property
    def err(self) -> str:
        return "\n".join(self.lines["err"])


def long_speech(shared_audio: Path, folder: Path) -> Path:
    """JFK three times, 2 s of silence after each, as one WAV: its first final comes at the
    first silence, 25 s of audio before the file ends (a signal then lands mid-run)."""
    import wave

    import numpy as np

    from engine.audio.decode import load_audio
    from engine.wire.protocol import float_to_pcm16

    speech = load_audio(shared_audio / JFK)
    silence = np.zeros(32_000, dtype=np.float32)
    path = folder / "jfk-three-times.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16_000)
        out.writeframes(float_to_pcm16(np.concatenate([speech, silence] * 3)))
    return path


def caption_texts(data_dir: Path) -> list[str]:
    sessions = [s for s in list_sessions(data_dir) if is_caption_session(s)]
    assert len(sessions) == 1, sessions
    return [e.text for e in read_journal(sessions[0])]


def session_texts(data_dir: Path) -> list[str]:
    sessions = list_sessions(data_dir)
    assert len(sessions) == 1, sessions
    return [e.text for e in read_journal(sessions[0])]


def clean(child: Child, code: int | set[int]) -> None:
    assert child.finish() in (code if isinstance(code, set) else {code}), child.err
    assert "Traceback" not in child.err and "terminate called" not in child.err, child.err


# -- a server that never answers ``end`` ------------------------------------------------------

class StalledServer:
    """Our protocol on 127.0.0.1: ready on hello, one final once a second of audio is in, and
    no ``bye`` after ``end`` (``ended`` is set when it arrives)."""

    def __init__(self) -> None:
        self.ended = threading.Event()
        self.port = 0
        self._up = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Future[None] | None = None
        self._thread = threading.Thread(target=self._loop.run_until_complete,
                                        args=(self._main(),), daemon=True)

    def __enter__(self) -> StalledServer:
        self._thread.start()
        assert self._up.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set_result, None)
        self._thread.join(30)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    async def _main(self) -> None:
        from websockets.asyncio.server import serve

        self._stop = self._loop.create_future()
        async with serve(self._session, "127.0.0.1", 0) as server:
            self.port = next(iter(server.sockets)).getsockname()[1]
            self._up.set()
            await self._stop

    async def _session(self, ws: object) -> None:
        connection, said = p.ServerConnection(), False
        async for frame in ws:  # type: ignore[attr-defined]
            messages = (connection.receive_text(frame) if isinstance(frame, str)
                        else connection.receive_bytes(frame))
            for message in messages:
                if isinstance(message, p.Hello):
                    await ws.send(p.encode_server(p.Ready(message.session_id, "stalled")))  # type: ignore[attr-defined]
                elif isinstance(message, p.Audio) and not said and message.end >= 16_000:
                    said = True
                    await ws.send(p.encode_server(p.Final(1, STALLED_LINE, (), 0, 16_000, 1.0)))  # type: ignore[attr-defined]
                elif isinstance(message, p.End):
                    self.ended.set()  # ... and never a bye


@pytest.fixture
def stalled() -> Iterator[StalledServer]:
    with StalledServer() as server:
        yield server


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_listen_on_a_server_that_never_ends_stops_on_the_second_signal(
        stalled: StalledServer, shared_audio: Path, tmp_path: Path, signum: int,
        code: int) -> None:
    child = Child("--source", "mic", "--input", str(shared_audio / QUILTER), "--server",
                  stalled.url, data_dir=tmp_path)
    child.wait_for("out", STALLED_LINE)
    child.proc.send_signal(signum)
    child.wait_for("err", "Ctrl+C again to stop at once")
    assert stalled.ended.wait(60)  # the client said end; the server will never answer it
    child.proc.send_signal(signum)
    clean(child, code)
    assert "stopping now; what was heard is kept" in child.err
    assert f"saved to {tmp_path}" in child.err
    assert caption_texts(tmp_path) == [STALLED_LINE]


def test_a_server_that_never_answers_end_is_given_up_on_and_said_so(
        stalled: StalledServer, shared_audio: Path) -> None:
    from engine.audio.sources import FileSource
    from engine.events import EngineFailed, Event, FinalText
    from engine.remote.client import RemoteLiveEngine
    from engine.remote.link import RemoteOptions

    events: list[Event] = []
    engine = RemoteLiveEngine(events.append, url=stalled.url,
                              source=FileSource(shared_audio / QUILTER, realtime=False),
                              options=RemoteOptions(end_timeout_s=0.5))
    engine.start()
    assert engine.wait(120)
    assert stalled.ended.is_set()
    assert [e.text for e in events if isinstance(e, FinalText)] == [STALLED_LINE]
    failures = [e for e in events if isinstance(e, EngineFailed)]
    assert [(f.message, f.recoverable) for f in failures] == [
        ("the server did not finish in time; the end of the recording was not transcribed",
         False)]


def test_abort_before_the_connection_and_after_it_ends_promptly(stalled: StalledServer,
                                                               shared_audio: Path) -> None:
    from engine.audio.sources import FileSource
    from engine.events import Event, StateChanged
    from engine.remote.client import RemoteLiveEngine

    events: list[Event] = []
    engine = RemoteLiveEngine(events.append, url=stalled.url,
                              source=FileSource(shared_audio / QUILTER, realtime=True))
    engine.abort()  # before start: nothing runs long
    engine.start()
    assert engine.wait(60)
    assert StateChanged("stopped") in events


# -- the local model: each source ---------------------------------------------------------------

@pytest.mark.model
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_listen_from_a_file_as_the_microphone_stops_on_sigterm_and_sighup(
        shared_audio: Path, tmp_path: Path, signum: int, code: int) -> None:
    child = Child("--input", str(long_speech(shared_audio, tmp_path)), data_dir=tmp_path)
    child.wait_for("err", "listening")
    child.wait_for("out", "ms after speech end")  # a first final is in
    child.proc.send_signal(signum)
    clean(child, code)
    assert "stopping (finishing the last utterance" in child.err
    heard = [line.split("] ", 1)[1].split("   (")[0] for line in child.lines["out"]]
    assert session_texts(tmp_path) == heard and heard, child.lines  # each final printed is saved
    assert f"saved to {tmp_path}" in child.err


# -- export: bad times and empty sessions are errors --------------------------------------------

def export(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), SOTTOVOCE_DATA_DIR=str(data_dir))
    return subprocess.run([sys.executable, "-m", "app.cli", "export", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def caption_session(data_dir: Path, texts: tuple[str, ...]) -> Path:
    from engine.events import FinalText
    from engine.journal import Journal, caption_session_id, journal_dir

    session = caption_session_id()
    path = journal_dir(data_dir) / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    journal = Journal(session, journal_dir(data_dir))
    for index, text in enumerate(texts):
        journal.append(FinalText(utterance_id=index + 1, text=text, words=(),
                                 start=index * 32_000, end=index * 32_000 + 16_000,
                                 latency_ms=1.0, after_speech_end_ms=1.0))
    journal.close()
    return path


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "soon", "1e400"])
def test_export_refuses_a_time_that_is_no_number_of_seconds(tmp_path: Path, value: str) -> None:
    caption_session(tmp_path, ("One line.",))
    for option in ("--from", "--to"):
        run = export("last", option, value, data_dir=tmp_path)
        assert (run.returncode, run.stdout) == (2, ""), run
        assert run.stderr == (f"error: {option} must be a number of seconds (from the "
                              f"session's start), not {value!r}\n")


def test_export_of_an_empty_session_says_it_holds_no_text(tmp_path: Path) -> None:
    path = caption_session(tmp_path, ())
    run = export("last", data_dir=tmp_path)
    assert (run.returncode, run.stdout, run.stderr) == (
        1, "", "error: the last session holds no text\n")
    out = tmp_path / "out.txt"
    run = export(path.stem, "-o", str(out), data_dir=tmp_path)
    assert (run.returncode, run.stderr) == (1, f"error: the session {path.stem!r} holds no text\n")
    assert not out.exists()


def test_export_of_a_range_with_nothing_in_it_says_so(tmp_path: Path) -> None:
    caption_session(tmp_path, ("One line.", "Another line."))  # 0-1 s and 2-3 s
    run = export("last", "--from", "10", data_dir=tmp_path)
    assert (run.returncode, run.stdout, run.stderr) == (
        1, "", "error: nothing was said after 10 s (the session runs from 0.0 to 3.0 s)\n")
    run = export("last", "--from", "1.5", "--to", "2.5", "--no-timestamps", data_dir=tmp_path)
    assert (run.returncode, run.stdout) == (0, "Another line.\n"), run


# -- settings: a huge file, a huge value, one vocabulary entry too many --------------------------

def test_a_35_mb_settings_file_is_not_read_whole_and_its_message_is_short(tmp_path: Path) -> None:
    from app.settings import Settings, read_settings, set_aside

    path = tmp_path / "settings.toml"
    with path.open("w", encoding="utf-8") as file:
        file.write('version = 3\nvocabulary = """\n')
        for _ in range(35):
            file.write("Concord\n" * 131_072)  # 1 MiB a time
        file.write('"""\n')
    size = path.stat().st_size
    loaded = read_settings(path)
    assert loaded.settings == Settings()
    assert loaded.problems == (f"could not read {path} (the file is {size / 1e6:.1f} MB; a "
                               "settings file is at most 1 MB); using defaults",)
    kept = set_aside(loaded, path)  # nothing lost: the file is kept for the user
    assert kept is not None and kept.stat().st_size == size


def test_a_huge_value_of_the_wrong_type_makes_a_short_message(tmp_path: Path) -> None:
    from app.settings import MAX_QUOTED_CHARS, read_settings

    path = tmp_path / "settings.toml"
    path.write_text(f'version = 3\ncaption_lines = "{"x" * 900_000}"\n', encoding="utf-8")
    (problem,) = read_settings(path).problems
    assert problem.startswith(f"caption_lines = {'x' * 900_000!r}"[:MAX_QUOTED_CHARS + 16])
    assert "... (900002 characters) is invalid (expected a whole number)" in problem
    assert len(problem) < 2 * MAX_QUOTED_CHARS + 100


def test_a_vocabulary_one_entry_over_the_limit_keeps_the_first_200(tmp_path: Path) -> None:
    from app.settings import read_settings, set_aside
    from engine.vocabulary import parse

    terms = [f"Term{n:03d}" for n in range(203)]
    text = "# people\n" + "\n".join(terms[:150]) + "\n[medical]\n" + "\n".join(terms[150:]) + "\n"
    path = tmp_path / "settings.toml"
    original = f'version = 3\nvocabulary = """\n{text}"""\n'
    path.write_text(original, encoding="utf-8")
    loaded = read_settings(path)
    vocabulary = parse(loaded.settings.vocabulary)
    assert vocabulary.sets == {"": tuple(terms[:150]), "medical": tuple(terms[150:200])}
    assert loaded.problems == ("vocabulary: more than 200 entries; kept the first 200, dropped "
                               "'Term200', 'Term201', 'Term202'",)
    assert set_aside(loaded, path) is not None
    assert (tmp_path / "settings.toml.bad").read_text(encoding="utf-8") == original
    assert read_settings(path).problems == ()  # the 200 kept are saved; said once


# -- captions: an app that is not playing, "both" without a microphone ----------------------------


class Looping:
    """An app playing ``wav`` on ``sink`` again and again until closed (paplay named ``app``)."""

    def __init__(self, wav: Path, sink: str, app: str, env: dict[str, str] | None = None) -> None:
        self._args = ["paplay", f"--device={sink}", f"--client-name={app}", str(wav)]
        self._env = env
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._done.is_set():
            subprocess.run(self._args, env=self._env, timeout=120, check=False)

    def close(self) -> None:
        self._done.set()
        self._thread.join(130)


@pytest.mark.model
@pytest.mark.e2e
def test_an_app_that_is_not_playing_is_named_once_with_those_that_are(
        sinks: Sinks, shared_audio: Path, tmp_path: Path,  # noqa: F811 - the fixture
) -> None:
    speakers = sinks.add("speakers")
    subprocess.run(["pactl", "set-default-sink", speakers], check=True, timeout=10)
    wanted, other = f"typoapp{os.getpid()}", f"otherapp{os.getpid()}"
    child = Child("--source", f"app:{wanted}", data_dir=tmp_path)
    player = Looping(shared_audio / QUILTER, speakers, other)
    try:
        child.wait_for("err", "listening")
        hint = child.wait_for("err", f"no app named {wanted!r}")
    finally:
        player.close()
    assert hint.startswith(f"error: no app named {wanted!r} is playing sound (playing now: ")
    assert other in hint and hint.endswith("); still waiting for it"), hint
    player = Looping(shared_audio / JFK, speakers, wanted)  # ... and it still waits for it
    try:
        child.wait_for("out", CAPTION)
    finally:
        player.close()
        child.proc.send_signal(signal.SIGINT)
    clean(child, 0)
    assert [line for line in child.lines["err"] if "no app named" in line] == [hint]  # once
    assert reads_jfk(" ".join(caption_texts(tmp_path)))


@pytest.fixture
def no_microphone() -> Iterator[dict[str, str]]:
    """A sound server of its own with one output and no microphone (its default input is the
    output's monitor); the environment that reaches it."""
    if pulse_missing():
        pytest.skip("needs PulseAudio")
    runtime = tempfile.mkdtemp(prefix="sv-pa-", dir="/tmp")  # a socket path is short
    env = dict(os.environ, XDG_RUNTIME_DIR=runtime)
    env.pop("PULSE_SERVER", None)
    env.pop("PULSE_SOURCE", None)
    server = subprocess.Popen(
        ["pulseaudio", "--daemonize=no", "--exit-idle-time=-1", "-n",
         "--load=module-native-protocol-unix",
         "--load=module-null-sink sink_name=speakers rate=16000 channels=1"],
        # (off the session bus, where the desktop's own server holds PulseAudio's name)
        env={k: v for k, v in env.items() if k != "DBUS_SESSION_BUS_ADDRESS"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):  # (the server's readiness, not an outcome)
            if subprocess.run(["pactl", "info"], env=env, capture_output=True,
                              timeout=10).returncode == 0:
                break
            if server.poll() is not None:
                pytest.fail("the private sound server did not start")
            time.sleep(0.1)
        sources = subprocess.run(["pactl", "list", "short", "sources"], env=env, text=True,
                                 capture_output=True, timeout=10, check=True).stdout
        assert sources.split()[1] == "speakers.monitor" and sources.count("\n") == 1, sources
        yield env
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(runtime, ignore_errors=True)


@pytest.mark.model
@pytest.mark.e2e
def test_both_without_a_microphone_says_so_and_captions_the_computer(
        no_microphone: dict[str, str], shared_audio: Path, tmp_path: Path) -> None:
    env = {k: no_microphone[k] for k in ("XDG_RUNTIME_DIR",)}
    child = Child("--source", "both", data_dir=tmp_path, **env)
    child.wait_for("err", "listening")
    assert child.lines["err"][0] == ("error: there is no microphone: only the computer's sound "
                                     "is captioned (as 'Them')"), child.lines
    player = Looping(shared_audio / JFK, "speakers", "paplay", env=no_microphone)
    try:
        line = child.wait_for("out", CAPTION)
    finally:
        player.close()
        child.proc.send_signal(signal.SIGINT)
    clean(child, 0)
    assert line.startswith("Them: ")
    assert all(line.startswith("Them: ") for line in child.lines["out"])
    assert reads_jfk(" ".join(caption_texts(tmp_path)))


# -- the same signals, two at once (a Ctrl+C to `timeout` and its child), and the app -----------

def two_signals_at_once(proc: subprocess.Popen[str], first: int, second: int) -> set[int]:
    """``first`` then ``second`` delivered together: the process is held stopped while both are
    sent (two of one kind would merge into one), so the second lands while the first is
    being handled, whatever the machine's load. The exit statuses it may end with: 128 + the
    signal handled last, and two threads may take the two at once, so either may be last
    (SIGINT came last under load once: 130, not 143)."""
    proc.send_signal(signal.SIGSTOP)
    proc.send_signal(first)
    proc.send_signal(second)
    proc.send_signal(signal.SIGCONT)
    return {128 + first, 128 + second}


@pytest.mark.model
def test_listen_given_two_signals_at_once_stops_at_once_and_keeps_what_was_heard(
        shared_audio: Path, tmp_path: Path) -> None:
    child = Child("--input", str(long_speech(shared_audio, tmp_path)), data_dir=tmp_path)
    child.wait_for("out", "ms after speech end")  # a first final is in
    clean(child, two_signals_at_once(child.proc, signal.SIGINT, signal.SIGTERM))
    assert "stopping now; what was heard is kept" in child.err
    heard = [line.split("] ", 1)[1].split("   (")[0] for line in child.lines["out"]]
    assert session_texts(tmp_path) == heard and heard, child.lines


def app_process(data_dir: Path, wav: Path) -> object:
    from support.desktop_driver import start_app

    env = dict(os.environ, SOTTOVOCE_CONTROL_SOCKET=str(data_dir / "control.sock"),
               SOTTOVOCE_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
    return start_app(env, "--input", str(wav))


@pytest.mark.model
@pytest.mark.e2e
@pytest.mark.parametrize(("signals", "code"), [
    ((signal.SIGHUP,), 0),
    ((signal.SIGINT, signal.SIGTERM), None),  # (128 + the one handled last)
])
def test_the_app_quits_on_signals_and_keeps_what_was_heard(
        shared_audio: Path, tmp_path: Path, signals: tuple[int, ...], code: int | None) -> None:
    if not os.environ.get("DISPLAY"):
        pytest.skip("needs an X display (source .ci/desktop.sh)")
    app = app_process(tmp_path, shared_audio / JFK)
    try:
        final = app.wait_for("app.final_route: final 1", 240)  # type: ignore[attr-defined]
        proc = app.proc  # type: ignore[attr-defined]
        if len(signals) == 1:
            proc.send_signal(signals[0])
            codes: set[int | None] = {code}
        else:
            codes = {*two_signals_at_once(proc, *signals)}
        assert proc.wait(120) in codes, "\n".join(app.log)  # type: ignore[attr-defined]
    finally:
        app.stop()  # type: ignore[attr-defined]
    log = "\n".join(app.log)  # type: ignore[attr-defined]
    assert "Traceback" not in log and "terminate called" not in log, log
    assert "still busy" not in log, log  # the engines' threads ended before the app did
    first = final.split(": ", 2)[-1]
    assert any(first in text for text in session_texts(tmp_path)), (first, log)


def stop_after_a_caption(child: Child, player: Looping, signals: tuple[int, ...],
                       code: int) -> None:
    """Once a caption of JFK is printed, send ``signals`` and expect ``code`` (two signals: at
    once, and the status of whichever was handled last, `two_signals_at_once`);
    ``player`` (started once the child listens) is closed after."""
    try:
        child.wait_for("out", CAPTION)
        if len(signals) == 1:
            child.proc.send_signal(signals[0])
            clean(child, code)
        else:
            clean(child, two_signals_at_once(child.proc, *signals))
    finally:
        player.close()


@pytest.mark.model
@pytest.mark.e2e
@pytest.mark.parametrize(("source", "signals", "code"), [
    ("system", (signal.SIGTERM,), 143),
    ("app:captionedapp", (signal.SIGHUP,), 129),
    ("both", (signal.SIGINT, signal.SIGTERM), 143),
])
def test_listen_to_what_the_computer_plays_stops_on_signals_and_keeps_what_was_heard(
        sinks: Sinks, shared_audio: Path, tmp_path: Path,  # noqa: F811 - the fixture
        source: str, signals: tuple[int, ...], code: int) -> None:
    speakers, mic = sinks.add("speakers"), sinks.add("mic")
    subprocess.run(["pactl", "set-default-sink", speakers], check=True, timeout=10)
    # (the microphone of "both"; set for the others too: their capture must not heed it)
    child = Child("--source", source, data_dir=tmp_path, PULSE_SOURCE=f"{mic}.monitor")
    child.wait_for("err", "listening")
    stop_after_a_caption(child, Looping(shared_audio / JFK, speakers, "captionedapp"), signals,
                       code)
    printed = [line.removeprefix("Them: ") for line in child.lines["out"]]
    saved = caption_texts(tmp_path)
    assert reads_jfk(" ".join(saved)), (saved, printed)
    assert " ".join(saved) in " ".join(printed), (saved, printed)  # what was shown is saved


@pytest.mark.model
@pytest.mark.e2e
@pytest.mark.parametrize(("args", "signals", "code"), [
    ((), (signal.SIGINT, signal.SIGTERM), 143),
    (("--source", "mic"), (signal.SIGINT,), 0),
])
def test_listen_to_a_real_microphone_stops_on_signals_and_keeps_what_was_heard(
        sinks: Sinks, shared_audio: Path, tmp_path: Path,  # noqa: F811 - the fixture
        args: tuple[str, ...], signals: tuple[int, ...], code: int) -> None:
    mic = sinks.add("mic")  # PortAudio records its monitor: the microphone hears what plays
    child = Child(*args, data_dir=tmp_path, PULSE_SOURCE=f"{mic}.monitor")
    child.wait_for("err", "listening")
    stop_after_a_caption(child, Looping(shared_audio / JFK, mic, "speaker"), signals, code)
    printed = " ".join(child.lines["out"])
    saved = session_texts(tmp_path)
    assert reads_jfk(" ".join(saved)), (saved, printed)
    assert all(text in printed for text in saved), (saved, printed)  # what was shown is saved
