"""Screenshots of widgets as people see them, saved under tests/artifacts."""

from __future__ import annotations

from pathlib import Path

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def busy_shot(widget, name: str) -> Path:  # type: ignore[no-untyped-def]
    """The overlay drawn over a busy picture (colour bands and black and white text), the way
    it sits on a video or a web page, saved as a PNG."""
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QColor, QFont, QLinearGradient, QPainter, QPixmap

    shot = widget.grab()
    canvas = QPixmap(shot.width() + 40, shot.height() + 40)
    painter = QPainter(canvas)
    gradient = QLinearGradient(0, 0, canvas.width(), canvas.height())
    for at, colour in ((0, "#f4f1e8"), (0.35, "#3a7bd5"), (0.7, "#ffffff"), (1, "#222222")):
        gradient.setColorAt(at, QColor(colour))
    painter.fillRect(canvas.rect(), gradient)
    painter.setFont(QFont("DejaVu Sans", 13))
    for row in range(0, canvas.height(), 22):
        painter.setPen(QColor("#000000" if row % 44 else "#ffffff"))
        painter.drawText(8, row + 16, "Lorem ipsum dolor sit amet, consectetur adipiscing "
                         "elit, sed do eiusmod tempor incididunt ut labore " * 2)
    painter.drawPixmap(QPoint(20, 20), shot)
    painter.end()
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"caption_{name}.png"
    assert canvas.save(str(path))
    return path
