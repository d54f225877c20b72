"""An audio source held at a point of the stream: a test acts "mid-stream" on an event, not
after a sleep that a busy machine may outrun.

    source = HeldSource(FileSource(wav, realtime=True), hold_at=5 * SAMPLE_RATE)
    engine.start()
    assert source.reached.wait(60)   # 5 s of the file handed out; nothing more until release()
    ...                              # kill the server, switch something, ...
    source.release()
"""

from __future__ import annotations

import threading

from engine.audio.sources import AudioSource
from engine.types import Audio


class HeldSource:
    """Hands out ``source``'s audio up to ``hold_at`` samples (the first block boundary at or
    after it), then nothing (as a silent-but-open microphone) until `release()`; ``reached`` is
    set when it gets there. After the release the wrapped source goes on where it stopped."""

    def __init__(self, source: AudioSource, hold_at: int) -> None:
        self._source = source
        self.hold_at = hold_at
        self.simulated = source.simulated
        self.reached = threading.Event()
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    def start(self) -> None:
        self._source.start()

    def stop(self) -> None:
        self._released.set()
        self._source.stop()

    def take_notice(self) -> str | None:
        return self._source.take_notice()

    def read(self, timeout: float) -> Audio | None:
        if self._source.position >= self.hold_at and not self._released.is_set():
            self.reached.set()
            self._released.wait(timeout)
            return None
        return self._source.read(timeout)

    @property
    def finished(self) -> bool:
        return self._source.finished

    @property
    def position(self) -> int:
        return self._source.position

    @property
    def captured(self) -> int:
        return min(self._source.captured, max(self.position, self.hold_at)) \
            if not self._released.is_set() else self._source.captured

    @property
    def dropped(self) -> int:
        return self._source.dropped
