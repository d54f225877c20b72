"""Bulk transcription: one process vs a 1-node and a 2-node Ray cluster on this machine.

    python bench/cluster.py --hours 1 --out cluster.json     # re-runs itself in `unshare --net`
    python bench/cluster.py --smoke --out /tmp/cluster.json  # one short file

The set: the repository's speech corpus (tests/audio: the 4 min reading and the English clips),
repeated under new names until it holds ``--hours`` of audio. Three runs of
`sottovoce transcribe -o DIR --format txt` over it, each from a fresh output folder:

- ``single``: no ``--cluster``: one process, the local runner (two decode streams on the CPU);
- ``ray_1node``: a Ray cluster of one node pinned (CPU affinity of its processes, which their
  workers inherit) to half the cores;
- ``ray_2node``: two nodes, each pinned to its own half.

Each node thus gets an equal share of the cores; the 2-node cluster has the 1-node cluster's
cores twice. Reported per run: wall time, audio hours per hour (``audio_h / wall_h``), the same
without Ray's start-up (cluster already up; the summary's ``startup_s`` covers connect + actors
loading their models), and the scaling efficiency ``rate(2 nodes) / (2 x rate(1 node))``.
Writes the JSON and a PNG next to it.

Outputs: the two Ray runs must agree file for file (``ray_outputs_identical``). Against the
unpinned single process, some short files differ in a word's case or a final "." vs "!":
CTranslate2 decodes differently in a process whose CPU affinity is one core (measured:
`taskset -c 0 sottovoce transcribe` gives exactly the Ray runs' text on those files). Unpinned,
the cluster's outputs equal the local CLI's (tests/support/cluster_cases.py).

Ray runs inside a private network namespace with only loopback: Ray 2.60 binds to the machine's
own address even when told 127.0.0.1 (needs root or user namespaces).

On a GPU node (none here), from the code: `engine.cluster.driver.default_actors` starts one
decode actor per GPU (``num_gpus=1``), `local_layout` makes each file a single decode stream
with `choose_batch_size("cuda")` chunks per call (16 per ~4 GiB free, up to 32), and
``FILES_PER_ACTOR`` = 2 files in flight per actor keep its queue fed while the other file plans
(decode + VAD on the node's CPUs, `num_cpus=0` tasks). A faster actor needs more files in flight
to stay busy; ``--actors`` and that constant are the knobs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, TEST_MANIFEST, print_table, write_json
from evaluation import read_manifest

NETNS_FLAG = "SOTTOVOCE_BENCH_NETNS"


def corpus_files() -> list[tuple[Path, float]]:
    entries = read_manifest(TEST_MANIFEST)
    return [(e.path, e.duration_s) for e in entries if (e.language or "en") == "en"]


def build_set(folder: Path, hours: float) -> float:
    """Links to the corpus under new names until ``hours`` of audio; returns the seconds."""
    files, total, n = corpus_files(), 0.0, 0
    while total < hours * 3600:
        for path, seconds in files:
            n += 1
            (folder / f"{n:05d}-{path.name}").symlink_to(path)
            total += seconds
            if total >= hours * 3600:
                break
    return total


def transcribe(inputs: Path, out: Path, cluster: str | None) -> dict[str, Any]:
    command = [sys.executable, "-m", "app.cli", "transcribe", "--no-progress", "--format", "txt",
               "-o", str(out)]
    if cluster:
        command += ["--cluster", cluster, str(inputs)]
    else:
        command += sorted(str(p) for p in inputs.iterdir())
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"transcribe failed ({done.returncode}): {done.stderr[-2000:]}")
    summary = out / "sottovoce-summary.json"
    doc = json.loads(summary.read_text()) if summary.exists() else {}
    if summary.exists():
        summary.unlink()  # not an output: keep the folders comparable
    return {"wall_s": round(wall, 2), "summary": doc}


def start_cluster(cores: list[set[int]]) -> Any:
    """One Ray node per core set, each node's processes pinned to its set."""
    from ray.cluster_utils import Cluster

    every = os.sched_getaffinity(0)
    cluster = None
    try:
        for i, share in enumerate(cores):
            os.sched_setaffinity(0, share)  # the node's processes inherit it
            if i == 0:
                cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": len(share)})
            else:
                assert cluster is not None
                cluster.add_node(num_cpus=len(share))
    finally:
        os.sched_setaffinity(0, every)
    assert cluster is not None
    cluster.wait_for_nodes()
    return cluster


