"""History: past sessions from the autosave journal, searchable; one can be reopened in the main
window (to read, copy or export it), and any utterance or a whole session copied.

The search box filters the sessions to those with a matching utterance and lists the matching
utterances, the matches highlighted (the search itself is engine.journal.search_lines: every
term, case-insensitive). Without a query the whole selected session is listed, one line per
utterance.

An utterance that was AI-polished shows the polished text (what was inserted) with the raw text
under it; "Use polished" / "Use raw" hand either to ``reinsert_requested`` (the app makes it the
text paste-last inserts into the focused application).
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QClipboard, QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.journal import LineMatch, Span, search_lines
from ui.qt_compat import emit

ROLE = Qt.ItemDataRole.UserRole
RAW_ROLE = Qt.ItemDataRole.UserRole + 1
HIGHLIGHT = "background-color: #ffe36e; color: #000;"


def highlighted(text: str, spans: tuple[Span, ...]) -> str:
    """Rich text of ``text`` with the spans marked (everything else escaped)."""
    parts, last = [], 0
    for start, end in spans:
        parts.append(html.escape(text[last:start]))
        parts.append(f'<span style="{HIGHLIGHT}">{html.escape(text[start:end])}</span>')
        last = end
    parts.append(html.escape(text[last:]))
    return "".join(parts)


class HistoryDialog(QDialog):
    """``sessions``: (label, path, text) per session, newest first; the text holds one line per
    utterance. Reopen emits the path; copies go to the clipboard and are announced by
    ``copied`` (the text)."""

    reopen_requested = Signal(object)  # Path
    export_requested = Signal(object)  # Path: export the session (format, labels, range)
    copied = Signal(str)
    reinsert_requested = Signal(str)

    def __init__(self, sessions: list[tuple[str, Path, str]],
                 parent: QWidget | None = None,
                 raw_texts: dict[Path, list[str | None]] | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("historyDialog")
        self.setWindowTitle("Sottovoce history")
        self.resize(860, 480)
        self._sessions = [(label, path, text.splitlines()) for label, path, text in sessions]
        # Per session, per line: the raw text of a polished utterance (None: not polished).
        self._raw = raw_texts or {}
        self.search = QLineEdit()
        self.search.setObjectName("historySearch")
        self.search.setPlaceholderText("Search all sessions")
        self.search.setClearButtonEnabled(True)
        self.list = QListWidget()
        self.entries = QListWidget()  # the selected session's utterances (or its matches)
        self.entries.setObjectName("historyEntries")
        self.entries.setWordWrap(True)
        self.status = QLabel()
        self.copy_entry_button = QPushButton("Copy utterance")
        self.copy_session_button = QPushButton("Copy session")
        self.export_button = QPushButton("Export…")
        self.use_polished_button = QPushButton("Use polished")
        self.use_raw_button = QPushButton("Use raw")
        for button in (self.use_polished_button, self.use_raw_button):
            button.setToolTip("Make it the text the paste-last hotkey inserts into the "
                              "focused application")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.open_button = buttons.addButton("Open", QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(self.copy_entry_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.copy_session_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.export_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.export_button.clicked.connect(self._export)
        buttons.addButton(self.use_polished_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.use_raw_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.use_polished_button.clicked.connect(lambda: self._reinsert(raw=False))
        self.use_raw_button.clicked.connect(lambda: self._reinsert(raw=True))
        self.search.textChanged.connect(self._filter)
        self.list.currentItemChanged.connect(lambda _c, _p: self._show_entries())
        self.list.itemDoubleClicked.connect(lambda _item: self._reopen())
        self.entries.itemDoubleClicked.connect(lambda _item: self.copy_entry())
        self.entries.currentItemChanged.connect(lambda _c, _p: self._update_buttons())
        self.copy_entry_button.clicked.connect(self.copy_entry)
        self.copy_session_button.clicked.connect(self.copy_session)
        buttons.accepted.connect(self._reopen)
        buttons.rejected.connect(self.reject)
        panes = QHBoxLayout()
        panes.addWidget(self.list, 2)
        panes.addWidget(self.entries, 3)
        layout = QVBoxLayout(self)
        layout.addWidget(self.search)
        layout.addLayout(panes)
        layout.addWidget(self.status)
        layout.addWidget(buttons)
        self._filter("")

    # -- what is shown -------------------------------------------------------------------------
    def query(self) -> str:
        return self.search.text().strip()

    def _filter(self, _text: str) -> None:
        query = self.query()
        self.list.clear()
        total = 0
        for index, (label, _path, lines) in enumerate(self._sessions):
            found = search_lines(lines, query) if query else []
            if query and not found:
                continue
            total += len(found)
            more = f" · {len(found)} match{'es' if len(found) > 1 else ''}" if query else ""
            item = QListWidgetItem(label + more)
            item.setData(ROLE, (index, found))
            self.list.addItem(item)
        if not self._sessions:
            self.status.setText("No saved sessions yet. Dictated text is saved automatically "
                                "as you go.")
        elif query:
            self.status.setText(f"{total} matching utterance{'s' if total != 1 else ''} in "
                                f"{self.list.count()} session{'s' if self.list.count() != 1 else ''}")
        else:
            self.status.setText(f"{len(self._sessions)} sessions")
        if self.list.count():
            self.list.setCurrentRow(0)
        self._show_entries()

    def _show_entries(self) -> None:
        self.entries.clear()
        item = self.list.currentItem()
        if item is not None:
            index, found = item.data(ROLE)
            lines = self._sessions[index][2]
            matches: list[LineMatch] = found or [LineMatch(i, line, ())
                                                 for i, line in enumerate(lines)]
            raws = self._raw.get(self._sessions[index][1], [])
            for match in matches:
                self._add_entry(match, raws[match.index] if match.index < len(raws) else None)
            if self.entries.count():
                self.entries.setCurrentRow(0)
        self._update_buttons()

    def _add_entry(self, match: LineMatch, raw: str | None = None) -> None:
        entry = QListWidgetItem()
        entry.setData(ROLE, match.text)
        entry.setData(RAW_ROLE, raw)
        shown = highlighted(match.text, match.spans)
        if raw is not None:
            shown += f'<br><span style="color: #777;">raw: {html.escape(raw)}</span>'
        label = QLabel(shown)
        label.setTextFormat(Qt.TextFormat.RichText)
        label.setWordWrap(True)
        label.setContentsMargins(4, 3, 4, 3)
        # Wrapped to the list's width (a wrapped label's own size hint ignores it).
        width = max(120, self.entries.viewport().width() - 4)
        entry.setSizeHint(QSize(width, label.heightForWidth(width)))
        self.entries.addItem(entry)
        self.entries.setItemWidget(entry, label)

    def entry_texts(self) -> list[str]:
        """The utterances listed now (all of the session's, or its matches)."""
        return [self.entries.item(i).data(ROLE) for i in range(self.entries.count())]

    def _update_buttons(self) -> None:
        has_session = self.list.currentItem() is not None
        self.open_button.setEnabled(has_session)
        self.copy_session_button.setEnabled(has_session)
        self.export_button.setEnabled(has_session)
        entry = self.entries.currentItem()
        self.copy_entry_button.setEnabled(entry is not None)
        self.use_polished_button.setEnabled(entry is not None)
        self.use_raw_button.setEnabled(entry is not None and entry.data(RAW_ROLE) is not None)

    def _reinsert(self, raw: bool) -> None:
        item = self.entries.currentItem()
        if item is None:
            return
        text = item.data(RAW_ROLE) if raw else item.data(ROLE)
        if text:
            self.status.setText("Ready: press the paste-last hotkey in the application")
            emit(self.reinsert_requested, text)

    # -- actions -------------------------------------------------------------------------------
    def copy_entry(self) -> None:
        item = self.entries.currentItem()
        if item is not None:
            self._copy(item.data(ROLE))

    def copy_session(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            self._copy("\n".join(self._sessions[item.data(ROLE)[0]][2]))

    def _copy(self, text: str) -> None:
        clipboard = QGuiApplication.clipboard()
        clipboard.setText(text, QClipboard.Mode.Clipboard)
        if clipboard.supportsSelection():
            clipboard.setText(text, QClipboard.Mode.Selection)
        words = len(text.split())
        self.status.setText(f"Copied {words} word{'s' if words != 1 else ''} to the clipboard")
        emit(self.copied, text)

    def _export(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            emit(self.export_requested, self._sessions[item.data(ROLE)[0]][1])

    def _reopen(self) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        emit(self.reopen_requested, self._sessions[item.data(ROLE)[0]][1])
        self.accept()
