"""A multi-line text field in its own process for the input-method tests (tests/test_ibus_route.py):
started with QT_IM_MODULE=ibus, so its text comes through ibus-daemon as a real app's does.

Prints "ready" once shown, then `text <the whole text as JSON>` on every change (one line each,
so line breaks and tabs in the field survive), which the test waits on."""

from __future__ import annotations

import json
import sys

from PySide6.QtWidgets import QApplication, QPlainTextEdit


def main() -> int:
    app = QApplication(sys.argv[:1])
    field = QPlainTextEdit()
    field.setWindowTitle(sys.argv[1] if len(sys.argv) > 1 else "Sottovoce IM target")
    field.setTabChangesFocus(False)
    field.resize(700, 200)
    field.textChanged.connect(
        lambda: print("text " + json.dumps(field.toPlainText()), flush=True))
    field.show()
    field.activateWindow()
    field.setFocus()
    print("ready", flush=True)
    return int(app.exec())


if __name__ == "__main__":
    sys.exit(main())
