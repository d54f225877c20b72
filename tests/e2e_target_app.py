"""The "other app" of the end-to-end test: one text field in its own process and window.

It writes the field's text to the file named on the command line on every change, and prints
"ready" once its window is shown, so the test can wait on it without polling the screen.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtWidgets import QApplication, QLineEdit


def main() -> int:
    out = Path(sys.argv[1])
    app = QApplication(sys.argv[:1])
    field = QLineEdit()
    field.setWindowTitle("Sottovoce E2E target")
    field.resize(700, 60)
    field.move(40, 700)
    field.textChanged.connect(lambda text: out.write_text(text, encoding="utf-8"))
    field.show()
    print("ready", flush=True)
    return int(app.exec())


if __name__ == "__main__":
    sys.exit(main())
