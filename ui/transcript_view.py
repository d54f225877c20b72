"""The live transcript: finished utterances with their time stamps, then the utterance in flight
with its committed words in the normal colour and its tentative words grey.

A line the hallucination checks flagged (imported files: text on a no-speech chunk, a looped
decode...) is shown, not hidden, behind a warning marker and in the suspect colour; its tooltip
names the checks. The text itself stays unmarked in copies and exports (JSON keeps the flags).

Finished lines are appended once and never rewritten, so a selection the user is making survives
the partial updates (only the trailing live block is replaced).
"""

from __future__ import annotations

import html

from PySide6.QtCore import QEvent
from PySide6.QtGui import QHelpEvent, QTextCursor
from PySide6.QtWidgets import QTextEdit, QToolTip, QWidget

from engine.types import samples_to_seconds

TENTATIVE_COLOR = "#8a8a8a"
STAMP_COLOR = "#6a7f99"
SUSPECT_COLOR = "#b5651d"
SUSPECT_MARKER = "\u26a0"  # ⚠


def format_stamp(samples: int) -> str:
    """Session time as [m:ss] (or [h:mm:ss] past an hour)."""
    total = int(samples_to_seconds(samples))
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"[{hours}:{minutes:02d}:{seconds:02d}]"
    return f"[{minutes}:{seconds:02d}]"


class TranscriptView(QTextEdit):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("transcript")
        self.setReadOnly(True)
        self.setAcceptRichText(False)
        self._lines: list[tuple[int, str]] = []  # (start sample, text) of finished utterances
        self._flags: list[tuple[str, ...]] = []  # per line: the checks it failed (usually none)
        self._live_start = 0  # document position where the live block begins
        self.live_committed = ""
        self.live_tentative = ""

    @property
    def lines(self) -> list[tuple[int, str]]:
        return list(self._lines)

    @property
    def flagged_lines(self) -> list[tuple[int, str, tuple[str, ...]]]:
        """(start, text, flags) of the lines shown with the suspect marker."""
        return [(start, text, flags)
                for (start, text), flags in zip(self._lines, self._flags, strict=True) if flags]

    def plain_text(self) -> str:
        """The finished transcript, one utterance a line, without stamps."""
        return "\n".join(text for _, text in self._lines)

    def selected_text(self) -> str:
        # QTextCursor uses U+2029 between paragraphs; callers want ordinary newlines.
        return self.textCursor().selectedText().replace("\u2029", "\n")

    def clear_transcript(self) -> None:
        self._lines.clear()
        self._flags.clear()
        self.live_committed = self.live_tentative = ""
        self.clear()
        self._live_start = 0

    def remove_last(self, count: int = 1) -> None:
        """Take back the last `count` finished lines ("scratch that"); the rest is redrawn."""
        kept = list(zip(self._lines, self._flags, strict=True))[:max(0, len(self._lines) - count)]
        self.clear_transcript()
        for (start, text), flags in kept:
            self.add_final(start, text, flags)

    def show_partial(self, start: int, committed: str, tentative: str) -> None:
        self.live_committed, self.live_tentative = committed.strip(), tentative.strip()
        body = html.escape(self.live_committed)
        if self.live_tentative:
            body += f' <span style="color:{TENTATIVE_COLOR};">{html.escape(self.live_tentative)}</span>'
        self._replace_live(self._line_html(start, body) if body else "")

    def add_final(self, start: int, text: str, flags: tuple[str, ...] = ()) -> None:
        text = text.strip()
        self.live_committed = self.live_tentative = ""
        self._replace_live("")
        if not text:
            return
        self._lines.append((start, text))
        self._flags.append(tuple(flags))
        body = html.escape(text)
        if flags:
            why = html.escape("may be hallucinated: " + ", ".join(flags))
            body = (f'<span style="color:{SUSPECT_COLOR};" title="{why}">'
                    f"{SUSPECT_MARKER} {body}</span>")
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        if cursor.position() > 0:
            cursor.insertBlock()
        cursor.insertHtml(self._line_html(start, body))
        self._live_start = cursor.position()
        self._scroll_to_end()

    def _line_html(self, start: int, body_html: str) -> str:
        return f'<span style="color:{STAMP_COLOR};">{format_stamp(start)}</span>&nbsp;{body_html}'

    def _replace_live(self, line_html: str) -> None:
        cursor = QTextCursor(self.document())
        cursor.setPosition(self._live_start)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        if line_html:
            if self._live_start > 0:
                cursor.insertBlock()
            cursor.insertHtml(line_html)
            self._scroll_to_end()

    def viewportEvent(self, event: QEvent) -> bool:  # noqa: N802 - Qt override
        # QTextEdit keeps a span's title as its tooltip but never shows it; the why of a flag
        # is worth a hover.
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            tip = self.cursorForPosition(event.pos()).charFormat().toolTip()
            if tip:
                QToolTip.showText(event.globalPos(), tip, self)
                return True
            QToolTip.hideText()
        return super().viewportEvent(event)

    def _scroll_to_end(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())
