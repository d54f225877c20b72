"""How many sessions one client may hold, and for how long, whatever protocol it speaks.

The idle timeout counts any frame, so a client sending a keepalive every 20 s kept its session,
and its slot, forever: 16 such clients locked everyone out (issue 15, item 8). So:

- ``per_client``: sessions open at once from one client address; one more is refused with
  ``busy`` (retry later). Keyed by address, not by API key: the server has one shared key, so
  a per-key cap would only be a second global cap.
- ``idle_audio_s``: a session that has sent no audio for this long is closed with
  ``idle_timeout``; keepalives and other text frames do not count as audio.
- ``lifetime_s``: a session is closed after this long whatever it sends, with
  ``session_expired``.

Both closes are retryable codes: a client that still has audio reconnects and resumes from its
last ack (docs/protocol.md), so no final is lost; a client that only holds a slot loses it.

`ClientSessions.guard(handler)` wraps the server's connection handler: it admits or refuses the
connection, then hands the handler a `LimitedSocket`, whose ``recv`` ends the session at its
deadline by raising the connection's closing error (each protocol's connection turns it into
its own error frame and close).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from engine.server.connection import _Closing, close_reason
from engine.wire import protocol as p

CLOSE_NORMAL = 1000
CLOSE_TRY_LATER = 1013


@dataclass(frozen=True)
class SessionLimits:
    per_client: int = 4
    idle_audio_s: float = 600.0
    lifetime_s: float = 8 * 3600.0

    def __post_init__(self) -> None:
        if self.per_client < 1:
            raise ValueError("sessions per client must be >= 1")
        # NaN compares false with everything: it would disable the limit silently.
        if not all(math.isfinite(x) and x > 0 for x in (self.idle_audio_s, self.lifetime_s)):
            raise ValueError("idle-audio and lifetime limits must be finite numbers > 0")


Handler = Callable[[Any], Awaitable[None]]


class ClientSessions:
    """Open sessions per client and the limits' counters (for /metrics)."""

    def __init__(self, limits: SessionLimits,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._open: Counter[str] = Counter()
        self.counters = {"refused_per_client": 0, "closed_idle_audio": 0, "closed_lifetime": 0}

    def guard(self, handler: Handler) -> Handler:
        async def guarded(ws: Any) -> None:
            client = client_of(ws)
            if self._open[client] >= self.limits.per_client:
                self.counters["refused_per_client"] += 1
                await _refuse(ws, p.BUSY, f"this client already has {self.limits.per_client} "
                              "sessions open", CLOSE_TRY_LATER)
                return
            self._open[client] += 1
            try:
                await handler(LimitedSocket(ws, self))
            except _Closing as closing:  # a deadline before the handler's own loop began
                await _refuse(ws, closing.code, closing.message, closing.close_code)
            finally:
                self._open[client] -= 1
                if not self._open[client]:
                    del self._open[client]

        return guarded

    @property
    def clients(self) -> int:
        """Client addresses holding at least one session now."""
        return len(self._open)

    def as_dict(self) -> dict[str, object]:
        return {"max_sessions_per_client": self.limits.per_client,
                "idle_audio_s": self.limits.idle_audio_s, "lifetime_s": self.limits.lifetime_s,
                "clients": len(self._open), "most_sessions_one_client": max(
                    self._open.values(), default=0), **self.counters}


class LimitedSocket:
    """The connection's WebSocket with the session deadlines on ``recv``; everything else is
    the socket's own. Binary frames are audio in every protocol served here."""

    def __init__(self, ws: Any, sessions: ClientSessions) -> None:
        self._ws = ws
        self._sessions = sessions
        self._clock = sessions._clock
        self._opened = self._last_audio = self._clock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ws, name)

    async def recv(self) -> str | bytes:
        limits = self._sessions.limits
        idle_end = self._last_audio + limits.idle_audio_s
        life_end = self._opened + limits.lifetime_s
        remaining = min(idle_end, life_end) - self._clock()
        try:
            if remaining <= 0:
                raise asyncio.TimeoutError
            frame: str | bytes = await asyncio.wait_for(self._ws.recv(), remaining)
        except asyncio.TimeoutError:
            raise self._expired(life_end <= idle_end) from None
        if isinstance(frame, bytes) and frame:
            self._last_audio = self._clock()
        return frame

    def _expired(self, lifetime: bool) -> _Closing:
        limits = self._sessions.limits
        if lifetime:
            self._sessions.counters["closed_lifetime"] += 1
            return _Closing(p.SESSION_EXPIRED, f"session older than {limits.lifetime_s:.0f} s; "
                            "reconnect to resume", CLOSE_NORMAL)
        self._sessions.counters["closed_idle_audio"] += 1
        return _Closing(p.IDLE_TIMEOUT, f"no audio for {limits.idle_audio_s:.0f} s",
                        CLOSE_NORMAL)


def client_of(ws: Any) -> str:
    """The client's address (the host part: every port of one host is one client)."""
    address = getattr(ws, "remote_address", None)
    if isinstance(address, tuple) and address:
        return str(address[0])
    return "local"


async def _refuse(ws: Any, code: str, message: str, close_code: int) -> None:
    from websockets.exceptions import ConnectionClosed

    try:
        await ws.send(p.encode_server(p.Error(code=code, message=message)))
        await ws.close(close_code, close_reason(message))
    except ConnectionClosed:
        pass
