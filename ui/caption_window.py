"""Caption overlay: frameless, always on top, the last 1..N lines of captions, readable on any
background, with scrollback.

It must never take keyboard focus, or dictated text would land in it instead of the app the user
is typing into: the window is flagged WindowDoesNotAcceptFocus and shown without activation.
Scrollback is the mouse wheel over the window (X11 sends wheel events to the window under the
pointer, focused or not) or the `scroll_older` / `scroll_newer` slots (the tray and the control
socket's keys). Looks (`CaptionStyle`): font and size, white text on a box of adjustable
opacity or with a black outline and no box, docked at the top or bottom of the screen or
floating where it was dragged, click-through on request (the pointer then reaches the app
below, wheel included). Partial text is grey and italic, final text white; with two sources
each line starts with its source's label; a line's detected language is shown when translating,
its English translation in green under it.

A final that goes on with its source's previous line amends it (`engine.core.captions.amend`):
captions may be revised, text typed into another app never is.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from PySide6.QtCore import QPoint, QPointF, QRectF, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPaintEvent,
    QPen,
    QResizeEvent,
    QWheelEvent,
)
from PySide6.QtWidgets import QLabel, QSizeGrip, QWidget

from engine.core.captions import CaptionLine, amend
from ui.caption_style import COLORS, CaptionStyle, Run, merge_runs
from ui.qt_compat import keep_none_alive

__all__ = ["CaptionStyle", "CaptionWindow"]

CAPTION_FLAGS = (
    Qt.WindowType.Window
    | Qt.WindowType.FramelessWindowHint
    | Qt.WindowType.WindowStaysOnTopHint
    | Qt.WindowType.WindowDoesNotAcceptFocus
    | Qt.WindowType.Tool
)
SCROLLBACK_LINES = 2000
MARGIN = 14
@dataclass
class _Line:
    """One line as shown: a (possibly amended) final, or a source's partial."""

    caption: CaptionLine
    final: bool = True
    tentative: str = ""  # partial only: the words that may still change
    keys: set[str] = field(default_factory=set)  # the finals it holds (for translations)


