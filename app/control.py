"""Remote control of the running app over a local socket, for desktops without global hotkeys
(Wayland): the desktop's shortcut settings bind `sottovoce toggle` or `sottovoce ptt press` /
`sottovoce ptt release`, which send one line here.

Protocol: the client connects, sends one command line ("toggle", "ptt press", "ptt release",
"status", "copy", "paste-last": insert the last dictated text again, "edit press" / "edit
release": a voice edit of the selection, app.voice_edit), reads one reply line
("ok ..." or "error ..."), and closes. The socket is a
Unix domain socket in the user's runtime dir (owner-only), so only this user can drive the app.
The server side is a QLocalServer on the GUI thread: no extra thread, no polling.

Without a runtime dir the socket lives in ``<temp>/sottovoce-<uid>``, a name anyone can create
first: both sides refuse that folder unless it is a real folder owned by this user with no
group/other access, or another user could capture and answer the commands. Each side also checks
the other's user id (SO_PEERCRED) where the OS offers it.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from ui.qt_compat import emit

log = logging.getLogger(__name__)

COMMANDS = ("toggle", "ptt press", "ptt release", "status", "copy", "paste-last",
            "edit press", "edit release")
CLIENT_TIMEOUT_S = 3.0
MAX_LINE = 256


class ControlError(RuntimeError):
    """The running app could not be reached or refused the command."""


def socket_path() -> Path:
    """SOTTOVOCE_CONTROL_SOCKET, else $XDG_RUNTIME_DIR/sottovoce-control.sock, else a per-user
    folder in the temp dir."""
    override = os.environ.get("SOTTOVOCE_CONTROL_SOCKET")
    if override:
        return Path(override)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "sottovoce-control.sock"
    return fallback_dir() / "control.sock"


def fallback_dir() -> Path:
    """The shared-temp-dir folder used without XDG_RUNTIME_DIR (checked by `check_private_dir`)."""
    return Path(tempfile.gettempdir()) / f"sottovoce-{_uid()}"


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def check_private_dir(folder: Path) -> None:
    """Raise ControlError unless ``folder`` is a real folder (no symlink) owned by this user that
    no one else can enter or write."""
    if not hasattr(os, "getuid"):
        return  # no Unix ownership to check (and no AF_UNIX control socket either)
    try:
        info = os.lstat(folder)
    except OSError as exc:
        raise ControlError(f"cannot check {folder}: {exc.strerror or exc}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise ControlError(f"refusing {folder}: not a folder (a link or file put there?)")
    if info.st_uid != _uid():
        raise ControlError(f"refusing {folder}: owned by user id {info.st_uid}, not by you; "
                           "another user may have created it (set XDG_RUNTIME_DIR)")
    if info.st_mode & 0o077:
        raise ControlError(f"refusing {folder}: mode {stat.S_IMODE(info.st_mode):o} lets other "
                           "users in (it must be 700)")


def peer_uid(fd: int) -> int | None:
    """The user id at the other end of a connected Unix socket, None where the OS cannot say."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None or fd < 0:
        return None
    with socket.socket(fileno=os.dup(fd)) as sock:
        try:
            creds = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
        except OSError:
            return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def send_command(command: str, path: Path | None = None) -> str:
    """Client side: send one command to the running app and return its reply line."""
    if command not in COMMANDS:
        raise ControlError(f"unknown command {command!r}")
    if not hasattr(socket, "AF_UNIX"):
        raise ControlError("the control socket needs Unix domain sockets (use the hotkey here)")
    path = path or socket_path()
    if path.parent == fallback_dir() and path.parent.exists():
        check_private_dir(path.parent)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(CLIENT_TIMEOUT_S)
        try:
            sock.connect(str(path))
            _check_peer(sock.fileno(), "the app")
            sock.sendall(command.encode() + b"\n")
            reply = _read_line(sock)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise ControlError(f"Sottovoce is not running (no app listening at {path})") from exc
        except OSError as exc:
            raise ControlError(f"could not talk to Sottovoce at {path}: {exc}") from exc
    if reply.startswith("error"):
        raise ControlError(reply.partition(" ")[2] or reply)
    return reply


def _read_line(sock: socket.socket) -> str:
    data = b""
    while b"\n" not in data and len(data) < MAX_LINE:
        chunk = sock.recv(MAX_LINE)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace").strip()


class ControlServer(QObject):
    """Accepts commands from `sottovoce toggle|ptt` and hands them to `handler`, which returns
    the reply text (it runs on the GUI thread)."""

    command_received = Signal(str)

    def __init__(self, handler: Callable[[str], str], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._handler = handler
        self._server = QLocalServer(self)
        self._server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self._server.newConnection.connect(self._on_new_connection)
        self.path: Path | None = None

    def start(self, path: Path | None = None) -> Path:
        path = path or socket_path()
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path.parent == fallback_dir():
            check_private_dir(path.parent)
        if path.exists() and _is_live(path):
            raise ControlError(f"another Sottovoce is already running ({path})")
        QLocalServer.removeServer(str(path))  # a stale socket left by a crash
        if not self._server.listen(str(path)):
            raise ControlError(f"cannot listen on {path}: {self._server.errorString()}")
        self.path = path
        log.info("control socket at %s", path)
        return path

    def stop(self) -> None:
        if self._server.isListening():
            self._server.close()
        self.path = None

    @Slot()
    def _on_new_connection(self) -> None:
        while self._server.hasPendingConnections():
            conn = self._server.nextPendingConnection()
            try:
                _check_peer(int(conn.socketDescriptor()), "a client")
            except ControlError as exc:
                log.warning("control socket: %s", exc)
                conn.abort()
                conn.deleteLater()
                continue
            conn.readyRead.connect(lambda c=conn: self._on_ready_read(c))
            conn.disconnected.connect(conn.deleteLater)

    def _on_ready_read(self, conn: QLocalSocket) -> None:
        if not conn.canReadLine():
            if conn.bytesAvailable() > MAX_LINE:
                conn.abort()
            return
        command = bytes(conn.readLine().data()).decode(errors="replace").strip()
        if command not in COMMANDS:
            reply = f"error unknown command {command!r}; expected one of: {', '.join(COMMANDS)}"
        else:
            emit(self.command_received, command)
            try:
                reply = self._handler(command)
            except Exception as exc:  # noqa: BLE001 - reply instead of dropping the client
                log.exception("control command %s failed", command)
                reply = f"error {exc}"
        conn.write(reply.encode() + b"\n")
        conn.flush()
        conn.disconnectFromServer()


def _check_peer(fd: int, who: str) -> None:
    uid = peer_uid(fd)
    if uid is not None and uid != _uid():
        raise ControlError(f"refusing {who} running as user id {uid} (you are {_uid()})")


def _is_live(path: Path) -> bool:
    """True when something accepts connections at the socket path."""
    if not hasattr(socket, "AF_UNIX"):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True
