"""`sottovoce transcribe --cluster` (engine.cluster): the plain parts here, the Ray parts on a
real two-node Ray cluster in tests/support/cluster_cases.py, run inside a private network namespace."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cluster.inputs import MEDIA_SUFFIXES, is_done, list_inputs
from engine.cluster.progress import Tally

REPO = Path(__file__).resolve().parents[1]


def test_listing_walks_folders_keeps_their_layout_and_names_collisions(tmp_path: Path) -> None:
    src = tmp_path / "in"
    for name in ("b.flac", "a.wav", "notes.txt", ".hidden.wav", "sub/a.mp3", "sub/c.MKV",
                 ".git/x.wav"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(b"")
    lone = tmp_path / "elsewhere" / "a.ogg"
    lone.parent.mkdir()
    lone.write_bytes(b"")
    out = tmp_path / "out"
    items = list_inputs([src, lone], out, "srt")
    assert [(i.path.relative_to(tmp_path).as_posix(), i.output.relative_to(out).as_posix())
            for i in items] == [
        ("in/a.wav", "a.srt"), ("in/b.flac", "b.srt"), ("in/sub/a.mp3", "sub/a.srt"),
        ("in/sub/c.MKV", "sub/c.srt"), ("elsewhere/a.ogg", "a.ogg.srt")]
    assert list_inputs([src, lone], out, "srt") == items  # a rerun maps the same way
    assert ".flac" in MEDIA_SUFFIXES and ".txt" not in MEDIA_SUFFIXES


def test_an_input_is_done_once_its_output_exists(tmp_path: Path) -> None:
    (tmp_path / "a.wav").write_bytes(b"")
    item = list_inputs([tmp_path / "a.wav"], tmp_path / "out", "txt")[0]
    assert not is_done(item)
    item.output.parent.mkdir()
    item.output.write_text("text")  # outputs are only written atomically: present = complete
    assert is_done(item)


def test_the_summary_accounts_for_every_input_once() -> None:
    tally = Tally(total_s=100.0)
    tally.done.append({"input": "a", "audio_s": 60.0})
    tally.finished_s, tally.partial_s = 60.0, 50.0  # never more than the total
    tally.errors.append({"input": "b", "error": "unreadable"})
    tally.skipped.append({"input": "c"})
    doc = tally.summary("running", {"inputs": 3})
    assert doc["counts"] == {"done": 1, "skipped": 1, "errors": 1}
    assert doc["audio_s_done"] == 100.0 and doc["state"] == "running"
    assert {"elapsed_s", "audio_hours_per_hour", "eta_s"} <= set(doc)


def test_a_ctrl_c_between_an_outputs_write_and_its_record_waits_for_the_record() -> None:
    """The driver writes each output and adds it to the tally inside `ctrl_c_after_this`.
    A Ctrl-C in between once left a .srt on disk that the "interrupted" summary did not list
    (CI, 3 December); now it is held until the entry is in, then raised as it would have been."""
    from engine.cluster.driver import ctrl_c_after_this

    steps: list[str] = []
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), ctrl_c_after_this():
        steps.append("output written")
        signal.raise_signal(signal.SIGINT)
        steps.append("entry recorded")
    assert steps == ["output written", "entry recorded"]
    assert signal.getsignal(signal.SIGINT) is before
    with ctrl_c_after_this():  # no Ctrl-C: nothing raised
        steps.append("next")
    assert steps[-1] == "next"


NO_RAY = """
import sys
import app.cli, app.gui_main, app.commands.transcribe, engine.files, engine.server.server
code = app.cli.main(["transcribe", sys.argv[1]])
assert code == 1, code
loaded = sorted(m for m in sys.modules if m == "ray" or m.startswith(("ray.", "engine.cluster")))
print("LOADED", loaded)
"""


def test_without_cluster_nothing_imports_ray(tmp_path: Path) -> None:
    """The app, its bundle's entry points and a plain `sottovoce transcribe` never load Ray
    (pyproject.toml's import contracts say the same statically)."""
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"not audio")
    out = subprocess.run([sys.executable, "-c", NO_RAY, str(bad)], cwd=REPO, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert "LOADED []" in out.stdout


def test_cluster_needs_an_output_folder(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    assert main(["transcribe", "--cluster", "local", "x.wav"]) == 2
    assert "--cluster needs -o DIR" in capsys.readouterr().err


def _netns_ok() -> str | None:
    """Why the Ray cases cannot run here, or None."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs unshare and ip (util-linux, iproute2)"
    probe = subprocess.run(["unshare", "--net", "ip", "link", "set", "lo", "up"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"unshare --net not permitted here ({probe.stderr.strip()[:120]})"
    return None


@pytest.mark.model
@pytest.mark.timeout(1200)
def test_ray_cluster_cases_in_a_loopback_only_network() -> None:
    """tests/support/cluster_cases.py inside `unshare --net` (Ray 2.60 would otherwise bind to the
    machine's own address): outputs identical to the local CLI on two nodes, a rerun that does
    no work, a worker node killed mid-run without losing or changing an output."""
    pytest.importorskip("ray", reason="the cluster extra is not installed: pip install -e '.[cluster]'")
    reason = _netns_ok()
    if reason:
        pytest.skip(reason)
    inner = (f"ip link set lo up && exec {sys.executable} -m pytest -q -s -p no:cacheprovider"
             f" {REPO / 'tests' / 'support' / 'cluster_cases.py'}")
    run = subprocess.run(["unshare", "--net", "bash", "-c", inner], cwd=REPO, text=True,
                         capture_output=True, timeout=1150,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    report = "\n".join(line for line in run.stdout.splitlines()
                       if not any(noise in line for noise in ("network_util", "Token auth")))
    print(report)
    assert run.returncode == 0, report[-4000:] + run.stderr[-2000:]
    assert "4 passed" in report
