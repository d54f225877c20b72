"""Remote control of the running app over a local socket, for desktops without global hotkeys
(Wayland): the desktop's shortcut settings bind `sottovoce toggle` or `sottovoce ptt press` /
`sottovoce ptt release`, which send one line here.

Protocol: the client connects, sends one command line ("toggle", "ptt press", "ptt release",
"status", "copy"), reads one reply line ("ok ..." or "error ..."), and closes. The socket is a
Unix domain socket in the user's runtime dir (owner-only), so only this user can drive the app.
The server side is a QLocalServer on the GUI thread: no extra thread, no polling.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from ui.qt_compat import emit

log = logging.getLogger(__name__)

COMMANDS = ("toggle", "ptt press", "ptt release", "status", "copy")
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
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"sottovoce-{uid}" / "control.sock"


def send_command(command: str, path: Path | None = None) -> str:
    """Client side: send one command to the running app and return its reply line."""
    if command not in COMMANDS:
        raise ControlError(f"unknown command {command!r}")
    if not hasattr(socket, "AF_UNIX"):
        raise ControlError("the control socket needs Unix domain sockets (use the hotkey here)")
    path = path or socket_path()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(CLIENT_TIMEOUT_S)
        try:
            sock.connect(str(path))
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
