"""Download a catalogue model from the Hugging Face hub, verified, resumable and cancellable.

Everything goes through ``huggingface_hub`` (the library faster-whisper uses), so ``HF_ENDPOINT``
(a mirror), ``HF_HUB_OFFLINE``, ``HF_TOKEN`` and the proxy variables apply as they do there:

1. the file list of the repository at a revision (``HfApi.model_info``:
   ``GET /api/models/{repo}/revision/{rev}``), filtered to what faster-whisper loads;
2. per file, its metadata (``get_hf_file_metadata``: ``HEAD /{repo}/resolve/{commit}/{file}``),
   whose ETag is the hub's recorded hash: the sha256 of an LFS file (``X-Linked-Etag``), the git
   blob sha1 of a small one; and its size (``X-Linked-Size``);
3. the free disk space is checked for what is left to fetch, before any byte is written;
4. each file is fetched with ``http_get`` into ``<models>/.partial-<name>/<file>.part``,
   continuing a ``.part`` left by an earlier, interrupted run with a Range request;
5. each finished file is hashed and compared with the recorded hash; a mismatch deletes it and
   fails the download (`ModelDownloadError`), so a corrupted model is never offered;
6. once every file is verified, a manifest is written and the folder is renamed into place
   (``<models>/<name>``) in one step: a model is either complete or absent.

Cancelling (`threading.Event`) deletes the partial folder: nothing half-downloaded is left.
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
from typing import Any

from engine.errors import EngineError
from engine.model_catalog import MODEL_FILE_PATTERNS, catalogue_entry, directory_size
from engine.models import BUNDLED_MODELS as BUNDLED
from engine.models import DOWNLOAD_MANIFEST as MANIFEST
from engine.models import downloaded_path, models_dir

log = logging.getLogger(__name__)

DISK_MARGIN = 50_000_000  # left free after a download


class ModelDownloadError(EngineError):
    """A download that could not be completed; the message says why and what to do."""


class DownloadCancelled(ModelDownloadError):
    """The user cancelled: the partial files are gone."""


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


def format_bytes(count: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int
    etag: str  # sha256 (LFS) or git blob sha1
    url: str


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


def _endpoint() -> str | None:
    # Read now, not when huggingface_hub was imported: the app may set it after start-up.
    return os.environ.get("HF_ENDPOINT") or None


def remote_files(repo: str, revision: str = "main") -> tuple[str, list[RemoteFile]]:
    """The commit and the model files of ``repo`` at ``revision``, with sizes and hashes."""
    from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url

    endpoint = _endpoint()
    info = HfApi(endpoint=endpoint).model_info(repo, revision=revision)
    commit = info.sha or revision
    names = [s.rfilename for s in info.siblings or ()
             if any(fnmatch(s.rfilename, p) for p in MODEL_FILE_PATTERNS)]
    if "model.bin" not in names:
        raise ModelDownloadError(f"{repo} has no model.bin: not a CTranslate2 Whisper model")
    files = []
    for name in names:
        url = hf_hub_url(repo, name, revision=commit, endpoint=endpoint)
        meta = get_hf_file_metadata(url)
        if meta.etag is None or meta.size is None:
            raise ModelDownloadError(f"the hub gave no hash or size for {repo}/{name}")
        files.append(RemoteFile(name, meta.size, meta.etag, meta.location))
    return commit, files


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


class _ProgressBar:
    """A tqdm stand-in for ``http_get``: forwards byte counts, and raises when cancelled."""

    def __init__(self, on_bytes: Callable[[int], None], cancel: threading.Event) -> None:
        self._on_bytes = on_bytes
        self._cancel = cancel

    def __call__(self, *args: Any, **kwargs: Any) -> _ProgressBar:  # tqdm_class(...)
        return self

    def __enter__(self) -> _ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int | float = 1) -> None:
        if self._cancel.is_set():
            raise DownloadCancelled("download cancelled")
        self._on_bytes(int(n))

    def close(self) -> None:
        return None


def download(name: str, *, progress: ProgressCallback | None = None,
             cancel: threading.Event | None = None, revision: str = "main") -> Path:
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
    cancel = cancel or threading.Event()
    try:
        commit, files = remote_files(entry.repo, revision)
    except ModelDownloadError:
        raise
    except Exception as exc:  # noqa: BLE001 - huggingface_hub/httpx raise many kinds
        raise ModelDownloadError(_network_message(name, exc)) from exc
    staging = partial_dir(name)
    staging.mkdir(parents=True, exist_ok=True)
    try:
        _fetch_all(name, files, staging, progress, cancel)
        (staging / MANIFEST).write_text(json.dumps({
            "name": name, "repo": entry.repo, "revision": commit,
            "files": {f.path: {"size": f.size, "hash": f.etag} for f in files}}, indent=1))
        target = models_dir() / name
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
        raise ModelDownloadError(_network_message(name, exc) +
                                 "; what was downloaded is kept, and the next try resumes") from exc
    log.info("downloaded %s (%s) at %s", name, entry.repo, commit)
    return target


def _fetch_all(name: str, files: list[RemoteFile], staging: Path,
               progress: ProgressCallback | None, cancel: threading.Event) -> None:
    from huggingface_hub.file_download import http_get

    parts = {f.path: staging / (f.path + ".part") for f in files}
    verified = {f.path for f in files if (staging / f.path).is_file()
                and (staging / f.path).stat().st_size == f.size}
    have = {f.path: (f.size if f.path in verified else
                     min(parts[f.path].stat().st_size, f.size) if parts[f.path].is_file() else 0)
            for f in files}
    total = sum(f.size for f in files)
    resumed = sum(have.values())
    needed = total - resumed
    free = shutil.disk_usage(staging).free
    if needed + DISK_MARGIN > free:
        raise ModelDownloadError(
            f"not enough disk space for {name}: it needs {_mb(needed)} more, "
            f"{_mb(free)} is free in {staging.parent}")
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
        final = staging / f.path
        if f.path in verified:
            continue
        current[0] = f.path
        part = parts[f.path]
        part.parent.mkdir(parents=True, exist_ok=True)
        start = have[f.path]
        with open(part, "ab") as out:
            out.truncate(start)
            if start < f.size:  # else complete, but not yet verified
                http_get(f.url, out, resume_size=start, expected_size=f.size,
                         displayed_filename=f.path,
                         tqdm_class=_ProgressBar(on_bytes, cancel))  # type: ignore[arg-type]
        actual = file_hash(part, f.etag)
        if actual != f.etag:
            part.unlink(missing_ok=True)
            raise ModelDownloadError(
                f"{name}: {f.path} does not match the hash the hub records for it "
                f"(expected {f.etag[:12]}…, got {actual[:12]}…); it was deleted, and the model "
                "is not offered. Try again; if it keeps failing, the mirror or proxy alters it")
        os.replace(part, final)


def _mb(count: int) -> str:
    return format_bytes(count)


def _network_message(name: str, exc: BaseException) -> str:
    from huggingface_hub.errors import OfflineModeIsEnabled

    if isinstance(exc, OfflineModeIsEnabled):
        return f"cannot download {name}: offline mode is on (HF_HUB_OFFLINE)"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    kind = type(exc).__name__
    if "Connect" in kind or "Timeout" in kind or "resolve" in text.lower():
        host = _endpoint() or "huggingface.co"
        return (f"cannot download {name}: {host} cannot be reached (offline, or a proxy is "
                f"needed: set HTTPS_PROXY). Details: {text}")
    return f"could not download {name}: {text}"


def remove(name: str) -> int:
    """Delete a downloaded model (and any partial download of it); returns the bytes freed."""
    freed = 0
    for path in (models_dir() / name, partial_dir(name)):
        if path.is_dir():
            freed += directory_size(path)
            shutil.rmtree(path)
    if not freed and name in BUNDLED:
        raise ModelDownloadError(f"{name} is bundled with Sottovoce and cannot be removed")
    if not freed:
        raise ModelDownloadError(f"{name} is not downloaded")
    return freed
