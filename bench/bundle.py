"""The PyInstaller bundle against the same code run from the venv: cold-start wall times.

    packaging/build_bundle.sh                      # or .ci/bundle.sh; builds dist/sottovoce/
    python bench/bundle.py --repeat 5 --out bench/results/bundle.json

Each command starts a fresh process, as a user's does, in two ways in the same run:
  frozen   dist/sottovoce/sottovoce ARGS         (the one-folder bundle)
  source   python -m app.cli ARGS                (this venv, the pip-installed way)
Commands: `--version` (interpreter + CLI start), `doctor` (imports Qt, PortAudio, CTranslate2,
onnxruntime, keyring), and `transcribe` of a real speech WAV (start + model load + decode).
Repeats alternate which system goes first, so load drift on a shared machine hits both.
Reports median and p95 wall seconds per command and system and the ratio frozen/source, plus
bundle size and build time from dist/bundle-stats.json when present. Writes JSON with --out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_WAV = REPO / "resources" / "samples" / "jfk-inaugural-1961-excerpt.flac"
SYSTEMS = ("frozen", "source")


def commands(wav: Path) -> dict[str, list[str]]:
    return {
        "version": ["--version"],
        "doctor": ["doctor"],
        "transcribe": ["transcribe", "--no-progress", str(wav)],
    }


def launcher(system: str, bundle: Path) -> list[str]:
    if system == "frozen":
        return [str(bundle / "sottovoce")]
    return [sys.executable, "-m", "app.cli"]


def time_once(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                         check=False)
    elapsed = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {out.returncode}:\n{out.stderr[-2000:]}")
    return elapsed


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def measure(bundle: Path, wav: Path, repeat: int) -> dict[str, dict[str, list[float]]]:
    times: dict[str, dict[str, list[float]]] = {
        name: {s: [] for s in SYSTEMS} for name in commands(wav)}
    with tempfile.TemporaryDirectory(prefix="sottovoce-bench-") as tmp:
        env = {**os.environ, "SOTTOVOCE_CONFIG_DIR": f"{tmp}/config",
               "SOTTOVOCE_DATA_DIR": f"{tmp}/data", "HF_HUB_OFFLINE": "1"}
        for i in range(repeat):
            order = SYSTEMS if i % 2 == 0 else SYSTEMS[::-1]
            for name, args in commands(wav).items():
                for system in order:
                    cwd = Path(tmp) if system == "frozen" else REPO
                    times[name][system].append(time_once(launcher(system, bundle) + args, cwd,
                                                         env))
    return times


def summarise(times: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for name, by_system in times.items():
        row = {s: {"median_s": round(statistics.median(v), 3), "p95_s": round(p95(v), 3),
                   "runs_s": [round(x, 3) for x in v]} for s, v in by_system.items()}
        row["ratio_median"] = round(row["frozen"]["median_s"] / row["source"]["median_s"], 2)
        summary[name] = row
    return summary


def print_table(summary: dict[str, Any], build: dict[str, Any] | None) -> None:
    print(f"{'command':<12}{'frozen med':>11}{'p95':>8}{'source med':>12}{'p95':>8}"
          f"{'frozen/source':>15}")
    for name, row in summary.items():
        f, s = row["frozen"], row["source"]
        print(f"{name:<12}{f['median_s']:>10.2f}s{f['p95_s']:>7.2f}s{s['median_s']:>11.2f}s"
              f"{s['p95_s']:>7.2f}s{row['ratio_median']:>14.2f}x")
    if build:
        print(f"bundle {build['bundle_mb']} MB ({build['tarball_mb']} MB .tar.gz), built in "
              f"{build['pyinstaller_s']} s + {build['tarball_s']} s tarball")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=REPO / "dist" / "sottovoce")
    parser.add_argument("--wav", type=Path, default=DEFAULT_WAV)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    if not (args.bundle / "sottovoce").is_file():
        parser.error(f"no bundle at {args.bundle}: run packaging/build_bundle.sh first")
    stats_file = args.bundle.parent / "bundle-stats.json"
    build = json.loads(stats_file.read_text()) if stats_file.is_file() else None
    summary = summarise(measure(args.bundle, args.wav, args.repeat))
    print_table(summary, build)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"commands": summary, "build": build,
                                        "repeat": args.repeat, "wav": str(args.wav)}, indent=2)
                            + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
