"""What a cluster run has to do: the input files, their output paths, which are already done.

No Ray here: the listing and the resume rule are plain functions (tested without a cluster).
Outputs are only ever written atomically (`engine.atomic`), so an output that exists is
complete: a rerun skips exactly the inputs whose output exists. Which output is whose is kept in
the output folder (`engine.outputs.Manifest`), so an input added later, even one that sorts
first or shares a stem (``talk.flac`` beside ``talk.wav``), never takes an earlier input's
output.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from engine.outputs import Manifest

# Audio and video containers PyAV reads; a directory's other files (notes, images) are ignored.
MEDIA_SUFFIXES = frozenset({
    ".wav", ".flac", ".mp3", ".m4a", ".aac", ".ogg", ".oga", ".opus", ".wma", ".aif", ".aiff",
    ".mp4", ".m4v", ".mkv", ".mka", ".webm", ".mov", ".avi", ".3gp", ".amr",
})


@dataclass(frozen=True)
class ClusterInput:
    """One input file and where its output goes (``key`` names it in progress and summary)."""

    path: Path
    output: Path

    @property
    def key(self) -> str:
        return str(self.path)


def list_inputs(sources: Iterable[str | os.PathLike[str]], out_dir: Path, fmt: str,
                manifest: Manifest | None = None) -> list[ClusterInput]:
    """Every input file under ``sources`` (files as given; directories walked, sorted, media
    files only) with its output path: a directory's files keep their relative folders under
    ``out_dir``; a file given by name lands in ``out_dir``, as the local CLI writes it
    (``<stem>.<fmt>``; on a clash ``<name>.<fmt>``, then ``<stem>-2.<fmt>``...). ``manifest``:
    the output folder's (`Manifest.load`), which keeps an input's output from run to run and
    learns the new ones (save it before any work)."""
    manifest = manifest or Manifest(out_dir)
    roots = [Path(s) for s in sources]
    files = [(path, out_dir / path.relative_to(root).parent) for root in roots
             for path in (_walk(root) if root.is_dir() else [root])]
    used: set[Path] = set()
    return [ClusterInput(path, manifest.assign(folder, path, fmt, used))
            for path, folder in files]


def output_path(item: ClusterInput) -> Path:
    return item.output


def is_done(item: ClusterInput) -> bool:
    """Whether the input's output is there (written atomically: present means complete)."""
    return item.output.is_file()


def _walk(root: Path) -> list[Path]:
    paths: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        paths.extend(Path(folder) / f for f in files
                     if not f.startswith(".") and Path(f).suffix.lower() in MEDIA_SUFFIXES)
    return sorted(paths)


def probe_seconds(path: Path) -> float | None:
    """The audio duration from the container's header (no decoding), or None when unknown
    or unreadable (the file task then reports the error)."""
    try:
        import av

        with av.open(str(path)) as container:
            if container.duration is not None:
                return float(container.duration) / 1_000_000  # AV_TIME_BASE
            for stream in container.streams.audio:
                if stream.duration is not None and stream.time_base is not None:
                    return float(stream.duration * stream.time_base)
    except Exception:  # noqa: BLE001 - any failure means "unknown"; decoding reports it properly
        return None
    return None
