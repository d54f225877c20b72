"""The client half of the control socket (app.control), standard library only: `sottovoce ptt
press|release` and `sottovoce toggle` run it in a new process each time a compositor binding
fires, so every import here delays the key release reaching the app (importing Qt and numpy
for it cost 0.5-0.9 s on a busy 2-core machine). See app.control for the protocol and the
checks on the socket's folder and peer.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import tempfile
from pathlib import Path

COMMANDS = ("toggle", "ptt press", "ptt release", "status", "copy", "paste-last", "edit press", "edit release",
            "captions older", "captions newer", "captions live")
CLIENT_TIMEOUT_S = 3.0
MAX_LINE = 256
MAX_REPLY = 4 * MAX_LINE  # an error reply echoes the command (repr'd): a little longer


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
    """The reply line: printable UTF-8 text starting "ok" or "error", ended by a newline
    within `MAX_REPLY` bytes. Anything else (a peer that is not the app, a reply cut short)
    raises ControlError instead of passing junk on as the app's answer."""
    data = b""
    while b"\n" not in data and len(data) < MAX_REPLY:
        chunk = sock.recv(MAX_REPLY)
        if not chunk:
            break
        data += chunk
    line, newline, _ = data.partition(b"\n")
    try:
        reply = line.decode("utf-8").strip()
    except UnicodeDecodeError:
        reply = ""
    if not newline or not reply.isprintable() or reply.split(" ", 1)[0] not in ("ok", "error"):
        raise ControlError(f"the program at the control socket sent no valid reply "
                           f"({len(data)} bytes{'' if newline else ', no end of line'}): is it "
                           "Sottovoce?")
    return reply


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
