"""Where transcripts go (``sottovoce transcribe -o DIR``, local and ``--cluster``).

Three promises, whoever names the inputs:

- an output path is never an input path (``transcribe clip.txt -o .`` once overwrote the audio
  in ``clip.txt`` with its own transcript);
- a name fits the file system (at most `NAME_MAX` bytes: a longer one is cut and made unique
  with a hash of the full name);
- the output folder is checked before any work (`check_folder`), so an unwritable folder costs
  nothing but a clear error.

Names, in order of preference (`output_path`): ``<stem>.<fmt>``, then ``<full name>.<fmt>``
(``talk.wav`` and ``talk.flac`` both in a run: ``talk.txt`` and ``talk.flac.txt``), then
``<stem>-2.<fmt>``, ``-3``...

A cluster run skips inputs whose output exists, so a rerun must map every input to the same
output it had before, whatever was added since: the folder keeps the mapping in `Manifest`
(``sottovoce-outputs.json``: output path -> input path), written before any work. An input the
manifest does not know never takes a name it lists, nor a file already in the folder, so a
rerun can never report one file's transcript as another's.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from engine.atomic import OutputWriteError, atomic_write_text
from engine.errors import EngineError

NAME_MAX = 255  # bytes in one file name on Linux, macOS and Windows file systems
MANIFEST_NAME = "sottovoce-outputs.json"
MANIFEST_VERSION = 1


def fit_name(name: str, limit: int = NAME_MAX) -> str:
    """``name`` when it fits in ``limit`` bytes, else its stem cut (on a character boundary)
    and followed by ``~`` and 8 hex digits of a hash of the whole name, suffix kept."""
    if len(_bytes(name)) <= limit:
        return name
    stem, dot, suffix = name.rpartition(".")
    if not dot or len(_bytes(suffix)) > 16:
        stem, suffix = name, ""
    tail = f"~{hashlib.sha256(_bytes(name)).hexdigest()[:8]}" + (f".{suffix}" if suffix else "")
    room = limit - len(_bytes(tail))
    return _bytes(stem)[:room].decode("utf-8", "ignore") + tail


def _bytes(name: str) -> bytes:
    """A file name's bytes (a name that is not UTF-8 holds surrogate escapes)."""
    return name.encode("utf-8", "surrogateescape")


def _names(source: Path, fmt: str) -> Iterator[str]:
    yield f"{source.stem}.{fmt}"
    yield f"{source.name}.{fmt}"
    n = 2
    while True:
        yield f"{source.stem}-{n}.{fmt}"
        n += 1


def output_path(folder: Path, source: Path, fmt: str, taken: Callable[[Path], bool]) -> Path:
    """The first name (module docstring) in ``folder`` for ``source`` that is not ``taken``
    and is not ``source`` itself."""
    own = _resolved(source)
    for name in _names(source, fmt):
        path = folder / fit_name(name)
        if _resolved(path) != own and not taken(path):
            return path
    raise AssertionError("unreachable: the names never end")


def check_folder(folder: Path) -> None:
    """Create ``folder`` if needed and make sure a file can be written in it; raises
    OutputWriteError saying why not (before any work, so none is lost)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".sottovoce-check-"):
            pass
    except OSError as exc:
        raise OutputWriteError(f"cannot write to the output folder {folder} "
                               f"({exc.strerror or exc}); nothing was transcribed") from exc


def _resolved(path: Path) -> Path:
    return Path(os.path.abspath(path)).resolve()


class Manifest:
    """The output folder's mapping of outputs to inputs (module docstring). Paths are kept
    absolute for inputs and relative to the folder for outputs."""

    def __init__(self, folder: Path, entries: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.path = folder / MANIFEST_NAME
        self.entries: dict[str, str] = dict(entries or {})  # output (relative) -> input

    @classmethod
    def load(cls, folder: Path) -> Manifest:
        """The folder's manifest (empty when there is none); EngineError when it cannot be
        read or is not one: it is never overwritten or guessed at."""
        path = folder / MANIFEST_NAME
        if not path.exists():
            return cls(folder)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            raise EngineError(f"{path}: cannot read the output manifest ({exc}); move it away "
                              "to start afresh (outputs already there are then redone under "
                              "new names)") from exc
        return cls(folder, _entries(doc, path))

    def assign(self, folder: Path, source: Path, fmt: str, taken: set[Path]) -> Path:
        """``source``'s output in ``folder`` (under this manifest's folder): the one the
        manifest already lists for it, else a new name that is listed for no other input,
        is not a file already there (an input, an output of something else...) and is not in
        ``taken`` (this run's)."""
        wanted = str(_resolved(source))
        for rel, origin in self.entries.items():
            path = self.folder / rel
            if origin == wanted and path.parent == folder and path.suffix == f".{fmt}":
                taken.add(path)
                return path
        path = output_path(folder, source, fmt, lambda p: p in taken or p.exists()
                           or self._rel(p) in self.entries)
        taken.add(path)
        self.entries[self._rel(path)] = wanted
        return path

    def save(self) -> None:
        """Write it (atomically); OutputWriteError when the folder cannot be written."""
        doc = {"version": MANIFEST_VERSION, "outputs": dict(sorted(self.entries.items()))}
        atomic_write_text(self.path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.folder).as_posix()


def _entries(doc: Any, path: Path) -> dict[str, str]:
    outputs = doc.get("outputs") if isinstance(doc, dict) else None
    if (not isinstance(doc, dict) or doc.get("version") != MANIFEST_VERSION
            or not isinstance(outputs, dict)
            or not all(isinstance(k, str) and isinstance(v, str) and _inside(k)
                       for k, v in outputs.items())):
        raise EngineError(f"{path}: not a Sottovoce output manifest (version "
                          f"{MANIFEST_VERSION}); move it away to start afresh")
    return dict(outputs)


def _inside(rel: str) -> bool:
    """A relative path that stays inside the folder (a manifest never points elsewhere)."""
    parts = Path(rel).parts
    return bool(parts) and not Path(rel).is_absolute() and ".." not in parts
