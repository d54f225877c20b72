"""The control socket's fallback folder and peer checks (issue 15, item 4): without
XDG_RUNTIME_DIR the socket lives in a shared temp dir, where another user could create the
folder first and capture or answer `sottovoce ptt`/`toggle`."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX") or os.name != "posix",
                                reason="Unix domain sockets and permissions")


@pytest.fixture
def no_runtime_dir(tmp_path, monkeypatch):
    """socket_path() falls back to <temp>/sottovoce-<uid>, with <temp> a fresh folder."""
    monkeypatch.delenv("SOTTOVOCE_CONTROL_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    from app.control import fallback_dir, socket_path

    assert socket_path().parent == fallback_dir() == tmp_path / f"sottovoce-{os.getuid()}"
    return fallback_dir()


def test_fallback_folder_is_created_private_and_works(qtbot, no_runtime_dir):
    from app.control import ControlServer, send_command

    server = ControlServer(lambda command: f"ok {command}")
    path = server.start()
    assert path.parent == no_runtime_dir and (no_runtime_dir.stat().st_mode & 0o777) == 0o700
    replies: list[str] = []
    worker = threading.Thread(target=lambda: replies.append(send_command("status")))
    worker.start()
    qtbot.waitUntil(lambda: not worker.is_alive(), timeout=10000)
    assert replies == ["ok status"]
    server.stop()


def _make_hostile(folder: Path, how: str, tmp_path: Path) -> None:
    if how == "mode":
        folder.mkdir(mode=0o700)
        os.chmod(folder, 0o777)  # anyone may replace the socket in it
    elif how == "symlink":
        target = tmp_path / "elsewhere"
        target.mkdir(mode=0o700)
        folder.symlink_to(target)
    else:  # owner: another user made it first
        if os.getuid() != 0:
            pytest.skip("creating a folder owned by another user needs root")
        folder.mkdir(mode=0o700)
        os.chown(folder, 65534, 65534)


@pytest.mark.parametrize("how", ["mode", "symlink", "owner"])
def test_a_fallback_folder_others_control_is_refused_by_both_sides(qtbot, no_runtime_dir,
                                                                   tmp_path, how):
    from app.control import ControlError, ControlServer, send_command

    _make_hostile(no_runtime_dir, how, tmp_path)
    with pytest.raises(ControlError, match="refusing"):
        ControlServer(lambda command: "ok").start()
    with pytest.raises(ControlError, match="refusing"):
        send_command("toggle")  # the client does not hand its command to whoever is there


def test_peer_uid_is_read_from_the_socket():
    from app.control import peer_uid

    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        uid = peer_uid(left.fileno())
        if not hasattr(socket, "SO_PEERCRED"):
            assert uid is None
        else:
            assert uid == os.getuid()
        left.sendall(b"x")  # the descriptor is still usable (peer_uid worked on a copy)
        assert right.recv(1) == b"x"


@pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="SO_PEERCRED is Linux's")
def test_a_peer_running_as_another_user_is_refused(qtbot, tmp_path, monkeypatch):
    """Simulated by changing who "we" are: the server then sees a foreign uid on every client,
    and the client sees a foreign uid on the server."""
    from app import control, control_client

    handled: list[str] = []
    server = control.ControlServer(lambda command: handled.append(command) or "ok")
    path = server.start(tmp_path / "c.sock")
    monkeypatch.setattr(control_client, "_uid", lambda: os.getuid() + 1)
    with pytest.raises(control.ControlError, match="refusing the app running as user id"):
        control.send_command("toggle", path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:  # a client that skips checks
        raw.settimeout(5)
        raw.connect(str(path))
        raw.sendall(b"toggle\n")
        qtbot.wait(200)
        try:
            answer = raw.recv(100)
        except OSError:
            answer = b""
    assert answer == b"" and handled == []
    server.stop()


def test_the_control_commands_start_without_qt_or_numpy(tmp_path):
    """A compositor binding runs `sottovoce ptt release` as a new process on every key release:
    it must not load the app's heavy modules first (app.control_client, app.cli's fast path)."""
    import subprocess
    import sys

    probe = ("import sys; from app.cli import main; code = main(['ptt', 'release']); "
             "print(code, sorted(m for m in ('numpy', 'PySide6', 'engine.files') "
             "if m in sys.modules))")
    env = dict(os.environ, SOTTOVOCE_CONTROL_SOCKET=str(tmp_path / "none.sock"))
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.stdout.strip() == "1 []", done.stdout + done.stderr
    assert "Sottovoce is not running" in done.stderr
