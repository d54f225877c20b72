"""End to end, as a person uses the app: `sottovoce` runs on the (virtual) X display with the
PulseAudio virtual microphone; another app's text field has focus; the push-to-talk hotkey is
held with xdotool while a real speech recording plays into the microphone; on release the
dictated words must arrive in that other app, and "Copy transcript" must put the transcript on
the clipboard. Screenshots of the main and caption windows go to tests/artifacts/.

Needs: X display, xdotool, xclip, ImageMagick `import`, PulseAudio with the null sink `vspk` and
its remapped source `vmic` as default (.ci/desktop.sh sets all of this up).
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.evaluation import error_rate

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "tests" / "artifacts"
SPEECH = "jfk-inaugural-1961-excerpt.wav"
WER_BOUND = 0.25  # tiny.en through the virtual mic measured 0.0-0.05 here; margin for CPU noise
STARTUP_TIMEOUT_S = 120

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]


def _missing_prerequisite() -> str | None:
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
    """A subprocess whose stderr lines are collected by a reader thread, so the test can wait
    for a log line with a timeout instead of sleeping."""

    def __init__(self, args: list[str], env: dict[str, str], stdout: int | None = None) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.log: list[str] = []
        self.proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=stdout,
                                     stderr=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line.rstrip())
            self.lines.put(line)

    def wait_for(self, needle: str, timeout: float) -> str:
        """The first log line containing needle, already logged or arriving within timeout."""
        for line in list(self.log):
            if needle in line:
                return line
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if needle in line:
                return line
        raise AssertionError(f"no {needle!r} within {timeout} s; log:\n" + "\n".join(self.log))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def xdotool(*args: str) -> str:
    result = subprocess.run(["xdotool", *args], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, f"xdotool {' '.join(args)} failed: {result.stderr}"
    return result.stdout.strip()


def window_id(title: str) -> str:
    # --sync waits until the window exists; the first match is the top-level window.
    return xdotool("search", "--sync", "--name", title).splitlines()[0]


def focus(wid: str) -> None:
    xdotool("windowfocus", "--sync", wid)


def screenshot(wid: str, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    subprocess.run(["import", "-window", wid, str(path)], check=True, timeout=30)
    return path


def wait_for_text(path: Path, timeout: float) -> str:
    """The other app's field, as it writes it; waits for the paste to land there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text(encoding="utf-8").strip():
            time.sleep(0.3)  # let the rest of a multi-event paste arrive
            return path.read_text(encoding="utf-8")
        time.sleep(0.1)
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def test_push_to_talk_dictation_into_another_app(shared_audio, manifest, tmp_path):
    reason = _missing_prerequisite()
    if reason:
        pytest.skip(reason)
    reference = next(e.text for e in manifest if e.path.name == SPEECH)
    env = dict(os.environ, SOTTOVOCE_CONTROL_SOCKET=str(tmp_path / "control.sock"),
               PYTHONUNBUFFERED="1")
    # The null sink renders ~2 s ahead of real time unless a low-latency reader is attached
    # (design.md section 7); with it, the app hears the speech as it is played.
    reader = subprocess.Popen(["parec", "--device=vspk.monitor", "--latency-msec=10"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    field_file = tmp_path / "field.txt"
    target = LoggedProcess([sys.executable, str(REPO / "tests" / "e2e_target_app.py"),
                            str(field_file)], env, stdout=subprocess.PIPE)
    app = LoggedProcess([sys.executable, "-m", "app.cli", "-v"], env)
    try:
        app.wait_for("engine state listening", STARTUP_TIMEOUT_S)
        app.wait_for("global hotkey", 30)
        main_wid = window_id("^Sottovoce$")
        focus(main_wid)
        xdotool("key", "--clearmodifiers", "ctrl+k")  # View > Caption window
        caption_wid = window_id("^Sottovoce captions$")
        target_wid = window_id("^Sottovoce E2E target$")
        focus(target_wid)

        xdotool("keydown", "ctrl+alt+space")
        app.wait_for("talking", 30)
        subprocess.run(["paplay", "--device=vspk", str(shared_audio / SPEECH)], check=True,
                       timeout=60)
        time.sleep(0.5)  # a person lets go just after the last word, not during it
        xdotool("keyup", "space", "alt", "ctrl")
        app.wait_for("final", 60)
        app.wait_for("Pasted", 30)
        dictated = wait_for_text(field_file, 30)
        wer = error_rate([reference], [dictated])
        print(f"dictated into the other app: {dictated!r} (WER {wer:.3f})")
        assert wer <= WER_BOUND, f"WER {wer:.2f} for {dictated!r}"
        assert xdotool("getwindowfocus") == target_wid  # the app never took focus

        screenshot(caption_wid, "caption_window.png")
        screenshot(main_wid, "main_window.png")
        focus(main_wid)
        xdotool("key", "--clearmodifiers", "ctrl+shift+c")  # File > Copy transcript
        app.wait_for("copied", 30)
        clip = subprocess.run(["xclip", "-o", "-selection", "clipboard"], capture_output=True,
                              text=True, timeout=10).stdout
        assert error_rate([reference], [clip]) <= WER_BOUND, clip
        assert clip.strip() == dictated.strip()

        xdotool("key", "--clearmodifiers", "ctrl+q")
        assert app.proc.wait(60) == 0, "\n".join(app.log)
    finally:
        app.stop()
        target.stop()
        reader.terminate()
        reader.wait(10)
