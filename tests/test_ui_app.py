"""The app as a process on the X display: `--input FILE --exit-after-input` (the smoke test the
bundle uses) transcribes a real speech file with the bundled model and exits 0; SIGTERM quits
cleanly; the control socket drives push-to-talk (`sottovoce ptt press|release`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from support.desktop_driver import REPO, start_app

from bench.evaluation import error_rate

pytestmark = [
    pytest.mark.skipif(not os.environ.get("DISPLAY"),
                       reason="needs an X display: run under Xvfb (source .ci/desktop.sh)"),
    pytest.mark.model, pytest.mark.timeout(300),
]


@pytest.fixture
def app_env(tmp_path):
    return dict(os.environ, SOTTOVOCE_CONTROL_SOCKET=str(tmp_path / "control.sock"),
                PYTHONUNBUFFERED="1")


def test_input_file_is_transcribed_and_the_app_exits(manifest, app_env):
    entry = next(e for e in manifest if e.path.name == "jfk-inaugural-1961-excerpt.wav")
    app = start_app(app_env, "--input", str(entry.path), "--exit-after-input")
    try:
        assert app.proc.wait(180) == 0, "\n".join(app.log)
    finally:
        app.stop()
    finals = [line.split(": ", 2)[-1] for line in app.log if "app.final_route: final" in line]
    assert finals, "\n".join(app.log)
    assert error_rate([entry.text], [" ".join(finals)]) <= 0.25
    assert any("engine state stopped" in line for line in app.log)


def test_sigterm_and_control_socket(app_env, tmp_path):
    app = start_app(app_env)
    try:
        app.wait_for("engine state listening", 180)
        for command, reply in ((["ptt", "press"], "talking=1"), (["ptt", "release"], "talking=0"),
                               (["toggle"], "talking=1")):
            result = subprocess.run([sys.executable, "-m", "app.cli", "-v", *command],
                                    cwd=REPO, env=app_env, capture_output=True, text=True,
                                    timeout=60)
            assert result.returncode == 0, result.stderr
            assert reply in result.stdout
        app.wait_for("push-to-talk press: talking=True", 30)
        app.proc.send_signal(signal.SIGTERM)
        assert app.proc.wait(60) == 0, "\n".join(app.log)
    finally:
        app.stop()
    assert not (tmp_path / "control.sock").exists()
