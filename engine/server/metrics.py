"""The server's numbers for a fleet's Prometheus, written by ``prometheus_client``.

`ServerMetrics` holds one registry per server (tests run several in one process): what only the
connections see (decode time per request and kind, audio received and decoded), the server's
own gauges and counters read at scrape time through a callback, and the process collector's
``process_*`` families (resident memory, CPU seconds, open files; Linux). ``GET /metrics``
serves `ServerMetrics.render` (the text exposition format 0.0.4); ``GET /metrics.json`` (or
``Accept: application/json``) the older JSON.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client import Counter as CounterMetric
from prometheus_client import Histogram as HistogramMetric
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

# What `generate_latest` writes for these names (plain ASCII): the classic text format, which
# every Prometheus reads.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds: a partial of a second of audio on a GPU (~10 ms) to a long final on a busy CPU.
DECODE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True)
class Scrape:
    """The server's own numbers at scrape time: ``gauges`` and ``counters`` by unprefixed
    name (counters without ``_total``), ``errors`` its error counts by kind."""

    gauges: Mapping[str, float] = field(default_factory=dict)
    counters: Mapping[str, float] = field(default_factory=dict)
    errors: Mapping[str, int] = field(default_factory=dict)


class ServerMetrics:
    """Observations from the connections (the event loop) and, through ``scrape``, the
    server's state, in one registry. ``prometheus_client`` metrics are thread-safe; the
    error counts keep a lock of their own."""

    def __init__(self, scrape: Callable[[], Scrape] = Scrape) -> None:
        self.registry = CollectorRegistry()
        self._scrape = scrape
        self._lock = threading.Lock()
        self._errors: Counter[str] = Counter()
        self.decode = HistogramMetric("sottovoce_decode_seconds", "Decode time per request",
                                      ["kind"], buckets=DECODE_BUCKETS, registry=self.registry)
        self.audio_received = CounterMetric(
            "sottovoce_audio_received_seconds", "Audio received from clients",
            registry=self.registry)
        self.audio_decoded = CounterMetric(
            "sottovoce_audio_decoded_seconds", "Audio decoded, by request kind (partials "
            "re-decode growing utterances)", ["kind"], registry=self.registry)
        self.registry.register(_ScrapeCollector(self))
        ProcessCollector(registry=self.registry)

    def observe_decode(self, kind: str, seconds: float, audio_s: float) -> None:
        self.decode.labels(kind=kind).observe(seconds)
        self.audio_decoded.labels(kind=kind).inc(audio_s)

    def received(self, audio_s: float) -> None:
        self.audio_received.inc(audio_s)

    def error(self, kind: str) -> None:
        with self._lock:
            self._errors[kind] += 1

    def errors(self, more: Mapping[str, int]) -> Counter[str]:
        """The connections' error counts by kind plus ``more`` (the server's)."""
        with self._lock:
            every = Counter(self._errors)
        every.update(more)
        return every

    def render(self) -> bytes:
        """The whole scrape, in the text exposition format (`CONTENT_TYPE`)."""
        return generate_latest(self.registry)


class _ScrapeCollector:
    """The server's gauges, counters and errors, read when Prometheus scrapes."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        scrape = self._metrics._scrape()
        for name, value in scrape.gauges.items():
            yield GaugeMetricFamily(f"sottovoce_{name}", name.replace("_", " "), value=value)
        for name, value in scrape.counters.items():
            yield CounterMetricFamily(f"sottovoce_{name}", name.replace("_", " "), value=value)
        errors = CounterMetricFamily("sottovoce_errors", "Errors by kind", labels=["kind"])
        for kind, count in sorted(self._metrics.errors(scrape.errors).items()):
            errors.add_metric([kind], count)
        yield errors
