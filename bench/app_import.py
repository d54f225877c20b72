"""The app's File > Open file… path against one whole-file run with nothing consuming it.

    python bench/app_import.py --manifest tests/audio/manifest.jsonl --out import.json
    python bench/app_import.py --smoke --out /tmp/import.json   # seconds: two clips, once

The app consumes `engine.files.transcribe_file` on a worker (app.file_import): text appears,
and is journalled, wave by wave. This measures what that costs against draining the same
generator in one go (same runner, same decode options, interleaved, ``--repeats`` times):
wall and CPU RTF (median, p95), WER after Whisper's English normaliser, and the time until the
first text shows. Files: the manifest's English ``long`` files plus (unless ``--long-only``) a
mix of its English short clips joined with 1-2 s pauses. Runs `FileImport` itself (journal
writes included), without Qt. Reports the load average at start and end (shared machines).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from common import TEST_MANIFEST, pct, print_table, speech_mix, write_json, write_wav
from evaluation import english, error_rate, read_manifest

from app.file_import import FileImport, ImportOptions
from engine.audio.decode import load_audio
from engine.files import transcribe_file
from engine.types import SAMPLE_RATE, DecodeOptions


class _Listener:
    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first_text_s: float | None = None
        self.result: Any = None
        self.error: str | None = None
        self.done = threading.Event()

    def import_started(self, total: int) -> None: ...
    def import_progress(self, done: int, total: int) -> None: ...
    def import_warning(self, message: str) -> None: ...

    def import_segments(self, segments: Any, language: str | None) -> None:
        if self.first_text_s is None:
            self.first_text_s = time.perf_counter() - self.started

    def import_finished(self, result: Any) -> None:
        self.result = result
        self.done.set()

    def import_failed(self, message: str) -> None:
        self.error = message
        self.done.set()


def run_import(path: Path, runner: Any, journal: Path) -> dict[str, Any]:
    listener = _Listener()
    cpu = time.process_time()
    job = FileImport(path, lambda: runner, listener, ImportOptions(), journal_dir=journal)
    job.start()
    listener.done.wait()
    if listener.error:
        raise RuntimeError(listener.error)
    return {"wall": time.perf_counter() - listener.started, "cpu": time.process_time() - cpu,
            "first": listener.first_text_s, "text": listener.result.transcript.text}


def run_whole(path: Path, runner: Any) -> dict[str, Any]:
    started, cpu = time.perf_counter(), time.process_time()
    audio = load_audio(path)
    transcript = transcribe_file(audio, runner,
                                 DecodeOptions(beam_size=1, word_timestamps=True)).transcript()
    wall = time.perf_counter() - started
    return {"wall": wall, "cpu": time.process_time() - cpu, "first": wall,
            "text": transcript.text}


def joined_mix(manifest: Path, out: Path, limit: int = 0) -> tuple[Path, str]:
    """The manifest's English short clips (the first ``limit``) in one file, with pauses."""
    entries = english(read_manifest(manifest), kinds=("short",))[:limit or None]
    parts = list(speech_mix([(load_audio(e.path), e.text) for e in entries], seed=3))
    return write_wav(out, np.concatenate([a for a, _ in parts])), " ".join(t for _, t in parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, default=TEST_MANIFEST)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--long-only", action="store_true", help="leave out the short-clip mix")
    parser.add_argument("--smoke", action="store_true",
                        help="a mix of two short clips, once (no long file): seconds")
    args = parser.parse_args()
    if args.smoke:
        args.repeats = 1
    from engine.asr import local_runner

    runner = local_runner(args.model, "cpu", files=True)  # as the app loads it (two streams on the CPU)
    runner.load()
    tmp = Path(tempfile.mkdtemp(prefix="bench-import-"))
    files = [] if args.smoke else [(e.path, e.text) for e in english(read_manifest(args.manifest),
                                                                    kinds=("long",))]
    if not args.long_only:
        files.append(joined_mix(args.manifest, tmp / "english-short-mix.wav", 2 * args.smoke))
    systems: dict[str, Callable[[Path], dict[str, Any]]] = {
        "app_import": lambda p: run_import(p, runner, tmp / "journal"),
        "whole_file": lambda p: run_whole(p, runner)}
    report: dict[str, Any] = {"load_average_at_start": os.getloadavg()}
    for path, reference in files:
        seconds = len(load_audio(path)) / SAMPLE_RATE
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in systems}
        for _ in range(args.repeats):
            for name, run in systems.items():  # interleaved: load changes hit all alike
                runs[name].append(run(path))
        report[path.name] = {"audio_s": round(seconds, 1), **{name: _summary(r, seconds, reference)
                                                             for name, r in runs.items()}}
    report["load_average_at_end"] = os.getloadavg()
    write_json(args.out, report)
    _print_table(report)
    return 0


def _summary(runs: list[dict[str, Any]], seconds: float, reference: str) -> dict[str, float]:
    rtf = pct([r["wall"] / seconds for r in runs], 4)
    return {"rtf_median": rtf["p50"], "rtf_p95": rtf["p95"],
            "cpu_rtf": round(statistics.median(r["cpu"] / seconds for r in runs), 4),
            "first_text_s": round(statistics.median(r["first"] for r in runs), 2),
            "wer": round(statistics.median(100 * error_rate([reference], [r["text"]])
                                           for r in runs), 2)}


def _print_table(report: dict[str, Any]) -> None:
    rows = [(f"{name} ({row['audio_s']:.0f} s)", system, s["rtf_median"], s["rtf_p95"],
             s["cpu_rtf"], s["first_text_s"], s["wer"])
            for name, row in report.items() if not name.startswith("load_average")
            for system, s in row.items() if system != "audio_s"]
    print_table(("file", "system", "RTF med", "p95", "CPU RTF", "1st text s", "WER %"), rows)
    print("load average at start / end: "
          f"{report['load_average_at_start'][0]:.2f} / {report['load_average_at_end'][0]:.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
