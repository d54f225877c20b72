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
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, pct, print_table, write_json

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
        row: dict[str, Any] = {s: {**pct(v, 3), "runs_s": [round(x, 3) for x in v]}
                               for s, v in by_system.items()}
        row["ratio_median"] = round(row["frozen"]["p50"] / row["source"]["p50"], 2)
        summary[name] = row
    return summary


def print_results(summary: dict[str, Any], build: dict[str, Any] | None) -> None:
    print_table(("command", "frozen med s", "p95", "source med s", "p95", "frozen/source"),
                [(name, row["frozen"]["p50"], row["frozen"]["p95"], row["source"]["p50"],
                  row["source"]["p95"], row["ratio_median"]) for name, row in summary.items()])
    if build:
        print(f"bundle {build['bundle_mb']} MB ({build['tarball_mb']} MB .tar.gz), built in "
              f"{build['pyinstaller_s']} s + {build['tarball_s']} s tarball")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=REPO / "dist" / "sottovoce")
    parser.add_argument("--wav", type=Path, default=DEFAULT_WAV)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--smoke", action="store_true", help="each command once")
    args = parser.parse_args(argv)
    if args.smoke:
        args.repeat = 1
    if not (args.bundle / "sottovoce").is_file():
        parser.error(f"no bundle at {args.bundle}: run packaging/build_bundle.sh first")
    stats_file = args.bundle.parent / "bundle-stats.json"
    build = json.loads(stats_file.read_text()) if stats_file.is_file() else None
    summary = summarise(measure(args.bundle, args.wav, args.repeat))
    print_results(summary, build)
    if args.out:
        write_json(args.out, {"commands": summary, "build": build, "repeat": args.repeat,
                              "wav": str(args.wav)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
