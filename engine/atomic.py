"""Atomic file writes: a reader sees the old file or the complete new one, never a torn write.

The data goes to a temporary file in the target's own folder (``os.replace`` is only atomic
within one file system), is flushed and fsynced, then renamed over the target. When anything
fails (disk full, permission, quota) the temporary file is removed and the target is untouched.

Private files (the journal's transcripts, settings) are written through here too: `private=True`
gives the file mode 0600 whatever the umask, and `private_dir` makes their folder 0700, so other
users of the computer cannot read what was dictated.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
from pathlib import Path

from engine.errors import EngineError

log = logging.getLogger(__name__)

# Errors that mean "no room": worth a clearer message than the bare strerror.
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


class OutputWriteError(EngineError):
    """An output file could not be written; the target was left as it was."""


# A file name is at most 255 bytes: the temporary name (".", the target's name, ".", 8 hex
# digits, ".tmp") keeps at most this much of the target's name.
TMP_NAME_BYTES = 255 - 14
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *,
                       private: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically and durably; returns the path written.

    A new file gets the usual permissions (0666 less the umask), an existing one keeps its mode;
    ``private`` makes it 0600 either way. Raises OutputWriteError naming the file when it cannot
    be written.
    """
    target = Path(path)
    folder = target.parent
    tmp = folder / f".{_cut(target.name, TMP_NAME_BYTES)}.{secrets.token_hex(4)}.tmp"
    mode = PRIVATE_FILE if private else _mode_for(target)
    try:
        # O_EXCL: never follow or reuse a file someone else created under our temp name.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                     mode)
    except OSError as exc:
        raise _write_error(target, exc) from exc
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if mode != 0o666:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:  # Ctrl-C included: never leave the temporary file behind
        _remove_quietly(tmp)
        if isinstance(exc, OSError):
            raise _write_error(target, exc) from exc
        raise
    _fsync_folder(folder)
    log.debug("wrote %s (%d bytes)", target, len(data))
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8", *,
                      private: bool = False) -> Path:
    """`atomic_write_bytes` for text; newlines are written as given (no platform translation)."""
    return atomic_write_bytes(path, text.encode(encoding), private=private)


def private_dir(folder: Path) -> Path:
    """Create ``folder`` (and missing parents) as 0700; tighten an existing one we own.

    Raises OSError when it cannot be created.
    """
    folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    _restrict(folder, PRIVATE_DIR)
    return folder


def open_private_append(path: Path) -> int:
    """Open ``path`` for appending as a 0600 file (an older, wider file is tightened).

    Returns the raw descriptor; raises OSError.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0),
                 PRIVATE_FILE)
    _restrict(path, PRIVATE_FILE)
    return fd


def _restrict(path: Path, mode: int) -> None:
    """chmod to ``mode`` when group/other bits are set; best effort (a file system without
    Unix permissions, a path owned by someone else)."""
    try:
        if path.stat().st_mode & 0o077:
            os.chmod(path, mode)
    except OSError as exc:
        log.warning("could not make %s private: %s", path, exc)


def _cut(name: str, limit: int) -> str:
    """``name`` cut to ``limit`` bytes of UTF-8, on a character boundary."""
    return name.encode("utf-8", "surrogateescape")[:limit].decode("utf-8", "ignore")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _mode_for(target: Path) -> int:
    """Keep an existing file's permission bits; 0666 (the umask applies) for a new one."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        return 0o666


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable. Best effort: some platforms cannot open a folder."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        log.warning("could not remove temporary file %s", path)


def _write_error(target: Path, exc: OSError) -> OutputWriteError:
    if exc.errno in _NO_SPACE:
        reason = f"no space left ({exc.strerror or exc})"
    else:
        reason = exc.strerror or str(exc)
    return OutputWriteError(f"{target}: could not write ({reason}); the file was not changed")
