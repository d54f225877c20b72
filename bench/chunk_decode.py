"""Chunk decode latency and accuracy: short-context vs padded CTranslate2 path vs faster-whisper.

    python bench/chunk_decode.py --manifest tests/audio/manifest.jsonl --out chunk.json
    python bench/chunk_decode.py --smoke --out /tmp/chunk.json   # seconds

For every English ``short`` clip of the manifest, and for 2-5 s cuts of the longer ones, decodes
the chunk three ways on the same loaded model:
  short   Ct2Runner, short_context=True (guards + padded fallback included)
  padded  Ct2Runner, short_context=False (one 30 s window, like faster-whisper)
  fw      faster_whisper.WhisperModel.transcribe() (the baseline users get today)
and reports per-call latency (p50/p95/mean, 2-5 s chunks and all clips), WER against the
manifest's reference for whole clips and agreement WER against faster-whisper for cuts (no human
reference exists for a cut), the short path's fallback rate, and batch-size scaling (1/2/4/8
chunks per decode_batch call: audio seconds decoded per wall second). Writes JSON, prints a
table, and saves a PNG next to the JSON.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from common import TEST_MANIFEST as DEFAULT_MANIFEST
from common import pct, print_table, write_json
from evaluation import english, error_rate, read_manifest  # noqa: E402

from engine.asr.ct2_decoder import Ct2Runner  # noqa: E402
from engine.asr.sequential import SequentialRunner  # noqa: E402
from engine.audio.decode import load_audio  # noqa: E402
from engine.types import (  # noqa: E402
    SAMPLE_RATE,  # noqa: E402
    Audio,
    DecodeOptions,
    DecodeRequest,
)

METHODS = ("short", "padded", "fw")
BATCH_SIZES = (1, 2, 4, 8)


def make_cuts(clips: list[tuple[str, Audio, str]], seed: int) -> list[tuple[str, Audio, str]]:
    """2-5 s windows from clips longer than 6 s (random lengths, fixed seed), no reference."""
    rng = np.random.default_rng(seed)
    cuts = []
    for name, audio, _ in clips:
        pos = 0
        while len(audio) - pos > 6 * SAMPLE_RATE:
            length = int(rng.uniform(2.0, 5.0) * SAMPLE_RATE)
            cuts.append((f"{name}@{pos / SAMPLE_RATE:.1f}s", audio[pos:pos + length], ""))
            pos += length
    return cuts


def timed(fn: Callable[[], Any], repeats: int) -> tuple[Any, float, float]:
    """Result of the last call, and the fastest wall time and process CPU time in ms.

    The fastest of a few calls has the least noise from neighbours; CPU time (all threads of
    this process) does not grow when other processes take the cores, so it shows the cost on
    a loaded machine where wall time shows the wait."""
    best, best_cpu = float("inf"), float("inf")
    result = None
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        result = fn()
        best = min(best, (time.perf_counter() - started) * 1000)
        best_cpu = min(best_cpu, (time.process_time() - started_cpu) * 1000)
    return result, best, best_cpu


def decode_all(backend: SequentialRunner, runner: Ct2Runner,
               items: list[tuple[str, Audio, str]], beam: int, repeats: int) -> list[dict[str, Any]]:
    short = DecodeOptions(beam_size=beam, word_timestamps=False, short_context=True)
    padded = DecodeOptions(beam_size=beam, word_timestamps=False)
    fw_opts = DecodeOptions(beam_size=beam, word_timestamps=False)
    rows = []
    for name, audio, ref in items:
        row: dict[str, Any] = {"name": name, "seconds": len(audio) / SAMPLE_RATE, "ref": ref}
        for method, call in (
            ("short", lambda a=audio: runner.decode_batch([DecodeRequest(a, short)])[0]),
            ("padded", lambda a=audio: runner.decode_batch([DecodeRequest(a, padded)])[0]),
            ("fw", lambda a=audio: backend.decode(a, fw_opts)),
        ):
            result, ms, cpu_ms = timed(call, repeats)
            row[method] = {"ms": ms, "cpu_ms": cpu_ms, "text": result.text}
            if method == "short":
                row["short_path"] = result.extra.get("path")
                row["short_fallback"] = result.extra.get("fallback")
                row["loop_trimmed"] = result.extra.get("loop_trimmed")
        rows.append(row)
        print(f"  {name:45s} {row['seconds']:5.1f}s  short {row['short']['ms']:6.0f} ms "
              f"({row['short_path']}{'/' + str(row['short_fallback']) if row['short_fallback'] else ''})"
              f"  padded {row['padded']['ms']:6.0f}  fw {row['fw']['ms']:6.0f}", flush=True)
    return rows


def batch_scaling(runner: Ct2Runner, chunks: list[Audio], beam: int,
                  repeats: int) -> dict[str, dict[str, float]]:
    """Audio seconds per wall second for batches of 1/2/4/8 chunks, per path."""
    out: dict[str, dict[str, float]] = {}
    for path, short in (("short", True), ("padded", False)):
        opts = DecodeOptions(beam_size=beam, word_timestamps=False, short_context=short)
        out[path] = {}
        for size in BATCH_SIZES:
            batch = [chunks[i % len(chunks)] for i in range(size)]
            requests = [DecodeRequest(a, opts) for a in batch]
            _, ms, _ = timed(partial(runner.decode_batch, requests), repeats)
            audio_s = sum(len(a) for a in batch) / SAMPLE_RATE
            out[path][str(size)] = audio_s / (ms / 1000)
            print(f"  batch {path:6s} x{size}: {out[path][str(size)]:.1f} audio s/s", flush=True)
    return out


def scores(rows: list[dict[str, Any]]) -> dict[str, Any]:
    whole = [r for r in rows if r["ref"]]
    cuts = [r for r in rows if not r["ref"]]
    wer = {m: error_rate([r["ref"] for r in whole], [r[m]["text"] for r in whole])
           for m in METHODS}
    agreement = {m: error_rate([r["fw"]["text"] for r in cuts], [r[m]["text"] for r in cuts])
                 for m in ("short", "padded")} if cuts else {}
    chunk_rows = [r for r in rows if 2.0 <= r["seconds"] <= 5.0]
    return {
        "wer_clips": wer,
        "wer_cuts_vs_fw": agreement,
        "latency_ms_2_5s": {m: pct([r[m]["ms"] for r in chunk_rows]) for m in METHODS},
        "latency_ms_all": {m: pct([r[m]["ms"] for r in rows]) for m in METHODS},
        "cpu_ms_2_5s": {m: pct([r[m]["cpu_ms"] for r in chunk_rows]) for m in METHODS},
        "short_fallback_rate": (sum(r["short_path"] != "short" for r in rows) / len(rows)),
        "short_fallback_reasons": _count(r["short_fallback"] for r in rows if r["short_fallback"]),
        "loops_trimmed": sum(bool(r["loop_trimmed"]) for r in rows),
    }


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def print_results(result: dict[str, Any]) -> None:
    s = result["scores"]
    rows = []
    for m in METHODS:
        short_lat, all_lat = s["latency_ms_2_5s"][m], s["latency_ms_all"][m]
        cut = s["wer_cuts_vs_fw"].get(m)
        rows.append((m, short_lat["p50"], short_lat["p95"], all_lat["p50"], all_lat["p95"],
                     s["cpu_ms_2_5s"][m]["p50"], round(100 * s["wer_clips"][m], 1),
                     None if cut is None else round(100 * cut, 1)))
    print_table(("method", "2-5 s p50 ms", "2-5 s p95 ms", "all p50 ms", "all p95 ms",
                 "2-5 s CPU p50 ms", "WER clips %", "WER cuts vs fw %"), rows)
    print(f"\nshort path fell back on {100 * s['short_fallback_rate']:.0f} % of chunks "
          f"{s['short_fallback_reasons']}; loops trimmed: {s['loops_trimmed']}\n")
    scaling = result["batch_audio_s_per_s"]
    print_table(("batch", "short audio s/s", "x batch 1", "padded audio s/s", "x batch 1"),
                [(size, *(x for p in ("short", "padded") for x in (
                    round(scaling[p][str(size)], 1),
                    round(scaling[p][str(size)] / scaling[p]["1"], 2)))) for size in BATCH_SIZES])


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for m in METHODS:
        values = sorted(r[m]["ms"] for r in rows if 2.0 <= r["seconds"] <= 5.0)
        ax1.plot(values, np.linspace(0, 1, len(values)), label=m)
    ax1.set_xlabel("chunk decode latency, 2-5 s chunks (ms)")
    ax1.set_ylabel("fraction of chunks")
    ax1.legend()
    for p in ("short", "padded"):
        series = result["batch_audio_s_per_s"][p]
        ax2.plot([int(k) for k in series], list(series.values()), marker="o", label=p)
    ax2.set_xlabel("batch size")
    ax2.set_ylabel("audio seconds per wall second")
    ax2.legend()
    fig.suptitle(f"{result['model']} {result['device']}/{result['compute_type']}, beam "
                 f"{result['beam_size']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--out", required=True, help="JSON results (a PNG is written beside it)")
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--beam-size", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2, help="timed calls per item (min kept)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N clips (smoke runs)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="one clip (and its cuts), once")
    args = parser.parse_args(argv)
    if args.smoke:
        args.limit, args.repeats = 1, 1

    entries = english(read_manifest(args.manifest))
    if args.limit:
        entries = entries[:args.limit]
    clips = [(e.path.name, load_audio(e.path), e.text) for e in entries]
    items = clips + make_cuts(clips, args.seed)
    backend = SequentialRunner(args.model, device=args.device)
    backend.load()
    runner = Ct2Runner(backend.model)
    runner.decode_batch([DecodeRequest(clips[0][1])])  # warm-up: first call allocates
    print(f"{len(clips)} clips + {len(items) - len(clips)} cuts, {backend.info}", flush=True)
    # Timings on a shared machine mean little without the load they were taken under.
    load_start = os.getloadavg()
    rows = decode_all(backend, runner, items, args.beam_size, args.repeats)
    chunks = [a for _, a, _ in items if 2.0 * SAMPLE_RATE <= len(a) <= 5.0 * SAMPLE_RATE]
    result = {
        "model": backend.info.name, "device": backend.info.device,
        "compute_type": backend.info.compute_type, "beam_size": args.beam_size,
        "repeats": args.repeats, "cpu_count": os.cpu_count(), "rows": rows,
        "batch_audio_s_per_s": batch_scaling(runner, chunks, args.beam_size, args.repeats),
    }
    result["scores"] = scores(rows)
    result["loadavg_1min"] = {"start": load_start[0], "end": os.getloadavg()[0]}
    out = write_json(args.out, result)
    print_results(result)
    print(f"\nload average (1 min) {result['loadavg_1min']['start']:.1f} at start, "
          f"{result['loadavg_1min']['end']:.1f} at end, on {os.cpu_count()} CPUs")
    plot(result, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
