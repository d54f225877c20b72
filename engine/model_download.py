"""Download a catalogue model from the Hugging Face hub, verified, resumable and cancellable.

Everything goes through ``huggingface_hub`` (the library faster-whisper uses), so ``HF_ENDPOINT``
(a mirror), ``HF_HUB_OFFLINE``, ``HF_TOKEN`` and the proxy variables apply as they do there:

1. the file list of the repository at a revision (``HfApi.model_info``:
   ``GET /api/models/{repo}/revision/{rev}``), filtered to what faster-whisper loads; every
   name is checked to stay inside the model's folder (`engine.model_guard`) before anything is
   asked or written;
2. per file, its metadata (``get_hf_file_metadata``: ``HEAD /{repo}/resolve/{commit}/{file}``),
   whose ETag is the hub's recorded hash: the sha256 of an LFS file (``X-Linked-Etag``), the git
   blob sha1 of a small one; and its size (``X-Linked-Size``);
3. the free disk space is checked for what is left to fetch, before any byte is written;
4. each file is fetched into ``<models>/.partial-<name>/<file>.part``, continuing a ``.part``
   left by an earlier, interrupted run with a Range request; the declared size is not trusted:
   a byte past it stops the download and deletes the ``.part``, and the free space is checked
   again before each block is written;
5. each finished file is hashed and compared with the recorded hash; a mismatch deletes it and
   fails the download (`ModelDownloadError`), so a corrupted model is never offered;
6. once every file is verified, a manifest is written and the folder is renamed into place
   (``<models>/<name>``) in one step: a model is either complete or absent.

Every wait on the hub is bounded (`HUB_TIMEOUT_S`, for an answer or for the next bytes), and
the error says what was waited for. One download of a model runs at a time, across processes
(a lock in the cache). Cancelling (`threading.Event`) deletes the partial folder: nothing
half-downloaded is left.
Any other failure (network, server, disk) keeps it, and the next `download` resumes it.
Progress is reported through a callback, from the downloading thread.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from engine.model_catalog import MODEL_FILE_PATTERNS, catalogue_entry, directory_size
from engine.model_fetch import (
    DISK_MARGIN,
    Oversized,
    RemoteFile,
    endpoint,
    fetch_file,
    hub_message,
    network_message,
)

# The callers' names for what now lives in engine.model_fetch.
from engine.model_fetch import DownloadCancelled as DownloadCancelled
from engine.model_fetch import ModelDownloadError as ModelDownloadError
from engine.model_fetch import format_bytes as format_bytes
from engine.model_guard import (
    PART_SUFFIX,
    ModelBusy,
    ModelLock,
    cached_model_name,
    hub_file_path,
    hub_file_problem,
    layout_problem,
)
from engine.models import BUNDLED_MODELS as BUNDLED
from engine.models import DOWNLOAD_MANIFEST as MANIFEST
from engine.models import downloaded_path, models_dir

log = logging.getLogger(__name__)

HUB_TIMEOUT_S = 30.0  # the longest wait for an answer, or for the next bytes, from the hub


@dataclass(frozen=True)
class Progress:
    """Where a download stands: bytes of all its files, the recent rate and the time left."""

    name: str
    file: str
    done: int
    total: int
    rate: float  # bytes per second over the last few seconds
    resumed_from: int = 0  # bytes already there from an earlier, interrupted run

    @property
    def eta_s(self) -> float | None:
        return (self.total - self.done) / self.rate if self.rate > 0 else None

    def describe(self) -> str:
        eta = self.eta_s
        left = f", {format_duration(eta)} left" if eta is not None else ""
        return (f"{format_bytes(self.done)} of {format_bytes(self.total)} "
                f"({format_bytes(int(self.rate))}/s{left})")


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


class _Rate:
    """Bytes per second over a sliding window of recent samples."""

    def __init__(self, window_s: float = 3.0) -> None:
        self._window_s = window_s
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, done: int, now: float) -> float:
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[0][0] > self._window_s:
            self._samples.popleft()
        first_at, first_done = self._samples[0]
        return (done - first_done) / (now - first_at) if now > first_at else 0.0


ProgressCallback = Callable[[Progress], None]


def partial_dir(name: str) -> Path:
    return models_dir() / f".partial-{name}"


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def remote_files(name: str, repo: str, revision: str = "main",
                 timeout: float = HUB_TIMEOUT_S) -> tuple[str, list[RemoteFile]]:
    """The commit and the model files of ``repo`` at ``revision``, with sizes and hashes; a
    file name that could not be saved inside the model's folder fails before any other call."""
    from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url

    hub = endpoint()
    what = f"the file list of {name}"
    try:
        info = HfApi(endpoint=hub).model_info(repo, revision=revision, timeout=timeout)
        listed = [s.rfilename for s in info.siblings or ()]
    except Exception as exc:  # noqa: BLE001 - huggingface_hub/httpx raise many kinds
        raise ModelDownloadError(hub_message(name, what, exc, timeout)) from exc
    commit = info.sha if isinstance(info.sha, str) and info.sha else revision
    names = [n for n in listed if isinstance(n, str)
             and any(fnmatch(n, p) for p in MODEL_FILE_PATTERNS)]
    for file in names:
        problem = hub_file_problem(file)
        if problem is not None:
            raise ModelDownloadError(_refused(name, file, problem))
    clash = layout_problem(names)
    if clash is not None:
        raise ModelDownloadError(_refused(name, *clash))
    if "model.bin" not in names:
        raise ModelDownloadError(f"{repo} has no model.bin: not a CTranslate2 Whisper model")
    files = []
    for file in names:
        url = hf_hub_url(repo, file, revision=commit, endpoint=hub)
        try:
            meta = get_hf_file_metadata(url, timeout=timeout)
        except Exception as exc:  # noqa: BLE001
            raise ModelDownloadError(hub_message(name, f"about {file} of {name}", exc,
                                                  timeout)) from exc
        if meta.etag is None or meta.size is None:
            raise ModelDownloadError(f"the hub gave no hash or size for {repo}/{file} (a proxy "
                                     "or captive portal answering in its place?)")
        if meta.size < 0:
            raise ModelDownloadError(f"the hub gave an impossible size for {repo}/{file}")
        files.append(RemoteFile(file, meta.size, meta.etag, meta.location))
    return commit, files


