"""A GTK 3 multi-line text field in its own process (the system python3 with PyGObject), for the
input-method tests: started with GTK_IM_MODULE=ibus, as GNOME's own apps talk to ibus-daemon.
Same protocol as tests/im_target_app.py: "ready", then `text <JSON of the whole text>` on every
change."""

from __future__ import annotations

import json
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gtk  # noqa: E402


def main() -> int:
    window = Gtk.Window(title=sys.argv[1] if len(sys.argv) > 1 else "Sottovoce GTK IM target")
    window.set_default_size(700, 200)
    view = Gtk.TextView()
    buffer = view.get_buffer()
    buffer.connect("changed", lambda b: print(
        "text " + json.dumps(b.get_text(b.get_start_iter(), b.get_end_iter(), True)),
        flush=True))
    window.add(view)
    window.connect("destroy", Gtk.main_quit)
    window.show_all()
    view.grab_focus()
    print("ready", flush=True)
    Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
