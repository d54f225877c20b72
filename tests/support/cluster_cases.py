"""The Ray half of tests/test_cluster.py: a real two-node Ray cluster on this machine.

Not collected on its own (no ``test_`` prefix): `tests/test_cluster.py` runs it with pytest
inside a private network namespace with only loopback (`unshare --net`), because Ray 2.60 binds
to the machine's own address even when told 127.0.0.1. There, both nodes come up on 127.0.0.1
and all traffic stays on loopback.

Every case compares with the single-machine `sottovoce transcribe` on the same files (SRT: word
times and cue borders included, so nothing is compared loosely).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.asr.budget import DECODE_MEMORY_MB

REPO = Path(__file__).resolve().parents[2]
AUDIO = REPO / "tests" / "audio"
CLIPS = ["jfk-inaugural-1961-excerpt", "arctic-aew-a0001", "ls-dc-1272-128104-0000",
         "cmusphinx-goforward", "ljs-LJ050-0131", "long-ljspeech-LJ001-0001-0032"]
LONG = "long-ljspeech-LJ001-0001-0032"

pytestmark = [pytest.mark.model, pytest.mark.timeout(900)]


def cli(*args: str | Path, wait: bool = True) -> Any:
    command = [sys.executable, "-m", "app.cli", "transcribe", *map(str, args), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if not wait:
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=900)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("inputs")
    for name in CLIPS:
        shutil.copy(AUDIO / f"{name}.flac", folder)
    (folder / "broken.wav").write_bytes(b"RIFF....not audio at all")
    return folder


@pytest.fixture(scope="module")
def reference(inputs: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The single-machine CLI's outputs."""
    out = tmp_path_factory.mktemp("reference")
    done = cli(*(inputs / f"{n}.flac" for n in CLIPS), "-o", out, "--format", "srt")
    assert done.returncode == 0, done.stderr
    return {p.name: p.read_text(encoding="utf-8") for p in out.glob("*.srt")}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two Ray nodes of two CPUs each (the machine's cores, counted twice: each node gets an
    equal share of the decode actors); node death is noticed within about 2 s."""
    from ray.cluster_utils import Cluster

    nodes = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "_system_config": {"health_check_period_ms": 500,
                                          "health_check_failure_threshold": 4}})
    nodes.add_node(num_cpus=2)
    nodes.wait_for_nodes()
    yield nodes
    nodes.shutdown()


def outputs(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in folder.glob("*.srt")}


def summary(folder: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((folder / "sottovoce-summary.json").read_text())
    return doc


def test_two_nodes_give_the_local_outputs_and_a_rerun_does_no_work(
        cluster: Any, inputs: Path, reference: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = cli("--cluster", cluster.address, "--actors", "2", inputs, "-o", out, "--format", "srt")
    assert run.returncode == 1, run.stdout + run.stderr  # 1: broken.wav is reported
    assert outputs(out) == reference
    doc = summary(out)
    print("first run:", json.dumps({k: doc[k] for k in ("counts", "elapsed_s", "ray")}))
    assert doc["counts"] == {"done": len(CLIPS), "skipped": 0, "errors": 1}
    assert doc["errors"][0]["input"].endswith("broken.wav")
    assert "not a readable audio file" in doc["errors"][0]["error"]
    assert doc["ray"]["nodes"] == 2 and doc["audio_s_done"] == doc["audio_s_total"] > 240
    # Each actor decodes under the local runner's byte budget (the long file used it).
    memory = doc["ray"]["decode_memory"]
    assert len(memory) == 2 and all(m["budget_mb"] == DECODE_MEMORY_MB for m in memory)
    assert all(m["peak_mb"] <= m["budget_mb"] for m in memory)
    assert max(m["peak_mb"] for m in memory) > 0
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("*.srt")}

    again = cli("--cluster", cluster.address, inputs, "-o", out, "--format", "srt")
    doc = summary(out)
    assert again.returncode == 1 and doc["counts"] == {"done": 0, "skipped": len(CLIPS),
                                                       "errors": 1}
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.srt")} == stamps
    started = time.monotonic()
    finished = cli("--cluster", cluster.address, *(inputs / f"{n}.flac" for n in CLIPS),
                   "-o", out, "--format", "srt")
    assert finished.returncode == 0 and "ray" not in summary(out)  # never even connected
    print(f"rerun with nothing left: {time.monotonic() - started:.1f} s")


def test_a_worker_node_killed_mid_run_loses_nothing(
        cluster: Any, inputs: Path, reference: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    # Four actors fill both nodes (two CPUs each): the killed node's two cannot restart on the
    # other, so their calls must move to the live ones (engine.cluster.remote.call_any).
    run = cli("--cluster", cluster.address, "--actors", "4", inputs, "-o", out, "--format",
              "srt", wait=False)
    worker = next(n for n in cluster.worker_nodes)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and run.poll() is None:  # kill once decoding is going
        try:
            doc = summary(out)
        except (OSError, ValueError):
            doc = {}
        if doc.get("audio_s_done", 0) > 20 and not (out / f"{LONG}.srt").exists():
            break
        time.sleep(0.2)
    assert run.poll() is None, "the run ended before the node could be killed"
    killed_at = doc["audio_s_done"]
    cluster.remove_node(worker, allow_graceful=False)
    log, _ = run.communicate(timeout=900)
    cluster.add_node(num_cpus=2)  # for any later case
    assert run.returncode == 1, log  # broken.wav only
    doc = summary(out)
    print("fault run:", json.dumps({"killed_at_audio_s": killed_at, "counts": doc["counts"],
                                    "file_task_starts": doc.get("file_task_starts"),
                                    "failovers": sum(d["failovers"] for d in doc["done"]),
                                    "elapsed_s": doc["elapsed_s"]}))
    assert doc["counts"] == {"done": len(CLIPS), "skipped": 0, "errors": 1}
    assert outputs(out) == reference
    retried = doc["file_task_starts"] - (len(CLIPS) + 1) + sum(d["failovers"] for d in doc["done"])
    assert retried > 0, "the node's death cost nothing: it was not killed mid-work"


def test_a_rerun_with_a_new_file_of_the_same_stem_misfiles_nothing(
        cluster: Any, inputs: Path, reference: dict[str, str], tmp_path: Path) -> None:
    """Issue 30, case 3: talk.wav transcribed, then talk.flac (other speech, sorting first)
    added and the same command run again. Before: talk.flac was "skipped" as talk.txt (the
    wav's words), talk.wav redone as talk-2.txt, exit 0; the new file never transcribed."""
    folder, out = tmp_path / "talks", tmp_path / "out"
    folder.mkdir()
    shutil.copy(inputs / f"{CLIPS[0]}.flac", folder / "talk.wav")
    first = cli("--cluster", cluster.address, folder, "-o", out, "--format", "srt")
    assert first.returncode == 0, first.stdout + first.stderr
    shutil.copy(inputs / f"{CLIPS[1]}.flac", folder / "talk.flac")
    again = cli("--cluster", cluster.address, folder, "-o", out, "--format", "srt")
    assert again.returncode == 0, again.stdout + again.stderr
    assert outputs(out) == {"talk.srt": reference[f"{CLIPS[0]}.srt"],
                            "talk.flac.srt": reference[f"{CLIPS[1]}.srt"]}
    doc = summary(out)
    assert doc["state"] == "done" and doc["eta_s"] is None
    assert [(d["input"], d["output"]) for d in doc["done"]] == [
        (str(folder / "talk.flac"), str(out / "talk.flac.srt"))]
    assert [s["output"] for s in doc["skipped"]] == [str(out / "talk.srt")]


def test_an_interrupted_run_says_so_and_counts_every_output(
        cluster: Any, inputs: Path, tmp_path: Path) -> None:
    """Issue 30, case 11. Before: after Ctrl-C the summary kept "state": "running" with an
    ETA and counted fewer done than the outputs on disk."""
    import signal

    out = tmp_path / "out"
    run = cli("--cluster", cluster.address, "--actors", "2", inputs, "-o", out, "--format",
              "srt", wait=False)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and run.poll() is None and not list(out.glob("*.srt")):
        time.sleep(0.2)
    assert run.poll() is None, "the run ended before it could be interrupted"
    run.send_signal(signal.SIGINT)
    log, _ = run.communicate(timeout=300)
    assert run.returncode == 130, log
    assert "interrupted (finished outputs are kept; rerun to resume)" in log
    doc = summary(out)
    assert doc["state"] == "interrupted" and doc["eta_s"] is None
    written = sorted(str(p) for p in out.glob("*.srt"))
    assert sorted(d["output"] for d in doc["done"]) == written and written