def run(args: argparse.Namespace) -> dict[str, Any]:
    cores = sorted(os.sched_getaffinity(0))
    half = max(1, len(cores) // 2)
    shares = [set(cores[:half]), set(cores[half:2 * half]) or set(cores[:half])]
    work = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    inputs = work / "in"
    inputs.mkdir()
    audio_s = build_set(inputs, args.hours)
    results: dict[str, Any] = {"audio_s": round(audio_s, 1), "files": len(list(inputs.iterdir())),
                               "cores": len(cores), "node_cores": half, "runs": {}}
    runs = results["runs"]
    runs["single"] = transcribe(inputs, work / "single", None)
    for name, nodes in (("ray_1node", shares[:1]), ("ray_2node", shares)):
        started = time.perf_counter()
        cluster = start_cluster(nodes)
        cluster_s = time.perf_counter() - started
        try:
            runs[name] = transcribe(inputs, work / name, cluster.address)
        finally:
            cluster.shutdown()
        runs[name]["cluster_start_s"] = round(cluster_s, 2)
    for r in runs.values():
        r["audio_h_per_h"] = round(audio_s / r["wall_s"], 2)
        startup = r["summary"].get("ray", {}).get("startup_s", 0.0)
        r["ray_startup_s"] = round(startup + r.get("cluster_start_s", 0.0), 2)
        r["audio_h_per_h_after_startup"] = round(audio_s / max(1e-9, r["wall_s"] - startup), 2)
        r.pop("summary")
    one, two = runs["ray_1node"], runs["ray_2node"]
    results["scaling_efficiency"] = round(two["audio_h_per_h"] / (2 * one["audio_h_per_h"]), 3)
    results["scaling_efficiency_after_startup"] = round(
        two["audio_h_per_h_after_startup"] / (2 * one["audio_h_per_h_after_startup"]), 3)
    texts = {name: {p.name: p.read_text() for p in (work / name).glob("*.txt")} for name in runs}
    results["ray_outputs_identical"] = texts["ray_1node"] == texts["ray_2node"]
    results["differing_from_unpinned_single"] = {
        name: sorted(k for k in texts["single"] if texts[name].get(k) != texts["single"][k])
        for name in runs if name != "single"}
    if results["ray_outputs_identical"] or not args.keep_differing:
        shutil.rmtree(work, ignore_errors=True)
    else:
        results["work_dir"] = str(work)
    return results


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["runs"])
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], [results["runs"][n]["audio_h_per_h"] for n in names], 0.4,
           label="wall (with Ray start-up)")
    ax.bar([x + 0.2 for x in xs], [results["runs"][n]["audio_h_per_h_after_startup"]
                                   for n in names], 0.4, label="after start-up")
    ax.set_xticks(list(xs), names)
    ax.set_ylabel("audio hours per hour")
    ax.set_title(f"{results['audio_s'] / 3600:.2f} h of audio, {results['cores']} cores, "
                 f"{results['node_cores']} per node; 2-node efficiency "
                 f"{results['scaling_efficiency']:.2f}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=1.0, help="audio in the set (1.0)")
    parser.add_argument("--out", type=Path, default=Path("cluster.json"))
    parser.add_argument("--keep-differing", action="store_true",
                        help="keep the outputs when the runs disagree (for a look)")
    parser.add_argument("--smoke", action="store_true", help="one short file (seconds of audio)")
    args = parser.parse_args()
    if args.smoke:
        args.hours = 0.001
    if os.environ.get(NETNS_FLAG) != "1":  # Ray stays on loopback only inside a namespace
        inner = f"ip link set lo up && exec {sys.executable} {' '.join(map(str, sys.argv))}"
        os.execvpe("unshare", ["unshare", "--net", "bash", "-c", inner],
                   {**os.environ, NETNS_FLAG: "1"})
    results = run(args)
    write_json(args.out, results)
    plot(results, args.out.with_suffix(".png"))
    print_table(("run", "wall s", "audio h/h", "after start-up", "Ray start-up s"),
                [(name, r["wall_s"], r["audio_h_per_h"], r["audio_h_per_h_after_startup"],
                  r["ray_startup_s"]) for name, r in results["runs"].items()],
                title=f"{results['files']} files, {results['audio_s']} s of audio")
    print(f"2-node scaling efficiency {results['scaling_efficiency']}, Ray outputs identical: "
          f"{results['ray_outputs_identical']}")


if __name__ == "__main__":
    main()
