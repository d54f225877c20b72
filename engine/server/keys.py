"""API keys of the server and what each may use.

One key comes from the environment (``--api-key-env VAR``); several, one per user or app, from a
key file (``--api-key-file FILE``), one per line::

    # name   key                      limits (all optional)
    alice    sk-alice-0f3c...         streams=2 upload_mb=25 audio_per_min=120
    notes    sk-notes-77aa...

``streams``: live sessions open at once (every WebSocket protocol); ``upload_mb``: the largest
file the OpenAI endpoints take from it; ``audio_per_min``: seconds of audio (live and files)
per minute, with a minute's worth saved up. A request over a limit is refused with a message
that names the key's name, never the key. The file should be readable by the server's user only.
"""

from __future__ import annotations

import hmac
import math
import os
import stat
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import EngineError

LIMITS = {"streams": int, "upload_mb": float, "audio_per_min": float}


@dataclass(frozen=True)
class ApiKey:
    """One client's key and the name its limits, logs and metrics go by."""

    name: str
    secret: str = field(repr=False)
    max_streams: int | None = None
    max_upload_bytes: int | None = None
    audio_per_min: float | None = None


class Keys:
    """The server's keys; none means an open server (loopback only, `ServerOptions`)."""

    def __init__(self, keys: Iterable[ApiKey] = ()) -> None:
        self._keys = tuple(keys)

    def __bool__(self) -> bool:
        return bool(self._keys)

    def match(self, token: str) -> ApiKey | None:
        """The key ``token`` is, compared with every key in constant time."""
        found = None
        for key in self._keys:
            if hmac.compare_digest(token.encode("utf-8", "replace"), key.secret.encode("utf-8")):
                found = key
        return found


def read_key_file(path: str | os.PathLike[str]) -> list[ApiKey]:
    """The keys in ``path``; `EngineError` naming the line (never its key) for a bad one."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
        mode = file.stat().st_mode
    except (OSError, UnicodeDecodeError) as exc:
        raise EngineError(f"cannot read the key file {file}: {exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise EngineError(f"the key file {file} can be read by other users: chmod 600 it")
    keys: list[ApiKey] = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) < 2:
            raise EngineError(f"{file}, line {number}: want 'NAME KEY [limit=value ...]'")
        name, secret, limits = words[0], words[1], dict(_limit(file, number, w)
                                                        for w in words[2:])
        if len(secret) < 16:
            raise EngineError(f"{file}, line {number}: the key of {name!r} is shorter than 16 "
                              "characters")
        if any(k.name == name for k in keys) or any(k.secret == secret for k in keys):
            raise EngineError(f"{file}, line {number}: {name!r} or its key is there twice")
        upload = limits.get("upload_mb")
        keys.append(ApiKey(name, secret, max_streams=_int(limits.get("streams")),
                           max_upload_bytes=None if upload is None else int(upload * 2**20),
                           audio_per_min=limits.get("audio_per_min")))
    if not keys:
        raise EngineError(f"the key file {file} holds no key")
    return keys


def _limit(file: Path, number: int, word: str) -> tuple[str, float]:
    name, _, value = word.partition("=")
    try:
        amount = LIMITS[name](value)
    except (KeyError, ValueError):
        raise EngineError(f"{file}, line {number}: {word!r} is not one of "
                          f"{', '.join(n + '=N' for n in LIMITS)}") from None
    if not (math.isfinite(amount) and amount > 0):
        raise EngineError(f"{file}, line {number}: {name} must be a number > 0")
    return name, float(amount)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


class KeyUsage:
    """What the keys hold now: open live streams and their audio budget (a token bucket per
    key: ``audio_per_min`` seconds a minute, a minute's worth saved up). Thread-safe: live
    audio comes from the event loop, files from worker threads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._streams: Counter[str] = Counter()
        self._audio: dict[str, tuple[float, float]] = {}  # name -> (seconds left, when)

    def open_stream(self, key: ApiKey | None) -> str | None:
        """Count a new live stream of ``key``; the refusal's text when it has its limit."""
        if key is None:
            return None
        with self._lock:
            if key.max_streams is not None and self._streams[key.name] >= key.max_streams:
                return (f"key {key.name!r} already has {key.max_streams} stream(s) open, its "
                        "limit")
            self._streams[key.name] += 1
        return None

    def close_stream(self, key: ApiKey | None) -> None:
        if key is not None:
            with self._lock:
                self._streams[key.name] -= 1
                if self._streams[key.name] <= 0:
                    del self._streams[key.name]

    def take_audio(self, key: ApiKey | None, seconds: float) -> str | None:
        """Charge ``seconds`` of audio to ``key``; the refusal's text when it is over."""
        if key is None or key.audio_per_min is None:
            return None
        per_min = key.audio_per_min
        with self._lock:
            now = self._clock()
            left, when = self._audio.get(key.name, (per_min, now))
            left = min(per_min, left + (now - when) * per_min / 60)
            if seconds > left:
                self._audio[key.name] = (left, now)
                wait = (seconds - left) * 60 / per_min
                return (f"key {key.name!r} is over its {per_min:g} audio seconds per minute; "
                        f"retry in {math.ceil(wait)} s")
            self._audio[key.name] = (left - seconds, now)
        return None
