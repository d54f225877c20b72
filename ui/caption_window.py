"""Caption window: frameless, always on top, translucent, large text, the last 1-3 lines.

It must never take keyboard focus, or dictated text would land in it instead of the app the user
is typing into: the window is flagged WindowDoesNotAcceptFocus and shown without activation.
It is moved by dragging anywhere and resized with the grip in the corner.
"""

from __future__ import annotations

import html
from collections import deque
from collections.abc import Callable

from PySide6.QtCore import QPoint, QRectF, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QResizeEvent,
)
from PySide6.QtWidgets import QLabel, QSizeGrip, QVBoxLayout, QWidget

CAPTION_FLAGS = (
    Qt.WindowType.Window
    | Qt.WindowType.FramelessWindowHint
    | Qt.WindowType.WindowStaysOnTopHint
    | Qt.WindowType.WindowDoesNotAcceptFocus
    | Qt.WindowType.Tool
)


class CaptionWindow(QWidget):
    """Shows finished lines plus the utterance in flight (its tentative part dimmed)."""

    def __init__(self, lines: int = 2, font_pt: int = 28, parent: QWidget | None = None) -> None:
        super().__init__(parent, CAPTION_FLAGS)
        self.setObjectName("captionWindow")
        self.setWindowTitle("Sottovoce captions")
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self._finished: deque[str] = deque(maxlen=3)
        self._committed = ""
        self._tentative = ""
        self._max_lines = lines
        self._drag_offset: QPoint | None = None
        self.label = QLabel(self)
        self.label.setWordWrap(False)  # wrapped by _screen_lines, to count visual lines
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom)
        self.label.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.label.setStyleSheet("color: white; background: transparent;")
        self.set_font_size(font_pt)
        self.language_tag = QLabel(self)  # the current language, top right ("EN", "AUTO")
        self.language_tag.setObjectName("captionLanguage")
        self.language_tag.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.language_tag.setStyleSheet("color: #c8c8c8; background: rgba(255,255,255,40); "
                                        "border-radius: 4px; padding: 1px 5px; font-size: 10pt;")
        self.language_tag.hide()
        grip = QSizeGrip(self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 12, 6, 6)
        layout.addWidget(self.label, 1)
        layout.addWidget(grip, 0, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignBottom)
        self.resize(900, 60 + lines * font_pt * 2)

    def place_at_bottom(self) -> None:
        """Bottom centre of the screen, where subtitles are expected (and clear of the main
        window, which opens at the top)."""
        screen = self.screen().availableGeometry()
        self.move(screen.center().x() - self.width() // 2,
                  screen.bottom() - self.height() - screen.height() // 12)

    # -- content -----------------------------------------------------------------------------
    def set_language_tag(self, tag: str, tooltip: str = "") -> None:
        """The current language in the top-right corner ("" hides it)."""
        self.language_tag.setText(tag)
        self.language_tag.setToolTip(tooltip)
        self.language_tag.adjustSize()
        self.language_tag.setVisible(bool(tag))
        self._place_tag()

    def _place_tag(self) -> None:
        self.language_tag.move(self.width() - self.language_tag.width() - 10, 6)

    def set_max_lines(self, lines: int) -> None:
        self._max_lines = max(1, min(3, lines))
        self._render()

    def set_font_size(self, points: int) -> None:
        font = QFont(self.label.font())
        font.setPointSize(points)
        font.setBold(True)
        self.label.setFont(font)

    def show_partial(self, committed: str, tentative: str) -> None:
        self._committed, self._tentative = committed.strip(), tentative.strip()
        self._render()

    def add_final(self, text: str) -> None:
        if text.strip():
            self._finished.append(text.strip())
        self._committed = self._tentative = ""
        self._render()

    def clear(self) -> None:
        self._finished.clear()
        self._committed = self._tentative = ""
        self._render()

    def visible_lines(self) -> list[str]:
        """The plain text of the lines on screen, oldest first (for tests and screenshots)."""
        return [" ".join(word for word, _ in line) for line in self._screen_lines()]

    def _screen_lines(self) -> list[list[tuple[str, bool]]]:
        """The last max_lines lines as displayed: each utterance starts a line and wraps at the
        window's width, so a long sentence never pushes the newest words out of view."""
        metrics = QFontMetrics(self.label.font())
        layout = self.layout()
        margins = layout.contentsMargins() if layout is not None else None
        side = margins.left() + margins.right() if margins else 0
        # The window's width, not the label's: the label is only laid out once shown.
        width = max(self.width() - side, 200) - 4
        utterances = [[(w, False) for w in text.split()] for text in self._finished]
        live = ([(w, False) for w in self._committed.split()]
                + [(w, True) for w in self._tentative.split()])
        if live:
            utterances.append(live)
        lines: list[list[tuple[str, bool]]] = []
        for words in utterances:
            lines.extend(wrap_words(words, lambda text: metrics.horizontalAdvance(text) <= width))
        return lines[-self._max_lines:]

    def _render(self) -> None:
        rendered = []
        for line in self._screen_lines():
            parts = [html.escape(word) if not tentative
                     else f'<span style="color: #b0b0b0;">{html.escape(word)}</span>'
                     for word, tentative in line]
            rendered.append(" ".join(parts))
        self.label.setText("<br>".join(rendered))

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._place_tag()
        self._render()  # the wrap depends on the width

    # -- looks and dragging --------------------------------------------------------------------
    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(0, 0, 0, 170))
        painter.drawRoundedRect(QRectF(self.rect()), 12, 12)
        painter.end()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if event.button() == Qt.MouseButton.LeftButton:
            self._drag_offset = event.globalPosition().toPoint() - self.frameGeometry().topLeft()
            event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if self._drag_offset is not None and event.buttons() & Qt.MouseButton.LeftButton:
            self.move(event.globalPosition().toPoint() - self._drag_offset)
            event.accept()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        self._drag_offset = None


def wrap_words(words: list[tuple[str, bool]],
               fits: Callable[[str], bool]) -> list[list[tuple[str, bool]]]:
    """Greedy word wrap; a word too long for any line gets a line of its own."""
    lines: list[list[tuple[str, bool]]] = []
    for item in words:
        if lines and fits(" ".join(word for word, _ in [*lines[-1], item])):
            lines[-1].append(item)
        else:
            lines.append([item])
    return lines
