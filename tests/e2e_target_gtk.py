"""A GTK 3 text field in its own process, the GTK twin of tests/e2e_target_app.py: run with the
system python3 (python3-gi, gir1.2-gtk-3.0), not the app's venv. GTK exports its widgets on the
accessibility bus (AT-SPI) by itself.

    python3 tests/e2e_target_gtk.py OUT_FILE [--password] [--title TITLE]

On every change it writes the field's text to OUT_FILE and prints `text <monotonic> <length>`;
it prints "ready" once its window is shown. `--password` makes it a password entry.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--password", action="store_true")
    parser.add_argument("--title", default="Sottovoce GTK target")
    args = parser.parse_args()
    window = Gtk.Window(title=args.title)
    window.set_default_size(700, 60)
    window.move(40, 720)
    entry = Gtk.Entry()
    entry.set_visibility(not args.password)
    window.add(entry)

    def changed(widget: Gtk.Entry) -> None:
        text = widget.get_text()
        args.out.write_text(text, encoding="utf-8")
        print(f"text {time.monotonic():.6f} {len(text)}", flush=True)

    entry.connect("changed", changed)
    window.connect("destroy", Gtk.main_quit)
    window.show_all()
    GLib.idle_add(lambda: print("ready", flush=True) and False)
    Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
