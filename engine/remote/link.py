"""What a link (`NativeLink`, `WhisperLiveLink`) and `RemoteLiveEngine` share: the client's
options, the endpoint, one reply's timing, and `LinkHost`, the engine side a link drives.

Its own module so that the links need not import `engine.remote.client` (which starts them):
no import cycle between the client and its links.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from engine.errors import EngineError
from engine.events import Event, Metrics
from engine.remote.buffer import AudioBuffer, SendLog
from engine.types import Word


@dataclass(frozen=True)
class RemoteOptions:
    """Client behaviour. ``mode``: "vad" streams everything (the server segments), "ptt" only
    what is spoken between `begin_utterance()` and `end_utterance()` plus ``preroll_ms``."""

    mode: str = "vad"
    language: str | None = None
    prompt: str | None = None
    vocabulary: tuple[str, ...] = ()  # the session's at the start (native servers only)
    connect_timeout_s: float = 10.0
    backoff_initial_s: float = 0.2
    backoff_max_s: float = 5.0
    max_reconnects: int = 30
    max_buffer_s: float = 300.0
    end_timeout_s: float = 120.0
    preroll_ms: int = 400  # push-to-talk: audio kept from before the press (>= 300)
    read_timeout_s: float = 0.1
    level_interval_ms: int = 100

    def __post_init__(self) -> None:
        if self.mode not in ("vad", "ptt"):
            raise ValueError("mode must be 'vad' or 'ptt'")
        if self.backoff_initial_s <= 0 or self.backoff_max_s < self.backoff_initial_s:
            raise ValueError("need 0 < backoff_initial_s <= backoff_max_s")
        if self.max_reconnects < 0 or self.max_buffer_s <= 0 or self.end_timeout_s <= 0:
            raise ValueError("max_reconnects >= 0, max_buffer_s > 0, end_timeout_s > 0")
        if self.language is not None and not self.language.isalpha():
            raise ValueError(f"invalid language code {self.language!r}")


@dataclass(frozen=True)
class Endpoint:
    """Where to connect: ``kind`` "native" or "whisperlive", and the WebSocket URL."""

    kind: str
    url: str

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme in ("ws", "wss") and parts.hostname:
            return cls("native", url)
        if parts.scheme in ("whisperlive", "whisperlives") and parts.hostname:
            scheme = "wss" if parts.scheme == "whisperlives" else "ws"
            return cls("whisperlive", f"{scheme}://{parts.netloc}{parts.path or '/'}")
        raise EngineError(f"unsupported server URL {url!r}: use ws://, wss:// or "
                          "whisperlive://host:port")


@dataclass(frozen=True)
class Timing:
    """One reply's timing: round trip on our clock, the server's share, its decode time."""

    rtt_ms: float
    server_ms: float | None  # None: the server does not say (WhisperLive)
    decode_ms: float
    audio_ms: float

    @property
    def network_ms(self) -> float | None:
        if self.server_ms is None:
            return None
        return max(0.0, self.rtt_ms - self.server_ms)

    def metrics(self, kind: str, dropped: int) -> Metrics:
        rtf = self.decode_ms / self.audio_ms if self.audio_ms > 0 else 0.0
        return Metrics(chunk_rtt_ms=self.rtt_ms, decode_ms=self.decode_ms,
                       network_ms=self.network_ms, lag_ms=self.rtt_ms, rtf=rtf,
                       dropped_frames=dropped, kind=kind)


class LinkHost(Protocol):
    """The engine as its link sees it (`RemoteLiveEngine` is one): the shared buffer and send
    log, the clock, and the reply -> event callbacks, all called on the network thread."""

    options: RemoteOptions
    endpoint: Endpoint
    api_key: str | None
    session_id: str
    buffer: AudioBuffer
    send_log: SendLog
    vocabulary: tuple[str, ...]  # the current one (set from any thread, read by the link)

    def now(self) -> float: ...

    async def wait_for_audio(self) -> None: ...

    def emit(self, event: Event) -> None: ...

    def utterance(self, connection: int, server_id: int) -> int: ...

    def on_partial(self, uid: int, committed: str, tentative: str, start: int,
                   timing: Timing) -> None: ...

    def on_final(self, uid: int, text: str, words: tuple[Word, ...], start: int, end: int,
                 timing: Timing, language: str | None = None) -> None: ...
