"""`sottovoce transcribe` against plain faster-whisper: speed (RTF) and accuracy (WER).

    python bench/transcribe.py --manifest tests/audio/manifest.jsonl --out transcribe.json

Every English file of the manifest (any kind; any manifest with the same fields works) is
transcribed two ways, same model and device, in the same run:
  ours                    the CLI's own path: load_audio -> the `--engine` decoder the CLI picks
                          (batched long-form pipeline when installed, else sequential) -> TXT
  faster_whisper_default  ``WhisperModel(path, device, compute_type).transcribe(file)`` with all
                          defaults, text joined from its segments
Each pass over the whole set is repeated (``--repeat``, alternating which system goes first, so
drift on a shared machine hits both); RTF = wall seconds / audio seconds per pass, reported as
median and p95 over passes. WER is the corpus WER after Whisper's English normaliser; "fmt WER" keeps
case and punctuation (evaluation.formatted_error_rate, formatted references only). Model load
time is excluded (printed separately). Prints a table and writes
``{"ours": {"rtf", "wer", ...}, "faster_whisper_default": {...}, "audio_s": n, ...}``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import TEST_MANIFEST, pct, print_table, write_json
from evaluation import (  # noqa: E402
    ManifestEntry,
    error_rate,
    formatted_error_rate,
    read_manifest,
)

from app.commands.transcribe import (  # noqa: E402
    AUTO_BATCHED_MIN_SECONDS,
    decode_options,
    make_decoders,
    transcribe,
)
from engine.asr.sequential import SequentialRunner  # noqa: E402
from engine.audio.decode import load_audio  # noqa: E402
from engine.models import resolve_model  # noqa: E402
from engine.types import SAMPLE_RATE  # noqa: E402
from engine.wire.export import render  # noqa: E402

SYSTEMS = ("ours", "faster_whisper_default")
# One pass: transcribe a file path, return its text.
Pass = Callable[[Path], str]


def ours_pass(model: str, device: str, compute_type: str,
              engine: str) -> tuple[Pass, SequentialRunner, float]:
    decoders = make_decoders(model, device, compute_type, engine)
    started = time.perf_counter()
    if decoders.sequential is not None:
        decoders.sequential.load()
    decoders.runner.load()  # both, as a run of short and long files loads them (one if shared)
    load_s = time.perf_counter() - started
    options = decode_options(None, 5, "txt")

    def run(path: Path) -> str:
        return " ".join(render(transcribe(load_audio(path), decoders, options), "txt").split())

    transcriber = decoders.sequential or decoders.runner
    return run, transcriber, load_s  # type: ignore[return-value]


def baseline_pass(model_path: str, device: str, compute_type: str) -> tuple[Pass, float]:
    from faster_whisper import WhisperModel

    started = time.perf_counter()
    model = WhisperModel(model_path, device=device, compute_type=compute_type)
    load_s = time.perf_counter() - started

    def run(path: Path) -> str:
        segments, _info = model.transcribe(str(path))
        return "".join(s.text for s in segments).strip()

    return run, load_s


def time_pass(run: Pass,
              entries: list[ManifestEntry]) -> tuple[float, float, list[str], list[float]]:
    """Wall seconds, CPU seconds (all threads of this process), texts, per-file wall seconds.
    CPU time is the fairer speed figure on a shared machine: neighbours inflate wall time."""
    texts, per_file = [], []
    cpu_started = time.process_time()
    for entry in entries:
        started = time.perf_counter()
        texts.append(run(entry.path))
        per_file.append(time.perf_counter() - started)
    return sum(per_file), time.process_time() - cpu_started, texts, per_file


def summarise(name: str, totals: list[float], cpu: list[float], texts: list[str],
              per_file: list[list[float]], entries: list[ManifestEntry], audio_s: float,
              load_s: float) -> dict[str, Any]:
    rtfs = [t / audio_s for t in totals]
    rtf, file_rtf = pct(rtfs, 4), pct([min(times[i] for times in per_file) / max(e.duration_s, 1e-3)
                                      for i, e in enumerate(entries)], 4)
    cpu_rtfs = [c / audio_s for c in cpu]
    refs = [e.text for e in entries]
    by_kind = {}
    for kind in sorted({e.kind for e in entries}):
        idx = [i for i, e in enumerate(entries) if e.kind == kind]
        by_kind[kind] = error_rate([refs[i] for i in idx], [texts[i] for i in idx])
    return {
        "rtf": statistics.median(rtfs), "rtf_p95": rtf["p95"], "rtf_passes": rtfs,
        "cpu_rtf": statistics.median(cpu_rtfs), "cpu_rtf_passes": cpu_rtfs,
        "wer": error_rate(refs, texts), "wer_by_kind": by_kind,
        "formatted_wer": formatted_error_rate(refs, texts),
        "file_rtf_median": file_rtf["p50"], "file_rtf_p95": file_rtf["p95"],
        "load_s": load_s, "system": name,
    }


def print_results(result: dict[str, Any]) -> None:
    ours, base = result["ours"], result["faster_whisper_default"]
    kinds = sorted(ours["wer_by_kind"])
    print_table(("system", "RTF med", "RTF p95", "file p95", "CPU RTF", "x real", "WER %",
                 *(f"WER {k} %" for k in kinds), "fmt WER %", "load s"),
                [(name, round(r["rtf"], 4), r["rtf_p95"], r["file_rtf_p95"], round(r["cpu_rtf"], 4),
                  round(1 / r["rtf"], 1), round(100 * r["wer"], 2),
                  *(round(100 * r["wer_by_kind"][k], 2) for k in kinds),
                  round(100 * r["formatted_wer"], 2), round(r["load_s"], 2))
                 for name, r in ((name, result[name]) for name in SYSTEMS)])
    print(f"\n{result['files']} files, {result['audio_s']:.1f} s of audio, {result['repeat']} passes,"
          f" model {result['model']} on {result['device']}/{result['compute_type']},"
          f" ours = {result['engine']} engine")
    print(f"speed ours / default: {base['rtf'] / ours['rtf']:.2f}x wall, "
          f"{base['cpu_rtf'] / ours['cpu_rtf']:.2f}x CPU   "
          f"WER ours - default: {100 * (ours['wer'] - base['wer']):+.2f} points")


def run_passes(runs: dict[str, Pass], entries: list[ManifestEntry], repeat: int,
               audio_s: float, loads: dict[str, float]) -> dict[str, Any]:
    """``repeat`` timed passes per system, alternating which goes first; one summary each."""
    totals: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    cpu: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    per_file: dict[str, list[list[float]]] = {name: [] for name in SYSTEMS}
    texts: dict[str, list[str]] = {}
    for rep in range(repeat):
        for name in SYSTEMS if rep % 2 == 0 else SYSTEMS[::-1]:
            total, cpu_s, got, times = time_pass(runs[name], entries)
            totals[name].append(total)
            cpu[name].append(cpu_s)
            per_file[name].append(times)
            texts.setdefault(name, got)
            print(f"pass {rep + 1}/{repeat} {name}: RTF {total / audio_s:.4f}, "
                  f"CPU RTF {cpu_s / audio_s:.4f}", flush=True)
    return {name: summarise(name, totals[name], cpu[name], texts[name], per_file[name], entries,
                            audio_s, loads[name])
            for name in SYSTEMS}


def engine_label(engine: str) -> str:
    """Which decoder(s) the CLI path used, as `make_decoders` picks them."""
    if engine == "sequential":
        return "sequential"
    if engine == "batched":
        return "batched"
    return f"auto (batched for files >= {AUTO_BATCHED_MIN_SECONDS:.0f} s, else sequential)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", default=TEST_MANIFEST, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--compute-type", default="auto")
    parser.add_argument("--engine", default="auto", choices=("auto", "batched", "sequential"))
    parser.add_argument("--repeat", type=int, default=3, help="timed passes per system (3)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N files (smoke)")
    parser.add_argument("--smoke", action="store_true", help="one file, one pass")
    args = parser.parse_args(argv)
    if args.smoke:
        args.limit, args.repeat = 1, 1

    entries = [e for e in read_manifest(args.manifest) if e.language == "en"]
    if args.limit:
        entries = entries[:args.limit]
    if not entries:
        parser.error(f"{args.manifest} has no English entries")
    audio_s = sum(len(load_audio(e.path)) / SAMPLE_RATE for e in entries)
    ours, transcriber, ours_load = ours_pass(args.model, args.device, args.compute_type,
                                             args.engine)
    info = transcriber.info
    baseline, base_load = baseline_pass(resolve_model(args.model).load_arg, info.device,
                                        info.compute_type)
    runs = {"ours": ours, "faster_whisper_default": baseline}
    for run in runs.values():  # warm-up: first-call costs (allocations, caches) are not timed
        run(entries[0].path)
    loads = {"ours": ours_load, "faster_whisper_default": base_load}
    result = run_passes(runs, entries, args.repeat, audio_s, loads)
    engine_used = engine_label(args.engine)
    result.update(audio_s=audio_s, files=len(entries), repeat=args.repeat, model=args.model,
                  device=info.device, compute_type=info.compute_type, engine=engine_used,
                  manifest=str(args.manifest))
    print()
    print_results(result)
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
