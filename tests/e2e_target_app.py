"""The "other app" of the end-to-end test and the latency bench: one text field in its own
process and window.

On every change it writes the field's text to the file named on the command line and prints
`text <monotonic seconds> <length>` to stdout (CLOCK_MONOTONIC is shared by all processes on
Linux, so the bench can time text arrival against its own key release). It prints "ready" once
its window is shown. `--password`: a password field; `--no-paste`: a field that ignores
paste (as some apps do), so a paste that was "sent" never arrives; `--read-only`: one that
takes nothing; `--title` names the window.
With QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1 it is on the accessibility bus (tests/test_verified_insert.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from PySide6.QtGui import QKeyEvent, QKeySequence
from PySide6.QtWidgets import QApplication, QLineEdit


class NoPasteField(QLineEdit):
    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt's name
        if event.matches(QKeySequence.StandardKey.Paste):
            return
        super().keyPressEvent(event)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--password", action="store_true")
    parser.add_argument("--no-paste", action="store_true")
    parser.add_argument("--read-only", action="store_true")
    parser.add_argument("--title", default="Sottovoce E2E target")
    args = parser.parse_args()
    out = args.out
    app = QApplication(sys.argv[:1])
    field = NoPasteField() if args.no_paste else QLineEdit()
    if args.password:
        field.setEchoMode(QLineEdit.EchoMode.Password)
    field.setReadOnly(args.read_only)
    field.setWindowTitle(args.title)
    field.resize(700, 60)
    field.move(40, 620)

    def changed(text: str) -> None:
        out.write_text(text, encoding="utf-8")
        print(f"text {time.monotonic():.6f} {len(text)}", flush=True)

    field.textChanged.connect(changed)
    field.show()
    print("ready", flush=True)
    return int(app.exec())


if __name__ == "__main__":
    sys.exit(main())
