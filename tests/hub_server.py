"""A local stand-in for the Hugging Face hub's file API, on 127.0.0.1 (stdlib http.server).

It serves one or more repositories from local folders the way huggingface.co does for the calls
``huggingface_hub`` makes when downloading a model:

- ``GET /api/models/{repo}/revision/{rev}``: ``{"id", "sha", "siblings": [{"rfilename", ...}]}``;
- ``HEAD /{repo}/resolve/{rev}/{file}``: ``X-Repo-Commit``; for an LFS file (``model.bin``)
  ``X-Linked-Etag`` (its sha256) and ``X-Linked-Size`` beside the pointer's ``ETag``; for a
  small file ``ETag`` = its git blob sha1;
- ``GET`` of the same URL, with ``Range: bytes=N-`` answered by ``206 Partial Content``.

Faults for tests: `break_after` (bytes of a file's body sent before the connection is cut, once),
`down` (every request answered 503 while set), `corrupt` (files served with one byte flipped,
their recorded hashes unchanged). Every request is logged in `requests` as
``(method, path, range header)``; `served` counts body bytes sent.

A hostile hub or mirror (tests/test_hardening_hub.py): `fallback` (content served for any file
name the repository does not hold, so a listed name like ``vocabulary.x/../../.bashrc`` is
answered whatever the client made of its URL), `hang` (``"info"``, ``"head"``, ``"get"``: the
connection is accepted and that request never answered; ``"get"`` sends the headers, then
nothing), `captive_portal` (the file list answered 200 with an HTML login page), `oversend`
(file -> bytes its GET sends, zeros after the real content, while HEAD declares the real size),
`declared` (file -> the size its HEAD declares, whatever it holds),
`drip` (while set, bodies are sent 1 kB every 50 ms). `release` ends every hang (set on exit).
`cdn` (another server's URL: LFS files are answered 302 to the same path there, the recorded
hash and size in the 302's headers, as huggingface.co sends them to its CDN); `authorized`
lists the paths of requests that carried an Authorization header.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"
LFS_FILES = ("model.bin",)


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324


@dataclass
class HubState:
    repos: dict[str, dict[str, bytes]] = field(default_factory=dict)
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    served: int = 0
    break_after: dict[str, int] = field(default_factory=dict)  # file -> bytes, then cut (once)
    down: bool = False
    go_down_after_break: bool = False  # the cut leaves the server answering 503
    corrupt: set[str] = field(default_factory=set)
    throttle_bps: int = 0  # 0: as fast as it goes
    fallback: bytes | None = None
    hang: set[str] = field(default_factory=set)
    captive_portal: bool = False
    oversend: dict[str, int] = field(default_factory=dict)
    declared: dict[str, int] = field(default_factory=dict)
    cdn: str | None = None
    authorized: list[str] = field(default_factory=list)
    drip: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def file(self, repo: str, name: str) -> bytes | None:
        found = self.repos.get(repo, {}).get(name)
        return self.fallback if found is None and repo in self.repos else found

    def hangs(self, kind: str) -> bool:
        """Wait, answering nothing, while ``kind`` is to hang (until `release`)."""
        if kind not in self.hang:
            return False
        self.release.wait(120)
        return True

    def add_repo(self, repo: str, folder: Path, extra: dict[str, bytes] | None = None) -> None:
        files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
        self.repos[repo] = {**files, **(extra or {})}


class _Handler(BaseHTTPRequestHandler):
    state: HubState
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # quiet
        return None

    def _log(self) -> None:
        path = unquote(urlparse(self.path).path)
        with self.state.lock:
            self.state.requests.append((self.command, path, self.headers.get("Range", "")))
            if self.headers.get("Authorization"):
                self.state.authorized.append(path)

    def _to_cdn(self, name: str, data: bytes, head: bool) -> bool:
        if self.state.cdn is None or name not in LFS_FILES:
            return False
        headers = {**_file_headers(name, data), "Location": self.state.cdn + self.path}
        self._send(302, b"", "text/plain", headers, head=head)
        return True

    def _refuse_if_down(self) -> bool:
        if self.state.down:
            self._send(503, b'{"error": "Service Unavailable"}', "application/json")
            return True
        return False

    def _send(self, code: int, body: bytes, ctype: str, headers: dict[str, str] | None = None,
              head: bool = False) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _route(self) -> tuple[str, str, str] | None:
        """(kind, repo, file-or-rev) for the hub's URL shapes."""
        path = unquote(urlparse(self.path).path)
        if path.startswith("/api/models/"):
            rest = path[len("/api/models/"):]
            repo, _, rev = rest.partition("/revision/")
            return "info", repo, rev
        if "/resolve/" in path:
            repo, _, rest = path.lstrip("/").partition("/resolve/")
            _rev, _, name = rest.partition("/")
            return "file", repo, name
        return None

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self._log()
        if self._refuse_if_down():
            return
        route = self._route()
        data = None if route is None or route[0] != "file" else self.state.file(route[1], route[2])
        if route is None or data is None:
            self._send(404, b"", "text/plain", {"X-Error-Code": "EntryNotFound"}, head=True)
            return
        if self.state.hangs("head") or self._to_cdn(route[2], data, head=True):
            return
        headers = _file_headers(route[2], data)
        if route[2] in self.state.declared:
            headers["X-Linked-Size"] = str(self.state.declared[route[2]])
        self._send(200, data, "application/octet-stream", headers, head=True)

    def do_GET(self) -> None:  # noqa: N802
        self._log()
        if self._refuse_if_down():
            return
        route = self._route()
        if route is None or route[1] not in self.state.repos:
            self._send(404, b'{"error": "Repository not found"}', "application/json",
                       {"X-Error-Code": "RepoNotFound"})
            return
        kind, repo, name = route
        files = self.state.repos[repo]
        if self.state.hangs("info" if kind == "info" else "none"):
            return
        if kind == "info" and self.state.captive_portal:
            self._send(200, b"<!DOCTYPE html>\n<html><head><title>Log in to Guest WiFi</title>"
                            b"</head><body>Accept the terms to continue</body></html>",
                       "text/html; charset=utf-8")
            return
        if kind == "info":
            siblings = [{"rfilename": n} for n in files]
            body = json.dumps({"id": repo, "modelId": repo, "sha": COMMIT,
                               "siblings": siblings, "private": False}).encode()
            self._send(200, body, "application/json")
            return
        data = self.state.file(repo, name)
        if data is None:
            self._send(404, b"", "text/plain", {"X-Error-Code": "EntryNotFound"})
            return
        if not self._to_cdn(name, data, head=False):
            self._send_file(name, data)

    def _send_file(self, name: str, data: bytes) -> None:
        if name in self.state.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start = 0
        ranged = self.headers.get("Range", "")
        if ranged.startswith("bytes="):
            start = int(ranged[len("bytes="):].split("-")[0])
        body = data[start:]
        if name in self.state.oversend:  # more than HEAD declared: the real bytes, then zeros
            body = _Padded(body, self.state.oversend[name] - start)
        self.send_response(206 if start else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        for key, value in _file_headers(name, data).items():
            self.send_header(key, value)
        self.end_headers()
        if self.state.hangs("get"):
            return
        with self.state.lock:
            cut = self.state.break_after.pop(name, None)
        limit = len(body) if cut is None else max(0, min(len(body), cut - start))
        sent = 0
        chunk = 1 << 16
        import time

        began = time.monotonic()
        while sent < limit:
            piece = body[sent:min(limit, sent + chunk)]
            try:
                self.wfile.write(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
            with self.state.lock:
                self.state.served += len(piece)
            if self.state.throttle_bps:
                due = began + sent / self.state.throttle_bps
                time.sleep(max(0.0, due - time.monotonic()))
            chunk = 1 << 10 if self.state.drip.is_set() else 1 << 16
            if self.state.drip.is_set():
                time.sleep(0.05)
        if cut is not None:
            if self.state.go_down_after_break:
                self.state.down = True
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(2)


class _Padded:
    """``data`` followed by zeros up to ``size`` bytes, without holding them all in memory."""

    def __init__(self, data: bytes, size: int) -> None:
        self._data = data
        self._size = size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, window: slice) -> bytes:
        start, stop = window.start or 0, min(window.stop, self._size)
        head = self._data[start:stop]
        return head + bytes(max(0, stop - start - len(head)))


def _file_headers(name: str, data: bytes) -> dict[str, str]:
    headers = {"X-Repo-Commit": COMMIT, "Accept-Ranges": "bytes"}
    if name in LFS_FILES:
        pointer = (f"version https://git-lfs.github.com/spec/v1\noid sha256:"
                   f"{hashlib.sha256(data).hexdigest()}\nsize {len(data)}\n").encode()
        headers.update({"ETag": f'"{git_blob_sha1(pointer)}"',
                        "X-Linked-Etag": f'"{hashlib.sha256(data).hexdigest()}"',
                        "X-Linked-Size": str(len(data))})
    else:
        headers["ETag"] = f'"{git_blob_sha1(data)}"'
    return headers


class LocalHub:
    """The server on 127.0.0.1 (a free port), on its own thread; `url` is its HF_ENDPOINT."""

    def __init__(self) -> None:
        self.state = HubState()
        handler = type("Handler", (_Handler,), {"state": self.state})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        # A short poll: shutdown() waits up to one poll interval, paid by every test that
        # brings a hub up (0.5 s by default, 40 s over the suite).
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> LocalHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.state.release.set()
        self._server.shutdown()
        self._server.server_close()
