"""The "other app" of the end-to-end test and the latency bench: one text field in its own
process and window.

On every change it writes the field's text to the file named on the command line and prints
`text <monotonic seconds> <length>` to stdout (CLOCK_MONOTONIC is shared by all processes on
Linux, so the bench can time text arrival against its own key release). It prints "ready" once
its window is shown.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from PySide6.QtWidgets import QApplication, QLineEdit


def main() -> int:
    out = Path(sys.argv[1])
    app = QApplication(sys.argv[:1])
    field = QLineEdit()
    field.setWindowTitle("Sottovoce E2E target")
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
