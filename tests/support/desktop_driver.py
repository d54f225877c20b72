"""Drive the real app on a (virtual) desktop as a person would: processes whose log lines can be
awaited, xdotool for keys and focus, screenshots. Shared by tests/test_e2e_desktop.py and
bench/app_latency.py."""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET_APP = REPO / "tests" / "e2e_target_app.py"
TARGET_TITLE = "Sottovoce E2E target"


def missing_prerequisite() -> str | None:
    """Why this machine can't run the desktop checks, or None when it can."""
    if not os.environ.get("DISPLAY"):
        return "needs an X display: source .ci/desktop.sh (Xvfb)"
    for tool in ("xdotool", "xclip", "paplay", "parec", "pactl", "import"):
        if shutil.which(tool) is None:
            return f"needs {tool} (apt: xdotool xclip pulseaudio-utils imagemagick)"
    sources = subprocess.run(["pactl", "list", "short", "sources"], capture_output=True,
                             text=True, timeout=10)
    if sources.returncode != 0 or "vmic" not in sources.stdout:
        return "needs PulseAudio with the virtual mic 'vmic': source .ci/desktop.sh"
    return None


class LoggedProcess:
    """A subprocess whose output lines (stderr, or stdout when asked) are collected by a reader
    thread, so callers wait for a line with a timeout instead of sleeping."""

    def __init__(self, args: list[str], env: dict[str, str], *, read_stdout: bool = False) -> None:
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.log: list[str] = []
        self.proc = subprocess.Popen(
            args, cwd=REPO, env=env, text=True,
            stdout=subprocess.PIPE if read_stdout else None,
            stderr=subprocess.DEVNULL if read_stdout else subprocess.PIPE)
        stream = self.proc.stdout if read_stdout else self.proc.stderr
        self._reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._reader.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.log.append(line.rstrip("\n"))
            self.lines.put((time.monotonic(), line.rstrip("\n")))

    def wait_for(self, needle: str, timeout: float, *, fresh: bool = False) -> str:
        """The first line containing needle; unless `fresh`, lines already seen count too."""
        if not fresh:
            for line in list(self.log):
                if needle in line:
                    return line
        return self.next_matching(needle, timeout)[1]

    def next_matching(self, needle: str, timeout: float) -> tuple[float, str]:
        """The next line (arriving from now on) containing needle, with its arrival time."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                at, line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if needle in line:
                return at, line
        raise AssertionError(f"no {needle!r} within {timeout} s; log:\n" + "\n".join(self.log))

    def drain(self) -> None:
        while not self.lines.empty():
            self.lines.get_nowait()

    def rss_mib(self) -> tuple[float, float]:
        """(current RSS, peak RSS) in MiB, from /proc (Linux)."""
        fields = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def xdotool(*args: str) -> str:
    result = subprocess.run(["xdotool", *args], capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise AssertionError(f"xdotool {' '.join(args)} failed: {result.stderr}")
    return result.stdout.strip()


def window_id(title_regex: str) -> str:
    # --sync waits until such a window exists.
    return xdotool("search", "--sync", "--name", title_regex).splitlines()[0]


def focus(wid: str) -> None:
    xdotool("windowfocus", "--sync", wid)


def screenshot(wid: str, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["import", "-window", wid, str(path)], check=True, timeout=30)
    return path


def play(wav: Path) -> None:
    """Play into the virtual speaker; its monitor is the app's microphone."""
    subprocess.run(["paplay", "--device=vspk", str(wav)], check=True, timeout=120)


def start_monitor_reader() -> subprocess.Popen[bytes]:
    """The null sink renders ~2 s ahead of real time unless a low-latency reader is attached;
    with it, the app hears the speech as it is played."""
    return subprocess.Popen(["parec", "--device=vspk.monitor", "--latency-msec=10"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_target(env: dict[str, str], out_file: Path) -> LoggedProcess:
    target = LoggedProcess([sys.executable, str(TARGET_APP), str(out_file)], env,
                           read_stdout=True)
    target.wait_for("ready", 60)
    return target


def start_app(env: dict[str, str], *extra: str) -> LoggedProcess:
    return LoggedProcess([sys.executable, "-m", "app.cli", "-v", *extra], env)