class CaptionWindow(QWidget):
    """See the module docstring."""

    def __init__(self, lines: int = 2, font_pt: int = 28, parent: QWidget | None = None) -> None:
        keep_none_alive()  # this window paints from Python: many void calls (ui.qt_compat)
        super().__init__(parent, CAPTION_FLAGS)
        self.setObjectName("captionWindow")
        self.setWindowTitle("Sottovoce captions")
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.style_ = CaptionStyle(lines=lines, font_pt=font_pt)
        self._lines: list[_Line] = []
        self._partials: dict[str, _Line] = {}
        self._sources: list[str] = []  # labels in order of appearance (their colours)
        self._offset = 0  # rows scrolled back from the newest
        self._drag_offset: QPoint | None = None
        self._font = QFont()
        self._grip = QSizeGrip(self)
        self.language_tag = QLabel(self)  # the current language, top right ("EN", "AUTO")
        self.language_tag.setObjectName("captionLanguage")
        self.language_tag.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.language_tag.setStyleSheet("color: #c8c8c8; background: rgba(255,255,255,40); "
                                        "border-radius: 4px; padding: 1px 5px; font-size: 10pt;")
        self.language_tag.hide()
        self.apply_style(self.style_)
        self.resize(900, self._height())

    # -- looks ---------------------------------------------------------------------------------
    def apply_style(self, style: CaptionStyle) -> None:
        old, self.style_ = self.style_, style
        font = QFont(style.font_family) if style.font_family else QFont()
        font.setPointSize(style.font_pt)
        font.setBold(True)
        self._font = font
        if old.click_through != style.click_through:
            shown = self.isVisible()
            self.setWindowFlag(Qt.WindowType.WindowTransparentForInput, style.click_through)
            if shown:  # changing a window flag hides the window
                self.show()
        self._grip.setVisible(not style.click_through)
        self.resize(self.width(), self._height())
        if old.dock != style.dock or style.dock != "floating":
            self.dock()
        self.update()

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
        self.apply_style(replace(self.style_, lines=max(1, min(20, lines))))

    def set_font_size(self, points: int) -> None:
        self.apply_style(replace(self.style_, font_pt=points))

    def _line_height(self, kind: str = "final") -> int:
        return QFontMetrics(self._font_for(kind)).lineSpacing()

    def _height(self) -> int:
        return 2 * MARGIN + self.style_.lines * self._line_height() + 6

    def dock(self) -> None:
        """Move to the dock's place: top or bottom centre of the screen (80 % of its width),
        or where it is when floating."""
        screen = self.screen()
        if self.style_.dock == "floating" or screen is None:
            return
        area = screen.availableGeometry()
        width = max(400, area.width() * 4 // 5)
        self.resize(width, self._height())
        x = area.center().x() - width // 2
        y = area.top() + area.height() // 40 if self.style_.dock == "top" else (
            area.bottom() - self._height() - area.height() // 12)
        self.move(x, y)

    # -- content -------------------------------------------------------------------------------
    def show_partial(self, committed: str, tentative: str, source: str = "") -> None:
        self._note_source(source)
        if not (committed.strip() or tentative.strip()):
            self._partials.pop(source, None)
        else:
            self._partials[source] = _Line(CaptionLine(source, "", committed.strip(), 0, 0),
                                           final=False, tentative=tentative.strip())
        self._changed()

    def add_final(self, text: str | CaptionLine) -> None:
        """A final: plain text (one source), or a `CaptionLine` (its source, times, language)."""
        line = text if isinstance(text, CaptionLine) else CaptionLine("", "", text.strip(), 0, 0)
        self._partials.pop(line.source, None)
        self._note_source(line.source)
        if line.text.strip():
            line = replace(line, text=line.text.strip())
            last = self._lines[-1] if self._lines else None
            joined = amend(last.caption, line) if last is not None and line.key else None
            if last is not None and joined is not None:
                last.caption = joined
                last.keys.add(line.key)
            else:
                self._lines.append(_Line(line, keys={line.key}))
                if self._offset:
                    self._offset += len(self._rows_of(self._lines[-1], self._width()))
            del self._lines[:-SCROLLBACK_LINES]
        self._changed()

    def add_translation(self, key: str, text: str) -> None:
        for line in reversed(self._lines):
            if key in line.keys:
                joined = " ".join(t for t in (line.caption.translation, text.strip()) if t)
                line.caption = replace(line.caption, translation=joined)
                self._changed()
                return

    def clear(self) -> None:
        self._lines.clear()
        self._partials.clear()
        self._offset = 0
        self._changed()

    def _note_source(self, source: str) -> None:
        if source and source not in self._sources:
            self._sources.append(source)

    def _changed(self) -> None:
        self._offset = min(self._offset, max(0, len(self._all_rows()) - self.style_.lines))
        self.update()

    # -- scrollback ----------------------------------------------------------------------------
    def scroll_older(self, rows: int = 1) -> None:
        self._offset += rows
        self._changed()

    def scroll_newer(self, rows: int = 1) -> None:
        self._offset = max(0, self._offset - rows)
        self._changed()

    def scroll_to_live(self) -> None:
        self._offset = 0
        self._changed()

    @property
    def scrolled_back(self) -> int:
        return self._offset

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802 - Qt override
        notches = event.angleDelta().y() / 120
        if notches > 0:
            self.scroll_older(max(1, round(notches)))
        elif notches < 0:
            self.scroll_newer(max(1, round(-notches)))
        event.accept()

    # -- layout into rows ----------------------------------------------------------------------
    def caption_texts(self) -> list[str]:
        """Every final line kept (scrollback included), labelled, one string each, oldest
        first: the transcript as the overlay shows it, before wrapping."""
        labelled = len(self._sources) > 1
        return [line.caption.labelled() if labelled else line.caption.text for line in self._lines]

    def visible_lines(self) -> list[str]:
        """The plain text of the rows on screen, oldest first (for tests and screenshots)."""
        return ["".join(text for text, _ in row) for row in self._visible_rows()]

    def visible_rows(self) -> list[list[Run]]:
        """The rows on screen with each run's kind ("partial" for text that may change)."""
        return self._visible_rows()

    def _visible_rows(self) -> list[list[Run]]:
        rows = self._all_rows()
        end = len(rows) - self._offset
        return rows[max(0, end - self.style_.lines):end]

    def _width(self) -> int:
        return max(self.width() - 2 * MARGIN, 200)

    def _all_rows(self) -> list[list[Run]]:
        width = self._width()
        rows: list[list[Run]] = []
        for line in [*self._lines, *self._partials.values()]:
            rows.extend(self._rows_of(line, width))
        return rows

    def _rows_of(self, line: _Line, width: int) -> list[list[Run]]:
        caption = line.caption
        head: list[Run] = []
        if caption.source and len(self._sources) > 1:
            index = self._sources.index(caption.source) % 2 if caption.source in self._sources else 0
            head.append((f"{caption.source}: ", f"label{index}"))
        if self.style_.languages and caption.language:
            into = " → en" if self.style_.translated and caption.language != "en" else ""
            head.append((f"[{caption.language}{into}] ", "tag"))
        words = [(w, "final" if line.final else "partial") for w in caption.text.split()]
        words += [(w, "partial") for w in line.tentative.split()]
        rows = self._wrap(head, words, width)
        if caption.translation:
            tag = [("[en] ", "tag")] if self.style_.languages else []
            rows += self._wrap(tag, [(w, "translation") for w in caption.translation.split()],
                               width)
        return rows

    def _wrap(self, head: list[Run], words: list[Run], width: int) -> list[list[Run]]:
        def advance(runs: list[Run]) -> int:
            return sum(QFontMetrics(self._font_for(kind)).horizontalAdvance(text)
                       for text, kind in runs)

        rows: list[list[Run]] = []
        current = list(head)
        for text, kind in words:
            spaced = bool(current) and not current[-1][0].endswith(" ")
            piece = (" " + text if spaced else text, kind)
            if current and current != head and advance([*current, piece]) > width:
                rows.append(current)
                current = [(text, kind)]
            else:
                current.append(piece)
        if current and (current != head or not rows):
            rows.append(current)
        return [merge_runs(row) for row in rows if row]

    def _font_for(self, kind: str) -> QFont:
        font = QFont(self._font)
        if kind == "partial":
            font.setItalic(True)
        elif kind == "translation":
            font.setItalic(True)
            font.setBold(False)
        elif kind in ("tag", "more"):
            font.setBold(False)
            font.setPointSize(max(8, self.style_.font_pt * 2 // 3))
        return font

    # -- painting ------------------------------------------------------------------------------
    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if self.style_.background == "box":
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(0, 0, 0, round(255 * self.style_.opacity / 100)))
            painter.drawRoundedRect(QRectF(self.rect()), 12, 12)
        rows = self._visible_rows()
        line_height = self._line_height()
        y = self.height() - MARGIN - line_height * len(rows)
        for row in rows:
            self._paint_row(painter, row, MARGIN, y + QFontMetrics(self._font).ascent())
            y += line_height
        if self._offset:  # top right, clear of the text (which starts at the left)
            note = f"▲ {self._offset} back · scroll down for live"
            metrics = QFontMetrics(self._font_for("more"))
            self._paint_row(painter, [(note, "more")],
                            self.width() - MARGIN - metrics.horizontalAdvance(note) - 12,
                            metrics.ascent() + 3)
        painter.end()

    def _paint_row(self, painter: QPainter, row: list[Run], x: float, baseline: float) -> None:
        outline = self.style_.background == "outline"
        for text, kind in row:
            font = self._font_for(kind)
            color = QColor(COLORS.get(kind, COLORS["final"]))
            if outline:
                path = QPainterPath()
                path.addText(QPointF(x, baseline), font, text)
                painter.setPen(QPen(QColor(0, 0, 0, 230), max(2.5, font.pointSizeF() / 5),
                                    Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap,
                                    Qt.PenJoinStyle.RoundJoin))
                painter.setBrush(Qt.BrushStyle.NoBrush)
                painter.drawPath(path)
                painter.fillPath(path, color)
            else:
                painter.setFont(font)
                painter.setPen(color)
                painter.drawText(QPointF(x, baseline), text)
            x += QFontMetrics(font).horizontalAdvance(text)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._place_tag()
        self._grip.move(self.width() - self._grip.width(), self.height() - self._grip.height())
        self.update()  # the wrap depends on the width

    # -- dragging (floats the window) -----------------------------------------------------------
    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if event.button() == Qt.MouseButton.LeftButton:
            self._drag_offset = event.globalPosition().toPoint() - self.frameGeometry().topLeft()
            event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if self._drag_offset is not None and event.buttons() & Qt.MouseButton.LeftButton:
            self.style_ = replace(self.style_, dock="floating")
            self.move(event.globalPosition().toPoint() - self._drag_offset)
            event.accept()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        self._drag_offset = None

