"""Latency meter: last chunk latency, session p50/p95, a sparkline of recent chunks, and a lag
light that turns amber then red when decoding falls behind speech. For a remote backend the
network and decode shares of the last chunk are shown separately."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPaintEvent, QPen
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from engine.events import Metrics

SPARK_POINTS = 50
# Lag thresholds: under a second behind feels live; over three, captions trail the speaker.
LAG_AMBER_MS = 1000.0
LAG_RED_MS = 3000.0
GREEN, AMBER, RED = "#2e9e44", "#e0a100", "#d0312d"


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank-with-interpolation percentile (numpy's default 'linear' method)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def lag_color(lag_ms: float) -> str:
    if lag_ms >= LAG_RED_MS:
        return RED
    if lag_ms >= LAG_AMBER_MS:
        return AMBER
    return GREEN


@dataclass(frozen=True)
class LatencySummary:
    last_ms: float
    p50_ms: float
    p95_ms: float
    count: int
    lag_ms: float
    network_ms: float | None
    decode_ms: float


class Sparkline(QWidget):
    """A tiny line chart of the last SPARK_POINTS values, scaled to the largest."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.values: deque[float] = deque(maxlen=SPARK_POINTS)
        self.setMinimumSize(120, 24)
        self.setToolTip(f"chunk latency, last {SPARK_POINTS} chunks")

    def add(self, value: float) -> None:
        self.values.append(value)
        self.update()

    def clear(self) -> None:
        self.values.clear()
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(self.rect()).adjusted(1, 2, -1, -2)
        painter.fillRect(self.rect(), QColor(0, 0, 0, 18))
        if len(self.values) >= 2:
            top = max(self.values) or 1.0
            step = rect.width() / (SPARK_POINTS - 1)
            path = QPainterPath()
            for i, value in enumerate(self.values):
                point = QPointF(rect.left() + i * step,
                                rect.bottom() - rect.height() * value / top)
                if i == 0:
                    path.moveTo(point)
                else:
                    path.lineTo(point)
            painter.setPen(QPen(QColor("#3b7dd8"), 1.5))
            painter.drawPath(path)
        painter.end()


class LatencyMeter(QWidget):
    """Feed it Metrics events (final decodes count towards the statistics)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._finals: list[float] = []
        self._summary: LatencySummary | None = None
        self.last_label = QLabel("— ms")
        self.stats_label = QLabel("p50 — · p95 —")
        self.split_label = QLabel("")
        self.lag_light = QLabel("●")
        self.lag_label = QLabel("lag —")
        self.polish_label = QLabel("")  # the last final's AI polish: its share, or why skipped
        self.polish_label.setObjectName("latencyPolish")
        self.sparkline = Sparkline()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widget in (QLabel("Latency"), self.last_label, self.stats_label, self.sparkline,
                       self.split_label, self.polish_label, self.lag_light, self.lag_label):
            layout.addWidget(widget)
        self.last_label.setObjectName("latencyLast")
        self.last_label.setToolTip("round trip of the last chunk (request sent to text back)")
        self.split_label.setToolTip("remote backend: network share / server decode share")
        self.breakdown: list[tuple[str, float]] = []
        self._set_lag(0.0)

    @property
    def summary(self) -> LatencySummary | None:
        return self._summary

    def reset(self) -> None:
        self._finals.clear()
        self._summary = None
        self.sparkline.clear()
        self.last_label.setText("— ms")
        self.stats_label.setText("p50 — · p95 —")
        self.split_label.setText("")
        self._set_lag(0.0)

    def add_metrics(self, metrics: Metrics) -> None:
        self._set_lag(metrics.lag_ms)
        self.sparkline.add(metrics.chunk_rtt_ms)
        self.last_label.setText(f"{metrics.chunk_rtt_ms:.0f} ms")
        if metrics.network_ms is not None:
            self.split_label.setText(
                f"net {metrics.network_ms:.0f} · decode {metrics.decode_ms:.0f} ms")
        else:
            self.split_label.setText("")
        if metrics.kind == "final":
            self._finals.append(metrics.chunk_rtt_ms)
        pool = self._finals or [metrics.chunk_rtt_ms]
        self._summary = LatencySummary(
            last_ms=metrics.chunk_rtt_ms, p50_ms=percentile(pool, 50),
            p95_ms=percentile(pool, 95), count=len(self._finals), lag_ms=metrics.lag_ms,
            network_ms=metrics.network_ms, decode_ms=metrics.decode_ms)
        self.stats_label.setText(
            f"p50 {self._summary.p50_ms:.0f} · p95 {self._summary.p95_ms:.0f} ms")

    def set_breakdown(self, origin: str, rows: Sequence[tuple[str, float]]) -> None:
        """Where the last final's time went: (step, ms after ``origin``) in order, shown in
        the tooltip with each step's own share."""
        self.breakdown = list(rows)
        lines = [f"Last final, ms after the {origin.replace('_', ' ')}:"]
        previous = 0.0
        for name, ms in self.breakdown:
            lines.append(f"{name.replace('_', ' ')}: {ms:+.0f} ({ms - previous:+.0f})")
            previous = ms
        self.setToolTip("\n".join(lines))

    def set_polish(self, ms: float, skipped: str, line: str) -> None:
        """The last final's AI polish: its share ("LLM +420 ms"), or the cause the raw text was
        used (``skipped``: "timeout", "words", ...); ``line`` in words for the tooltip."""
        self.polish_label.setText(f"LLM raw ({skipped})" if skipped else f"LLM +{ms:.0f} ms")
        self.polish_label.setToolTip(line)

    def _set_lag(self, lag_ms: float) -> None:
        color = lag_color(lag_ms)
        self.lag_color = color
        self.lag_light.setStyleSheet(f"color: {color};")
        self.lag_label.setText(f"lag {lag_ms / 1000:.1f} s")
        self.lag_light.setToolTip("green: live · amber: over 1 s behind · red: over 3 s behind")
        self.lag_light.setAlignment(Qt.AlignmentFlag.AlignCenter)
