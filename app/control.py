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
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from app.control_client import (  # the client half, re-exported
    COMMANDS,
    MAX_LINE,
    ControlError,
    _check_peer,
    _is_live,
    check_private_dir,
    fallback_dir,
    peer_uid,
    send_command,
    socket_path,
)
from ui.qt_compat import emit

__all__ = ["COMMANDS", "ControlError", "ControlServer", "check_private_dir", "fallback_dir",
           "peer_uid", "send_command", "socket_path"]
log = logging.getLogger(__name__)

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


