"""A real Wayland compositor for tests: headless sway (wlroots), started as an unprivileged user
when the tests run as root (sway refuses root), with its own XDG_RUNTIME_DIR. Clients started
by the tests (the app, the target field, wtype, wl-copy), root included, connect to its socket
by its full path. Shared by tests/test_e2e_wayland.py and bench/app_latency.py.

Every wait is bounded and `SwaySession.stop()` kills sway's whole process group, so a failing
test cannot leave a compositor behind or hang CI.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from app.desktop import wayland_globals

SWAY_USER = "sottovoce-ci"
START_TIMEOUT_S = 30.0
TOOLS = ("sway", "swaymsg", "wtype", "wl-copy", "wl-paste")


def missing_prerequisite() -> str | None:
    """Why sway can't run here, or None when it can."""
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"needs {tool} (apt: sway wtype wl-clipboard)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "needs runuser (util-linux) to start sway as an unprivileged user"
    return None


def sway_user() -> pwd.struct_passwd | None:
    """The unprivileged user sway runs as when we are root (created on first use)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SWAY_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", SWAY_USER], check=True, timeout=30)
        return pwd.getpwnam(SWAY_USER)


class SwaySession:
    """A headless sway with one 1280x800 output; `env` is what its clients need. Its files go
    to a fresh folder in the system temp dir (the sway user must reach it: pytest's own temp
    folders are private to root), removed by `stop()`."""

    def __init__(self) -> None:
        self.folder = folder = Path(tempfile.mkdtemp(prefix="sottovoce-sway-"))
        self.runtime = folder / "run"
        self.runtime.mkdir(parents=True, exist_ok=True)
        self.runtime.chmod(0o700)
        config = folder / "sway.config"
        config.write_text("output HEADLESS-1 resolution 1280x800\ndefault_border none\n"
                          "focus_on_window_activation none\n", encoding="utf-8")
        user = sway_user()
        if user is not None:
            for path in (folder, self.runtime, config):
                os.chown(path, user.pw_uid, user.pw_gid)
        env = {"HOME": str(folder), "XDG_RUNTIME_DIR": str(self.runtime),
               "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "WLR_BACKENDS": "headless", "WLR_RENDERER": "pixman",
               "WLR_LIBINPUT_NO_DEVICES": "1"}
        command = ["sway", "-c", str(config)]
        if user is not None:
            command = ["runuser", "-u", SWAY_USER, "--", "env", "-i",
                       *(f"{k}={v}" for k, v in env.items()), *command]
        self.log_path = folder / "sway.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(command, env=env, stdout=log, stderr=log,
                                         start_new_session=True)
        self.socket = self.runtime / "wayland-1"
        self._wait_until_up()
        self.swaysock = next(self.runtime.glob("sway-ipc.*.sock"))

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if "xdg_wm_base" in wayland_globals(str(self.socket)) and any(
                        self.runtime.glob("sway-ipc.*.sock")):
                    return
            except OSError:
                pass
            time.sleep(0.1)  # sway creates its sockets while it starts
        self.stop()
        raise RuntimeError("sway did not start:\n" + self.log_path.read_text(errors="replace"))

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """``base`` as a native Wayland client of this sway (no X display)."""
        env = {k: v for k, v in base.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        env.update(WAYLAND_DISPLAY=str(self.socket), SWAYSOCK=str(self.swaysock),
                   QT_QPA_PLATFORM="wayland", XDG_SESSION_TYPE="wayland",
                   XDG_CURRENT_DESKTOP="sway")
        return env

    def msg(self, *args: str) -> str:
        done = subprocess.run(["swaymsg", "-s", str(self.swaysock), *args], capture_output=True,
                              text=True, timeout=10)
        if done.returncode != 0:
            raise AssertionError(f"swaymsg {' '.join(args)}: {done.stdout}{done.stderr}")
        return done.stdout

    def windows(self) -> list[dict[str, object]]:
        """Every window (tiled and floating) in sway's tree."""
        found: list[dict[str, object]] = []

        def walk(node: dict[str, object]) -> None:
            if node.get("pid") is not None:
                found.append(node)
            for key in ("nodes", "floating_nodes"):
                for child in node.get(key, []):  # type: ignore[attr-defined]
                    walk(child)

        walk(json.loads(self.msg("-t", "get_tree")))
        return found

    def window(self, title: str, timeout: float = 60.0) -> dict[str, object]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node in self.windows():
                if node.get("name") == title:
                    return node
            time.sleep(0.1)  # windows map asynchronously
        raise AssertionError(f"no window {title!r} within {timeout} s: "
                             f"{[n.get('name') for n in self.windows()]}")

    def focused_title(self) -> str | None:
        return next((str(n.get("name")) for n in self.windows() if n.get("focused")), None)

    def focus(self, title: str) -> None:
        self.window(title)
        self.msg(f'[title="^{title}$"] focus')

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)
