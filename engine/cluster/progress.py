"""Progress of a cluster run: audio hours done of the total, throughput, ETA; the JSON summary.

File tasks report to a `Board` actor (made remote by the driver) how far each file has got; the
driver polls it between completions and draws one bar over audio *hours* (files differ in
length by orders of magnitude, so a count of files says little) and rewrites the summary.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any


class Board:
    """Per-file seconds done, and how many times each file was started (a retried file task,
    after its node died, starts again from zero)."""

    def __init__(self) -> None:
        self.done: dict[str, float] = {}
        self.starts: dict[str, int] = {}

    def start(self, key: str) -> None:
        self.starts[key] = self.starts.get(key, 0) + 1
        self.done[key] = 0.0

    def report(self, key: str, seconds: float) -> None:
        self.done[key] = seconds

    def snapshot(self) -> tuple[dict[str, float], dict[str, int]]:
        return dict(self.done), dict(self.starts)


@dataclass
class Tally:
    """The run's bookkeeping: every input ends in exactly one of done, skipped or errors."""

    total_s: float  # audio seconds of the inputs to do (skipped ones excluded)
    started: float = field(default_factory=time.monotonic)
    done: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    finished_s: float = 0.0  # audio seconds of finished files
    partial_s: float = 0.0  # of files in flight, from the board
    failed_s: float = 0.0  # of files that failed: never to be done, not waited for

    @property
    def done_s(self) -> float:
        return min(self.total_s, self.finished_s + self.partial_s) if self.total_s else 0.0

    def failed(self, entry: dict[str, Any], error: str, seconds: float | None) -> None:
        self.errors.append({**entry, "error": error})
        self.failed_s += seconds or 0.0

    def rates(self, running: bool = True) -> dict[str, float | None]:
        """Elapsed time and speed; the ETA only while ``running`` and measurable."""
        elapsed = time.monotonic() - self.started
        speed = self.done_s / elapsed if elapsed > 0 else 0.0  # audio seconds per second
        left = max(0.0, self.total_s - self.failed_s - self.done_s)
        eta = left / speed if running and speed > 0 else None
        if eta is not None and not math.isfinite(eta):  # (a vanishing speed: not measurable)
            eta = None
        return {"elapsed_s": round(elapsed, 2), "audio_hours_per_hour": round(speed, 2),
                "eta_s": None if eta is None else round(eta, 1)}

    def summary(self, state: str, extra: dict[str, Any]) -> dict[str, Any]:
        """``state``: "running", or how the run ended ("done", "interrupted", "failed": no
        ETA then)."""
        return {
            "state": state, "audio_s_total": round(self.total_s, 2),
            "audio_s_done": round(self.done_s, 2), **self.rates(state == "running"),
            "counts": {"done": len(self.done), "skipped": len(self.skipped),
                       "errors": len(self.errors)},
            "done": self.done, "skipped": self.skipped, "errors": self.errors, **extra,
        }


class Bar:
    """tqdm over audio hours on stderr (when it is a terminal and tqdm is there)."""

    def __init__(self, total_s: float, enabled: bool) -> None:
        self._bar: Any = None
        if not enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._bar = tqdm(total=round(total_s / 3600, 3), unit="h", file=sys.stderr,
                         desc="audio", bar_format="{desc}: {percentage:3.0f}%|{bar}| "
                         "{n:.3f}/{total:.3f} h [{elapsed}{postfix}]")

    def update(self, tally: Tally, files_left: int) -> None:
        if self._bar is None:
            return
        self._bar.update(round(tally.done_s / 3600, 3) - self._bar.n)
        rates = tally.rates()
        eta = rates["eta_s"]
        self._bar.set_postfix_str(
            f"{rates['audio_hours_per_hour'] or 0:.1f} h/h, ETA "
            f"{'?' if eta is None else f'{eta / 60:.0f} min'}, {files_left} files left",
            refresh=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
