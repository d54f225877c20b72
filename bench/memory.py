"""Peak memory of `sottovoce transcribe` on long files (issue 15, item 12: <= 500 MB for 3 h).

    python bench/memory.py --minutes 30 60 180 --kind pauses dense --kernels default avx2 \
        --out memory.json [--keep DIR]

For each length, a file of that many minutes is built from the corpus's English clips (shuffled
pass after pass, joined with real-length pauses and a long silence every 10th gap, as
bench/longform.py's mix: kind ``pauses``; or kind ``dense``: each clip trimmed of its leading
and trailing silence and joined to the next with no pause, so the VAD finds no long pause and
chunks come out full; written as FLAC by sox), then transcribed by the CLI exactly as a user
runs it (``python -m app.cli transcribe FILE``, its defaults: tiny.en, txt, greedy first
decodes with beam-5 re-decodes of unsure chunks). Reported
per file: the kernel's peak RSS of the process (``ru_maxrss`` from ``wait4``, what
``/usr/bin/time -v`` prints as "Maximum resident set size"), wall and CPU seconds (user +
system), CPU seconds per audio hour, and the words. The resident size is also sampled every
``--sample-s`` (``/proc/PID/status``) and plotted over time, one line per file, in a PNG next to
the JSON (matplotlib, from the ``dev`` extra).
Each file runs once per ``--kernels`` set: ``default`` (the processor's own CTranslate2 kernels,
MKL on Intel) and ``avx2`` (``CT2_USE_MKL=0 CT2_FORCE_CPU_ISA=AVX2``: oneDNN, what an AVX2 AMD
processor runs). The JSON records the host and each run's kernels. The CLI logs (``-v``) are
kept to read the resident size once the model is loaded (``base_rss_mb``: what the process
holds before any decode, the part of the budget that is not the decode buffers).
With ``--env NAME=VALUE`` the runs get that environment too (e.g. ``MALLOC_ARENA_MAX=2``), and
``--compare TXT`` reports the word error rate of the first file's text against an earlier run's
text (a before/after check that a change kept the text).

Run it with ``nice`` on a shared machine: peak RSS does not depend on the load, the times do.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from common import KERNEL_SETS, kernels_name, write_json
from common import REPO as ROOT
from evaluation import english, error_rate, read_manifest

from engine.audio.decode import load_audio  # noqa: E402
from engine.types import SAMPLE_RATE  # noqa: E402

PAUSES_S = (0.4, 0.7, 1.0, 1.5, 2.5)
LONG_PAUSE_S = 8.0


KINDS = ("pauses", "dense")
# What the decode runner logs once its model is loaded (engine.asr.ct2_decoder).
BASE_RSS = re.compile(r"resident ([\d.]+) MB with the model loaded")
TRIM_LEVEL = 0.02  # |sample| below this at a clip's ends counts as silence (dense kind)


def trimmed(clip: np.ndarray) -> np.ndarray:
    """``clip`` without its leading and trailing near-silence."""
    loud = np.flatnonzero(np.abs(clip) >= TRIM_LEVEL)
    return clip[loud[0]: loud[-1] + 1] if len(loud) else clip[:0]


def build_file(minutes: float, path: Path, seed: int = 1, kind: str = "pauses") -> float:
    """A FLAC of at least ``minutes`` of corpus speech and pauses (none for ``dense``),
    streamed to sox (never whole in memory); returns its seconds."""
    entries = english(read_manifest(ROOT / "tests" / "audio" / "manifest.jsonl"))
    clips = [load_audio(e.path) for e in entries]
    if kind == "dense":
        clips = [c for c in map(trimmed, clips) if len(c)]
    rng = np.random.default_rng(seed)
    sox = subprocess.Popen(["sox", "-t", "raw", "-r", str(SAMPLE_RATE), "-e", "signed", "-b", "16",
                            "-c", "1", "-", str(path)], stdin=subprocess.PIPE)
    assert sox.stdin is not None
    total = gap = 0
    while total < minutes * 60 * SAMPLE_RATE:
        for i in rng.permutation(len(clips)):
            gap += 1
            pause = LONG_PAUSE_S if gap % 10 == 0 else PAUSES_S[gap % len(PAUSES_S)]
            pause = 0.0 if kind == "dense" else pause
            part = np.concatenate([clips[i], np.zeros(int(pause * SAMPLE_RATE), np.float32)])
            sox.stdin.write((np.clip(part, -1, 1) * 32767).astype("<i2").tobytes())
            total += len(part)
    sox.stdin.close()
    if sox.wait() != 0:
        raise RuntimeError("sox failed to write the file")
    return total / SAMPLE_RATE


def measure(path: Path, env: dict[str, str], sample_s: float = 0.25) -> dict[str, Any]:
    """One CLI run: peak RSS (MB, the kernel's), wall and CPU seconds, the text, and the
    resident size sampled over time (``rss``: [seconds, MB] pairs)."""
    cmd = [sys.executable, "-m", "app.cli", "-v", "transcribe", "--no-progress", str(path)]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT), **env})
        samples: list[tuple[float, float]] = []
        while True:
            done, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if done:
                break
            rss = resident_mb(proc.pid)
            if rss is not None:
                samples.append((round(time.perf_counter() - started, 2), rss))
            time.sleep(sample_s)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"transcribe failed ({proc.returncode}): {err.read()[-2000:]}")
        text = out.read().strip()
        base = BASE_RSS.search(err.read())
    return {"base_rss_mb": float(base.group(1)) if base else None,
            "max_rss_mb": round(usage.ru_maxrss / 1024, 1), "wall_s": round(wall, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "text": text, "rss": samples}


def resident_mb(pid: int) -> float | None:
    """The process's resident size now (MB), or None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    return round(int(match.group(1)) / 1024, 1) if match else None


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """Resident size over time, one line per file, the 500 MB bound dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    for row in rows:
        samples = row["rss"]
        if samples:
            ax.plot([t / 60 for t, _ in samples], [mb for _, mb in samples],
                    label=f"{row.get('kind', '')} {row['minutes']:g} min, "
                          f"{row.get('kernels', 'default')} (peak {row['max_rss_mb']} MB)")
    ax.axhline(500, color="grey", linestyle="--", linewidth=1, label="500 MB")
    ax.set_xlabel("wall time (min)")
    ax.set_ylabel("RSS (MB)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, nargs="+", default=[30.0, 60.0, 180.0])
    parser.add_argument("--kind", nargs="+", choices=KINDS, default=list(KINDS),
                        help="files with pauses between utterances, or dense speech")
    parser.add_argument("--kernels", nargs="+", choices=sorted(KERNEL_SETS),
                        default=["default", "avx2"], help="CTranslate2 kernel sets to run")
    parser.add_argument("--sample-s", type=float, default=0.25, help="RSS sampling period")
    parser.add_argument("--title", default="sottovoce transcribe: resident size over time")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the runs")
    parser.add_argument("--compare", type=Path, help="an earlier run's text of the first file")
    parser.add_argument("--keep", type=Path, help="keep the built files (and texts) here")
    parser.add_argument("--out", type=Path, help="JSON results")
    args = parser.parse_args(argv)
    env = dict(item.split("=", 1) for item in args.env)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        for kind in args.kind:
            for minutes in args.minutes:
                path = folder / f"{kind}-{minutes:g}min.flac"
                if not path.exists():
                    build_file(minutes, path, kind=kind)
                for kernels in args.kernels:
                    rows.append(run_one(path, kind, minutes, {**env, **KERNEL_SETS[kernels]},
                                        args, first=not rows))
    print(f"{'kind':>6} {'minutes':>7} {'kernels':>34} {'base MB':>7} {'max RSS MB':>10} "
          f"{'wall s':>7} {'CPU s':>7} {'CPU s/h':>7} {'words':>6}")
    for r in rows:
        print(f"{r['kind']:>6} {r['minutes']:>7g} {r['kernels']:>34} {r['base_rss_mb']!s:>7} "
              f"{r['max_rss_mb']:>10} {r['wall_s']:>7} {r['cpu_s']:>7} "
              f"{r['cpu_s_per_audio_h']:>7} {r['words']:>6}")
    if args.out:
        write_json(args.out, {"env": env, "runs": rows})
        png = args.out.with_suffix(".png")
        plot(rows, png, args.title)
        print(f"wrote {args.out} and {png}")
    return 0


def run_one(path: Path, kind: str, minutes: float, env: dict[str, str],
            args: argparse.Namespace, first: bool) -> dict[str, Any]:
    """One file under one kernel set, as a row of the results (printed as it ends)."""
    seconds = float(load_seconds(path))
    result = measure(path, env, args.sample_s)
    text = str(result.pop("text"))
    kernels = kernels_name(env)
    if args.keep:
        (path.parent / f"{path.stem}-{kernels.replace(' ', '_')}.txt").write_text(text + "\n")
    row = {"kind": kind, "minutes": minutes, "kernels": kernels, "audio_s": round(seconds, 1),
           **result, "cpu_s_per_audio_h": round(float(result["cpu_s"]) / seconds * 3600, 1),
           "words": len(text.split())}
    if args.compare and first:
        row["wer_vs_compare"] = round(error_rate([args.compare.read_text()], [text]), 4)
    print(json.dumps({k: v for k, v in row.items() if k != "rss"}), flush=True)
    return row


def load_seconds(path: Path) -> float:
    """The file's length from its header (sox's soxi)."""
    out = subprocess.run(["soxi", "-D", str(path)], capture_output=True, text=True, check=True)
    return float(out.stdout)


if __name__ == "__main__":
    raise SystemExit(main())