def _refused(name: str, file: str, problem: str) -> str:
    return (f"{name}: the hub lists a file Sottovoce refuses to save, {file!r}: {problem}. "
            "Nothing was downloaded; the hub or mirror (HF_ENDPOINT) is wrong or hostile")


def file_hash(path: Path, etag: str) -> str:
    """The hash of ``path`` the way the hub records it: sha256 for a 64-digit etag, else the
    git blob sha1 (``sha1(b"blob <size>\\0" + content)``)."""
    if len(etag) == 64:
        digest = hashlib.sha256()
    else:
        digest = hashlib.sha1()  # noqa: S324 - git's object id, not a security hash
        digest.update(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as f:
        while block := f.read(8 << 20):
            digest.update(block)
    return digest.hexdigest()


def download(name: str, *, progress: ProgressCallback | None = None,
             cancel: threading.Event | None = None, revision: str = "main",
             timeout_s: float | None = None) -> Path:
    """Download catalogue model ``name`` and return its folder (see the module docstring)."""
    entry = catalogue_entry(name)
    if entry is None:
        raise ModelDownloadError(f"unknown model {name!r}; `sottovoce models list` shows them")
    done_path = downloaded_path(name)
    if done_path is not None:
        return done_path
    if _offline():
        raise ModelDownloadError(
            f"cannot download {name}: offline mode is on (HF_HUB_OFFLINE); unset it, or use a "
            f"bundled model ({', '.join(BUNDLED)}) or a model folder")
    timeout = HUB_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        with ModelLock(models_dir(), name):
            return _download_locked(name, entry.repo, revision, timeout, progress,
                                    cancel or threading.Event())
    except ModelBusy as exc:
        raise ModelDownloadError(str(exc)) from None
    except OSError as exc:  # the lock's folder: a read-only or full cache
        raise ModelDownloadError(f"could not save {name}: {exc.strerror or exc}") from exc


def _download_locked(name: str, repo: str, revision: str, timeout: float,
                     progress: ProgressCallback | None, cancel: threading.Event) -> Path:
    done_path = downloaded_path(name)  # another process may have finished it meanwhile
    if done_path is not None:
        return done_path
    commit, files = remote_files(name, repo, revision, timeout)
    staging = partial_dir(name)
    target = models_dir() / name
    try:
        if staging.is_symlink() or target.is_symlink():
            raise ModelDownloadError(f"{name}: a symbolic link is in the way in {models_dir()}; "
                                     "nothing was downloaded")
        staging.mkdir(parents=True, exist_ok=True)
        _fetch_all(name, files, staging, progress, cancel, timeout)
        (staging / MANIFEST).write_text(json.dumps({
            "name": name, "repo": repo, "revision": commit,
            "files": {f.path: {"size": f.size, "hash": f.etag} for f in files}}, indent=1))
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    except DownloadCancelled as exc:
        shutil.rmtree(staging, ignore_errors=True)
        log.info("download of %s cancelled; partial files removed", name)
        raise DownloadCancelled(f"download of {name} cancelled; nothing of it was kept") from exc
    except ModelDownloadError:
        raise
    except Exception as exc:  # noqa: BLE001 - network errors keep the partial files
        if isinstance(exc, OSError) and exc.errno is not None:  # the disk, not the network
            raise ModelDownloadError(f"could not save {name}: {exc.strerror or exc}") from exc
        raise ModelDownloadError(network_message(name, exc) +
                                 "; what was downloaded is kept, and the next try resumes") from exc
    log.info("downloaded %s (%s) at %s", name, repo, commit)
    return target


def _fetch_all(name: str, files: list[RemoteFile], staging: Path,
               progress: ProgressCallback | None, cancel: threading.Event,
               timeout: float) -> None:
    paths = {}
    for f in files:
        try:
            paths[f.path] = hub_file_path(staging, f.path)
        except ValueError as exc:
            raise ModelDownloadError(_refused(name, f.path, str(exc))) from None
    parts = {f.path: paths[f.path].with_name(paths[f.path].name + PART_SUFFIX) for f in files}
    verified = {f.path for f in files if paths[f.path].is_file()
                and paths[f.path].stat().st_size == f.size}
    have = {f.path: (f.size if f.path in verified else
                     min(parts[f.path].stat().st_size, f.size) if parts[f.path].is_file() else 0)
            for f in files}
    total = sum(f.size for f in files)
    resumed = sum(have.values())
    needed = total - resumed
    free = shutil.disk_usage(staging).free
    if needed + DISK_MARGIN > free:
        raise ModelDownloadError(
            f"not enough disk space for {name}: it needs {format_bytes(needed)} more, "
            f"{format_bytes(free)} is free in {staging.parent}")
    rate = _Rate()
    done = [resumed]
    current = [""]

    def on_bytes(count: int) -> None:
        done[0] += count
        if progress is not None:
            progress(Progress(name, current[0], done[0], total,
                              rate.add(done[0], time.monotonic()), resumed))

    on_bytes(0)
    for f in files:
        if cancel.is_set():
            raise DownloadCancelled("download cancelled")
        if f.path in verified:
            continue
        current[0] = f.path
        part = parts[f.path]
        part.parent.mkdir(parents=True, exist_ok=True)
        try:
            fetch_file(name, f, part, have[f.path], on_bytes, cancel, timeout)
        except Oversized:
            part.unlink(missing_ok=True)
            raise
        actual = file_hash(part, f.etag)
        if actual != f.etag:
            part.unlink(missing_ok=True)
            raise ModelDownloadError(
                f"{name}: {f.path} does not match the hash the hub records for it "
                f"(expected {f.etag[:12]}…, got {actual[:12]}…); it was deleted, and the model "
                "is not offered. Try again; if it keeps failing, the mirror or proxy alters it")
        os.replace(part, paths[f.path])


def remove(name: str) -> int:
    """Delete a downloaded model (and any partial download of it); returns the bytes freed.

    Only a folder inside the cache that the catalogue or a download's record names is deleted;
    anything else (a path, an empty name, ``..``) is refused and nothing is touched."""
    models = models_dir()
    try:
        folder = cached_model_name(models, name, catalogue_entry(name) is not None)
    except ValueError as exc:
        raise ModelDownloadError(
            f"cannot remove {name!r}: {exc}. `sottovoce models remove` deletes only models "
            f"downloaded into {models} (see `sottovoce models list`); nothing was deleted"
        ) from None
    partial = partial_dir(name)
    found = [p for p in (folder, partial) if p.is_dir() and not p.is_symlink()]
    if not found and name in BUNDLED:
        raise ModelDownloadError(f"{name} is bundled with Sottovoce and cannot be removed")
    if not found:
        raise ModelDownloadError(f"{name} is not downloaded")
    freed = 0
    try:
        with ModelLock(models, name):
            for path in found:
                size = directory_size(path)
                shutil.rmtree(path)
                freed += size
    except ModelBusy as exc:
        raise ModelDownloadError(f"cannot remove {name}: it is being downloaded {exc.who}; "
                                 "nothing was deleted") from None
    except OSError as exc:
        raise ModelDownloadError(f"could not remove {name}: {exc.strerror or exc}") from exc
    return freed
