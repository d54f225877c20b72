"""The server's numbers in the Prometheus text exposition format (version 0.0.4), for a fleet.

No client library: the format is a few lines of text (https://prometheus.io/docs/instrumenting/
exposition_formats/). `ServerMetrics` collects what only the connections see (decode time per
request and kind, audio received, errors by kind); `render` adds the server's gauges and the
scheduler's counters at scrape time. ``GET /metrics`` serves this; ``GET /metrics.json`` (or
``Accept: application/json``) the older JSON.
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds: a partial of a second of audio on a GPU (~10 ms) to a long final on a busy CPU.
DECODE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class Histogram:
    buckets: tuple[float, ...] = DECODE_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * (len(DECODE_BUCKETS) + 1))
    total: float = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value

    def lines(self, name: str, labels: str) -> list[str]:
        out, running = [], 0
        for bound, count in zip((*self.buckets, float("inf")), self.counts, strict=True):
            running += count
            le = "+Inf" if bound == float("inf") else repr(bound)
            out.append(f'{name}_bucket{{{labels}{"," if labels else ""}le="{le}"}} {running}')
        braces = f"{{{labels}}}" if labels else ""
        out.append(f"{name}_sum{braces} {self.total:.6f}")
        out.append(f"{name}_count{braces} {running}")
        return out


class ServerMetrics:
    """Observations from the connections (the event loop; a lock, since scrapes may come
    from another thread in `ServerThread` users)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.decode: dict[str, Histogram] = {}
        self.errors: Counter[str] = Counter()
        self.audio_received_s = 0.0
        self.audio_decoded_s: dict[str, float] = {}

    def observe_decode(self, kind: str, seconds: float, audio_s: float) -> None:
        with self._lock:
            self.decode.setdefault(kind, Histogram()).observe(seconds)
            self.audio_decoded_s[kind] = self.audio_decoded_s.get(kind, 0.0) + audio_s

    def received(self, audio_s: float) -> None:
        with self._lock:
            self.audio_received_s += audio_s

    def error(self, kind: str) -> None:
        with self._lock:
            self.errors[kind] += 1

    def render(self, *, gauges: Mapping[str, float], counters: Mapping[str, float],
               errors: Mapping[str, int]) -> str:
        """The whole scrape: ``gauges`` and ``counters`` are the server's own (unprefixed
        names), ``errors`` its error counts by kind, added to the connections'."""
        with self._lock:
            all_errors = Counter(self.errors)
            all_errors.update(errors)
            lines: list[str] = []
            for name, value in gauges.items():
                lines += _family(f"sottovoce_{name}", "gauge", [("", value)])
            for name, value in counters.items():
                lines += _family(f"sottovoce_{name}_total", "counter", [("", value)])
            lines += _family("sottovoce_audio_received_seconds_total", "counter",
                             [("", self.audio_received_s)])
            lines += _family("sottovoce_audio_decoded_seconds_total", "counter",
                             [(f'kind="{k}"', v) for k, v in sorted(self.audio_decoded_s.items())])
            lines += _family("sottovoce_errors_total", "counter",
                             [(f'kind="{k}"', v) for k, v in sorted(all_errors.items())])
            lines.append("# TYPE sottovoce_decode_seconds histogram")
            for kind, histogram in sorted(self.decode.items()):
                lines += histogram.lines("sottovoce_decode_seconds", f'kind="{kind}"')
        return "\n".join(lines) + "\n"


def _family(name: str, kind: str, samples: Iterable[tuple[str, float]]) -> list[str]:
    out = [f"# TYPE {name} {kind}"]
    for labels, value in samples:
        out.append(f"{name}{{{labels}}} {_number(value)}" if labels else f"{name} {_number(value)}")
    return out


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.6f}"


def parse(text: str) -> dict[str, float]:
    """Sample lines back to ``{"name{labels}": value}`` (tests, scripts; comments skipped)."""
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            samples[key] = float(value)
    return samples
