"""A desktop of its own for each pytest-xdist worker after the first.

Tests on the virtual desktop share what a real session shares: the focused window, the
clipboard, the keyboard layout, the default microphone. Two workers on one desktop would type
into each other's windows, so every worker but ``gw0`` (which keeps the desktop the test command
brought up) starts its own from the same recipe, ``.ci/desktop.sh``, and stops it at the end.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What .ci/desktop.sh exports; a worker's own desktop replaces every one of them.
DESKTOP_ENV = ("DBUS_SESSION_BUS_ADDRESS", "DBUS_SESSION_BUS_PID", "GNOME_KEYRING_CONTROL",
               "SOTTOVOCE_KEYRING_DATA", "DISPLAY", "XDG_RUNTIME_DIR", "PULSE_SERVER",
               "SOTTOVOCE_DESKTOP_DIR", "SOTTOVOCE_DISPLAY")


def start(worker: str) -> Path:
    """Bring up a desktop for `worker` and point this process's environment at it."""
    folder = Path(tempfile.mkdtemp(prefix=f"sottovoce-desktop-{worker}-"))
    env = {key: value for key, value in os.environ.items() if key not in DESKTOP_ENV}
    # "auto": Xvfb picks a free display number itself, so workers starting together never clash.
    env.update(SOTTOVOCE_DESKTOP_DIR=str(folder), SOTTOVOCE_DISPLAY="auto")
    done = subprocess.run(["bash", "-c", ". .ci/desktop.sh >/dev/null 2>&1; env -0"], env=env,
                          cwd=REPO, capture_output=True, check=True, timeout=120)
    started = dict(entry.split("=", 1) for entry in done.stdout.decode().split("\0")
                   if "=" in entry)
    for key in DESKTOP_ENV:
        os.environ.pop(key, None)
        if key in started:
            os.environ[key] = started[key]
    return folder


def stop(folder: Path) -> None:
    """End every process that was started with this desktop's folder in its environment (Xvfb,
    the buses, the keyring, the sound server and anything a test left behind)."""
    marker = f"SOTTOVOCE_DESKTOP_DIR={folder}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if marker in (proc / "environ").read_bytes().split(b"\0"):
                os.kill(int(proc.name), signal.SIGTERM)
        except (OSError, ValueError):
            continue  # gone already, or not ours to read
    shutil.rmtree(folder, ignore_errors=True)
