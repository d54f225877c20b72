"""The client's outgoing audio: kept until the server acknowledges it, so a reconnect can resend.

`AudioBuffer` is shared by the capture thread (appends) and the network thread (reads, acks),
under one lock. Positions are sample counts on the session timeline. Overflow policy: at most
``max_samples`` of unacknowledged audio are kept; past that the *oldest* is dropped and counted
(a server that has been gone for minutes cannot get everything back, but the newest speech
matters most).

`SendLog` remembers when each position was sent, so a reply that names the sample which
triggered it gives the round trip on the client's own clock (no clock sync with the server).
"""

from __future__ import annotations

import logging
import threading
from collections import deque

import numpy as np

from engine.wire.protocol import Int16Audio

log = logging.getLogger(__name__)


class AudioBuffer:
    def __init__(self, max_samples: int) -> None:
        self._max = max_samples
        self._lock = threading.Lock()
        self._chunks: deque[tuple[int, Int16Audio]] = deque()  # (start, samples), in order
        self._acked = 0  # everything before this may be forgotten
        self._end = 0  # position after the newest sample
        self._flushes: list[int] = []  # positions where the client asked for a flush
        self.closed = False  # no more audio will come
        self.dropped = 0  # samples dropped by the overflow policy

    @property
    def end(self) -> int:
        with self._lock:
            return self._end

    @property
    def acked(self) -> int:
        with self._lock:
            return self._acked

    def append(self, samples: Int16Audio) -> None:
        with self._lock:
            if len(samples):
                self._chunks.append((self._end, samples))
                self._end += len(samples)
            while self._end - self._acked > self._max and self._chunks:
                start, oldest = self._chunks.popleft()
                self.dropped += len(oldest)
                self._acked = start + len(oldest)
                log.warning("server unreachable too long: dropped %d unacknowledged samples",
                            len(oldest))

    def mark_flush(self) -> None:
        with self._lock:
            self._flushes.append(self._end)

    def close(self) -> None:
        with self._lock:
            self.closed = True

    def ack(self, upto: int) -> None:
        with self._lock:
            upto = min(upto, self._end)
            if upto <= self._acked:
                return
            self._acked = upto
            while self._chunks and self._chunks[0][0] + len(self._chunks[0][1]) <= upto:
                self._chunks.popleft()
            self._flushes = [f for f in self._flushes if f > upto]

    def flushes_after(self, position: int) -> list[int]:
        with self._lock:
            return [f for f in self._flushes if f > position]

    def read(self, position: int, max_samples: int) -> tuple[int, Int16Audio] | None:
        """Up to ``max_samples`` contiguous samples from ``position`` (or the oldest kept one):
        (start, samples), or None when nothing is there yet."""
        with self._lock:
            position = max(position, self._acked)
            parts: list[Int16Audio] = []
            start = -1
            taken = 0
            for chunk_start, chunk in self._chunks:
                chunk_end = chunk_start + len(chunk)
                if chunk_end <= position:
                    continue
                lo = max(0, position - chunk_start)
                piece = chunk[lo:lo + max_samples - taken]
                if start < 0:
                    start = chunk_start + lo
                parts.append(piece)
                taken += len(piece)
                if taken >= max_samples:
                    break
            if not parts:
                return None
            return start, np.concatenate(parts) if len(parts) > 1 else parts[0]


class SendLog:
    """(position after a sent frame, time it was sent), newest last, bounded."""

    def __init__(self, maxlen: int = 50_000) -> None:
        self._entries: deque[tuple[int, float]] = deque(maxlen=maxlen)

    def sent(self, end: int, at: float) -> None:
        self._entries.append((end, at))

    def rewind(self, position: int) -> None:
        """A reconnect resends from ``position``: forget sends past it."""
        while self._entries and self._entries[-1][0] > position:
            self._entries.pop()

    def time_of(self, position: int) -> float | None:
        """When the frame holding the sample just before ``position`` was sent."""
        found = None
        for end, at in reversed(self._entries):
            if end < position:
                break
            found = at
        return found
