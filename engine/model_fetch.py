"""One model file from the hub over HTTP, and the errors a download ends with.

The request goes through ``huggingface_hub``'s HTTP session (its proxies, headers and redirect
rules). Nothing the hub declares is trusted: each block that arrives is checked against the
declared size and against the free disk space before it is written, and every wait (for an
answer, for the next bytes) is bounded by a timeout whose error says what was waited for.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from engine.errors import EngineError

log = logging.getLogger(__name__)

DISK_MARGIN = 50_000_000  # left free after a download
CHUNK = 1 << 20
MAX_TRIES = 20  # connections per file: a hub that keeps cutting them cannot keep us forever


class ModelDownloadError(EngineError):
    """A download that could not be completed; the message says why and what to do."""


class DownloadCancelled(ModelDownloadError):
    """The user cancelled: the partial files are gone."""


def format_bytes(count: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int
    etag: str  # sha256 (LFS) or git blob sha1
    url: str


def endpoint() -> str | None:
    # Read now, not when huggingface_hub was imported: the app may set it after start-up.
    return os.environ.get("HF_ENDPOINT") or None


class Oversized(ModelDownloadError):
    """The hub sent more bytes than it declared: the ``.part`` is deleted."""


def fetch_file(name: str, f: RemoteFile, part: Path, start: int,
               on_bytes: Callable[[int], None], cancel: threading.Event,
               timeout: float) -> None:
    """Fetch ``f`` into ``part`` from byte ``start`` on; a connection cut after some bytes is
    resumed at once with a Range request, as long as each try brings new bytes (at most
    `MAX_TRIES` connections)."""
    from huggingface_hub import get_session, hf_raise_for_status
    from huggingface_hub.utils._headers import build_hf_headers

    # O_NOFOLLOW: a symbolic link put in the ``.part``'s place is refused, not written through.
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    with os.fdopen(os.open(part, flags, 0o644), "wb") as out:
        out.truncate(start)
        out.seek(start)
        for _ in range(MAX_TRIES):
            if start >= f.size:
                return
            headers = build_hf_headers(token=False)
            headers["Accept-Encoding"] = "identity"  # the declared size is of the raw bytes
            if start:
                headers["Range"] = f"bytes={start}-"
            before = start
            try:
                with get_session().stream("GET", f.url, headers=headers,
                                          timeout=timeout) as response:
                    hf_raise_for_status(response)
                    if start and response.status_code != 206:  # the Range was ignored
                        on_bytes(-start)
                        start = 0
                        out.seek(0)
                        out.truncate()
                    start = _write_body(name, f, response.iter_bytes(CHUNK), out, part.parent,
                                        start, on_bytes, cancel)
            except ModelDownloadError:
                raise
            except Exception as exc:  # noqa: BLE001 - httpx's transient kinds are retried
                start = out.tell()  # the blocks written before the connection failed
                if is_timeout(exc) and start <= before:
                    raise ModelDownloadError(
                        f"the hub stopped sending {f.path} of {name}: nothing arrived for "
                        f"{timeout:g} s; what was downloaded is kept, and the next try "
                        "resumes") from exc
                if start <= before or not transient(exc):
                    raise
                log.info("%s: connection cut after %d bytes of %s; resuming", name, start, f.path)
                continue
            if start <= before:
                break
    if start < f.size:
        raise ModelDownloadError(
            f"the hub ended {f.path} of {name} after {start} of its {f.size} bytes; what was "
            "downloaded is kept, and the next try resumes")


def _write_body(name: str, f: RemoteFile, body: Iterator[bytes], out: BinaryIO, folder: Path,
                done: int, on_bytes: Callable[[int], None], cancel: threading.Event) -> int:
    """Write what arrives, checking each block against the declared size and the free space
    before it is written; returns the bytes now in the file."""
    for chunk in body:
        if cancel.is_set():
            raise DownloadCancelled("download cancelled")
        if done + len(chunk) > f.size:
            raise Oversized(
                f"{name}: the hub sent more than the {f.size} bytes it declared for {f.path}; "
                "the download stopped and the file was deleted. The hub or mirror (HF_ENDPOINT) "
                "is wrong or hostile")
        free = shutil.disk_usage(folder).free
        if free < len(chunk) + DISK_MARGIN:
            raise ModelDownloadError(
                f"not enough disk space for {name}: {format_bytes(free)} is left in {folder} and "
                f"Sottovoce keeps {format_bytes(DISK_MARGIN)} free; the download stopped. What "
                "arrived is kept: free some space and download again to resume")
        out.write(chunk)
        done += len(chunk)
        on_bytes(len(chunk))
    return done


def is_timeout(exc: BaseException) -> bool:
    return any("Timeout" in kind.__name__ for kind in type(exc).__mro__)


def transient(exc: BaseException) -> bool:
    """A cut or stalled connection (httpx's kinds), worth resuming when bytes came first."""
    names = {kind.__name__ for kind in type(exc).__mro__}
    return bool(names & {"TransportError", "TimeoutException"})


def hub_message(name: str, what: str, exc: BaseException, timeout: float) -> str:
    """What went wrong while waiting for ``what`` from the hub, in words."""
    host = endpoint() or "https://huggingface.co"
    if isinstance(exc, json.JSONDecodeError):
        if exc.doc.lstrip()[:1] == "<":
            return (f"the hub answered with an HTML page, not {what}: a captive portal or proxy? "
                    f"Open {host} in a browser (a network login page?), or set HF_ENDPOINT or "
                    "HTTPS_PROXY")
        return f"the hub's answer is not {what} (not JSON): is HF_ENDPOINT ({host}) a hub?"
    if is_timeout(exc):
        return (f"the hub did not answer {what} within {timeout:g} s ({host}); try again "
                "later, or use another mirror (HF_ENDPOINT) or a proxy (HTTPS_PROXY)")
    return network_message(name, exc)


def network_message(name: str, exc: BaseException) -> str:
    from huggingface_hub.errors import OfflineModeIsEnabled

    if isinstance(exc, OfflineModeIsEnabled):
        return f"cannot download {name}: offline mode is on (HF_HUB_OFFLINE)"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    kind = type(exc).__name__
    if "Connect" in kind or "Timeout" in kind or "resolve" in text.lower():
        host = endpoint() or "huggingface.co"
        return (f"cannot download {name}: {host} cannot be reached (offline, or a proxy is "
                f"needed: set HTTPS_PROXY). Details: {text}")
    return f"could not download {name}: {text}"
