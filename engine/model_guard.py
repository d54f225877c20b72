"""What the model manager may write and delete, and one download of a model at a time.

A hub or mirror (``HF_ENDPOINT``) names the files of a model; those names are checked before
anything is written: each one must resolve inside the model's folder, with no ``..``, absolute
path, backslash, drive, empty component or symbolic link on the way (`hub_file_path`).
`remove` deletes only folders inside the cache that the catalogue or the cache's own download
record names (`cached_model_name`). A file lock per model in the cache (`ModelLock`) keeps two
downloads, or a download and a removal, of one model from running at once, across processes;
the holder's pid is written beside it so the other one can say who holds it.
"""

from __future__ import annotations

import os
from pathlib import Path

from engine.errors import EngineError
from engine.models import DOWNLOAD_MANIFEST as MANIFEST

PART_SUFFIX = ".part"
PARTIAL_PREFIX = ".partial-"
LOCKS = ".locks"
# A filesystem's limit on one name is 255 bytes; ".part" is added while a file arrives.
_MAX_COMPONENT_BYTES = 255 - len(PART_SUFFIX)
# Names Windows gives to devices whatever the folder: a file can never be saved under them.
_WINDOWS_DEVICES = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"]
    + [f"{kind}{n}" for kind in ("COM", "LPT") for n in "0123456789¹²³"])


class ModelBusy(EngineError):
    """Another download (or removal) of the model holds its lock."""

    def __init__(self, name: str, pid: int | None) -> None:
        self.name = name
        self.pid = pid
        super().__init__(f"{name} is already being downloaded {self.who}; wait for it to finish, "
                         "or stop it, and try again")

    @property
    def who(self) -> str:
        if self.pid == os.getpid():
            return "by this process"
        return "by another process" + (f" (pid {self.pid})" if self.pid is not None else "")


def name_problem(name: object) -> str | None:
    """Why ``name``, a path relative to a model folder with ``/`` between folders, cannot be
    saved there on any system, or None when it can."""
    if not isinstance(name, str) or not name:
        return "the name is empty"
    if "\\" in name or ":" in name:
        return "the name holds a backslash or a colon (a Windows path or drive)"
    if name.startswith("/"):
        return "the name is an absolute path"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "the name holds a control character"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "the name is not valid text"
    for part in name.split("/"):
        if part in ("", ".", ".."):
            return "the name has an empty, '.' or '..' component"
        if len(part.encode("utf-8")) > _MAX_COMPONENT_BYTES:
            return "a component of the name is too long for a file system"
        if part.endswith((".", " ")) or part.split(".")[0].upper() in _WINDOWS_DEVICES:
            return "a component of the name is not allowed on Windows"
    return None


def hub_file_problem(name: object) -> str | None:
    """`name_problem`, plus the names the downloader keeps for itself."""
    problem = name_problem(name)
    if problem is None and isinstance(name, str) and (
            name.endswith(PART_SUFFIX) or name.split("/")[0] == MANIFEST):
        problem = "the name is one Sottovoce uses for its own files"
    return problem


def inside(root: Path, relative: str) -> Path:
    """``root / relative`` once it is known to stay inside ``root``: no symbolic link on the way
    (an existing one, whatever it points at) and a resolved path under the resolved ``root``.
    Raises ValueError with the reason."""
    problem = name_problem(relative)
    if problem is not None:
        raise ValueError(problem)
    path = root
    for part in relative.split("/"):
        path = path / part
        if path.is_symlink():
            raise ValueError(f"a symbolic link is in the way ({path.name})")
    base = root.resolve()
    if not path.resolve().is_relative_to(base) or path.resolve() == base:
        raise ValueError("the name resolves outside the model folder")
    return path


def hub_file_path(root: Path, name: object) -> Path:
    """Where a file the hub lists is saved under ``root``; ValueError when it must not be."""
    problem = hub_file_problem(name)
    if problem is not None:
        raise ValueError(problem)
    assert isinstance(name, str)  # hub_file_problem refuses anything else
    path = inside(root, name)
    inside(root, name + PART_SUFFIX)
    return path


def layout_problem(names: list[str]) -> tuple[str, str] | None:
    """(name, reason) for a name that clashes with another one of the same model: listed twice,
    or both a file and a folder of others."""
    seen: set[str] = set()
    folders: set[str] = set()
    for name in names:
        parts = name.split("/")
        folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
        if name in seen:
            return name, "it is listed twice"
        seen.add(name)
    clash = sorted(seen & folders)
    return (clash[0], "it is both a file and a folder") if clash else None


def cached_model_name(models: Path, name: str, catalogue: bool) -> Path:
    """The folder of model ``name`` in the cache ``models``, for `remove`: ``name`` must be a
    plain name (no path), of the catalogue or recorded by a download's manifest, and its folder
    no symbolic link. Raises ValueError with the reason; the folder may not exist."""
    problem = name_problem(name)
    if problem is not None or "/" in name or name.startswith("."):
        raise ValueError(f"{name!r} is not a model name")
    folder = models / name
    if folder.is_symlink():
        raise ValueError(f"{folder} is a link, not a download")
    if not catalogue and not _recorded(folder, name):
        raise ValueError(f"{name!r} is not a model Sottovoce downloaded")
    if folder.exists() and folder.resolve().parent != models.resolve():
        raise ValueError(f"{folder} is not inside {models}")
    return folder


def _recorded(folder: Path, name: str) -> bool:
    import json

    try:
        record = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("name") == name


class ModelLock:
    """Held while a model is downloaded or removed; `ModelBusy` when another holder has it."""

    def __init__(self, models: Path, name: str) -> None:
        from filelock import FileLock

        self._name = name
        self._folder = models / LOCKS
        self._pid_file = self._folder / f"{name}.pid"
        self._lock = FileLock(self._folder / f"{name}.lock")

    def __enter__(self) -> ModelLock:
        from filelock import Timeout

        self._folder.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            raise ModelBusy(self._name, self._holder()) from None
        self._pid_file.write_text(str(os.getpid()))
        return self

    def __exit__(self, *exc: object) -> None:
        self._pid_file.unlink(missing_ok=True)
        self._lock.release()

    def _holder(self) -> int | None:
        try:
            return int(self._pid_file.read_text().strip())
        except (OSError, ValueError):
            return None  # the holder has not written it yet, or has just finished
