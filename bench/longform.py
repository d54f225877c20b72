"""Long-form transcription: ours vs faster-whisper's sequential and batched pipelines.

    python bench/longform.py --manifest tests/audio/manifest.jsonl --out longform.json

For every English ``long`` file of the manifest, plus a >= 20 min concatenation of all the
manifest's English audio with real-length pauses (and a few long silences), the three systems
decode the same audio with the same model weights, interleaved, ``--repeats`` times:

- ``ours``: `engine.files.transcribe_file` with its defaults (VAD chunks, greedy, text-only first,
  batched CTranslate2 decoding on two decode streams, hallucination retries), over the model as
  ``sottovoce transcribe`` loads it (`engine.longform.long_form_backend`: on the CPU two
  replicas of cores // 2 threads, sharing the weights); word timings only with
  ``--ours-word-timestamps``, since neither peer computes them by default;
- ``faster_whisper_default``: ``WhisperModel.transcribe(audio)`` with its defaults;
- ``faster_whisper_batched``: ``BatchedInferencePipeline(model).transcribe(audio, batch_size=8)``.

The peers share one model loaded as faster-whisper loads it by default (one replica, all cores
as CTranslate2 threads): that is what they are built for, since both decode one batch at a time
(one thread per core measured 1.3-1.5x slower for the batched pipeline on 2 cores).

RTF is decode wall time / audio time (median and p95 over repeats), also reported as process CPU
time / audio time, which stays meaningful when other work shares the cores. WER is after Whisper's
English normaliser. Writes the JSON (top-level ``{system: {"rtf", "wer"}}`` plus per-file detail
and ratios) and a PNG bar chart next to it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from common import TEST_MANIFEST as DEFAULT_MANIFEST
from common import pct
from evaluation import ManifestEntry, error_rate, read_manifest  # noqa: E402

from engine.audio.decode import load_audio  # noqa: E402
from engine.types import SAMPLE_RATE  # noqa: E402

SYSTEMS = ("ours", "faster_whisper_default", "faster_whisper_batched")
PAUSES_S = (0.4, 0.7, 1.0, 1.5, 2.5)  # between utterances, cycled
LONG_PAUSE_S = 8.0  # every 10th gap: a silence the pipelines should skip


@dataclass
class Item:
    name: str
    audio: np.ndarray
    reference: str

    @property
    def seconds(self) -> float:
        return len(self.audio) / SAMPLE_RATE


@dataclass
class Runs:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    text: str = ""


def build_concatenation(entries: list[ManifestEntry], minutes: float, seed: int = 1) -> Item:
    """All English manifest audio, reshuffled pass after pass, joined with pauses, until the
    result is at least ``minutes`` long."""
    rng = np.random.default_rng(seed)
    clips = [(load_audio(e.path), e.text) for e in entries]
    parts: list[np.ndarray] = []
    texts: list[str] = []
    total, gap_index = 0, 0
    while total < minutes * 60 * SAMPLE_RATE:
        for i in rng.permutation(len(clips)):
            audio, text = clips[i]
            gap_index += 1
            pause = LONG_PAUSE_S if gap_index % 10 == 0 else PAUSES_S[gap_index % len(PAUSES_S)]
            parts += [audio, np.zeros(int(pause * SAMPLE_RATE), dtype=np.float32)]
            texts.append(text)
            total += len(audio) + int(pause * SAMPLE_RATE)
    return Item(f"concat-{minutes:g}min", np.concatenate(parts), " ".join(texts))


def make_systems(model: Any, transcriber: Any, word_timestamps: bool,
                 ours_extra: dict[int, dict[str, Any]]) -> dict[str, Callable[[np.ndarray], str]]:
    """The three systems: the peers over ``model`` (a faster-whisper ``WhisperModel``), ours
    over ``transcriber``; ``ours_extra`` gets our pipeline's counters per audio length."""
    import dataclasses

    from faster_whisper import BatchedInferencePipeline

    from engine.files import transcribe_file
    from engine.longform import LongFormOptions

    runner = transcriber
    runner.load()
    batched = BatchedInferencePipeline(model)
    defaults = LongFormOptions()
    options = dataclasses.replace(
        defaults, decode=dataclasses.replace(defaults.decode, word_timestamps=word_timestamps))

    def ours(audio: np.ndarray) -> str:
        transcript = transcribe_file(audio, runner, options).transcript()
        ours_extra[len(audio)] = {k: v for k, v in transcript.extra.items() if k != "dropped"}
        return transcript.text

    def default(audio: np.ndarray) -> str:
        segments, _ = model.transcribe(audio)
        return " ".join(s.text.strip() for s in segments)

    def batched_run(audio: np.ndarray) -> str:
        segments, _ = batched.transcribe(audio, batch_size=8)
        return " ".join(s.text.strip() for s in segments)

    return {"ours": ours, "faster_whisper_default": default,
            "faster_whisper_batched": batched_run}


def measure(items: list[Item], systems: dict[str, Callable[[np.ndarray], str]],
            repeats: int) -> dict[str, dict[str, Runs]]:
    """Interleaved runs: every repeat runs every system on every file, in a rotating order so
    no system always runs first (warm caches) or last (a busier machine)."""
    runs = {item.name: {name: Runs() for name in systems} for item in items}
    names = list(systems)
    for rep in range(repeats):
        for item in items:
            order = names[rep % len(names):] + names[:rep % len(names)]
            for name in order:
                wall0, cpu0 = time.perf_counter(), time.process_time()
                text = systems[name](item.audio)
                wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
                r = runs[item.name][name]
                r.wall.append(wall / item.seconds)
                r.cpu.append(cpu / item.seconds)
                r.text = text
                logging.info("rep %d %s %s: rtf %.4f (cpu %.4f)", rep, item.name, name,
                             wall / item.seconds, cpu / item.seconds)
    return runs


def summarise(items: list[Item], runs: dict[str, dict[str, Runs]]) -> dict[str, Any]:
    total_s = sum(item.seconds for item in items)
    out: dict[str, Any] = {}
    for name in SYSTEMS:
        wall = sum(statistics.median(runs[i.name][name].wall) * i.seconds for i in items)
        cpu = sum(statistics.median(runs[i.name][name].cpu) * i.seconds for i in items)
        wer = error_rate([i.reference for i in items], [runs[i.name][name].text for i in items])
        out[name] = {"rtf": wall / total_s, "cpu_rtf": cpu / total_s, "wer": wer}
    out["files"] = [{
        "file": item.name, "duration_s": round(item.seconds, 1),
        **{name: {
            "rtf_median": statistics.median(runs[item.name][name].wall),
            "rtf_p95": pct(runs[item.name][name].wall, 4)["p95"],
            "cpu_rtf_median": statistics.median(runs[item.name][name].cpu),
            "wer": error_rate([item.reference], [runs[item.name][name].text]),
        } for name in SYSTEMS},
    } for item in items]
    ours, batched = out["ours"], out["faster_whisper_batched"]
    # The WER bound holds per file too, not only on the pooled words.
    per_file = {row["file"]: 100 * (row["ours"]["wer"] - row["faster_whisper_batched"]["wer"])
                for row in out["files"]}
    out["ratios"] = {
        "speedup_vs_batched": batched["rtf"] / ours["rtf"],
        "cpu_speedup_vs_batched": batched["cpu_rtf"] / ours["cpu_rtf"],
        "speedup_vs_default": out["faster_whisper_default"]["rtf"] / ours["rtf"],
        "wer_points_vs_batched": 100 * (ours["wer"] - batched["wer"]),
        "wer_points_vs_batched_per_file": per_file,
        "target_met": bool(batched["rtf"] / ours["rtf"] >= 2.0
                           and 100 * (ours["wer"] - batched["wer"]) <= 0.5
                           and max(per_file.values()) <= 0.5),
    }
    return out


def print_table(summary: dict[str, Any]) -> None:
    print(f"{'file':<46}{'system':<25}{'RTF med':>9}{'RTF p95':>9}{'CPU RTF':>9}{'WER %':>8}")
    for row in summary["files"]:
        for name in SYSTEMS:
            r = row[name]
            print(f"{row['file'] + ' (' + str(row['duration_s']) + ' s)':<46}{name:<25}"
                  f"{r['rtf_median']:>9.4f}{r['rtf_p95']:>9.4f}{r['cpu_rtf_median']:>9.4f}"
                  f"{100 * r['wer']:>8.2f}")
    print()
    for name in SYSTEMS:
        s = summary[name]
        print(f"{'all files':<46}{name:<25}{s['rtf']:>9.4f}{'':>9}{s['cpu_rtf']:>9.4f}"
              f"{100 * s['wer']:>8.2f}")
    ratios = summary["ratios"]
    print(f"\nload average at start {summary['setup']['load_average_at_start'][0]:.1f}, at end "
          f"{summary['setup']['load_average_at_end'][0]:.1f} ({summary['setup']['cpu_count']} cores)")
    print(f"ours vs batched: {ratios['speedup_vs_batched']:.2f}x faster (wall), "
          f"{ratios['cpu_speedup_vs_batched']:.2f}x (CPU time), WER "
          f"{ratios['wer_points_vs_batched']:+.2f} points; vs default: "
          f"{ratios['speedup_vs_default']:.2f}x; target (>= 2x, <= +0.5 pt) met: "
          f"{ratios['target_met']}")


def plot(summary: dict[str, Any], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_rtf, ax_wer) = plt.subplots(1, 2, figsize=(11, 4))
    files = [row["file"] for row in summary["files"]]
    width = 0.8 / len(SYSTEMS)
    for k, name in enumerate(SYSTEMS):
        xs = [i + k * width for i in range(len(files))]
        ax_rtf.bar(xs, [row[name]["rtf_median"] for row in summary["files"]], width, label=name)
        ax_wer.bar(xs, [100 * row[name]["wer"] for row in summary["files"]], width, label=name)
    for ax, label in ((ax_rtf, "real-time factor (lower is faster)"), (ax_wer, "WER %")):
        ax.set_xticks([i + width for i in range(len(files))], files, fontsize=8)
        ax.set_ylabel(label)
    ax_rtf.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--compute-type", default="auto")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--concat-minutes", type=float, default=20.0,
                        help="length of the concatenated file (0: leave it out)")
    parser.add_argument("--ours-word-timestamps", action="store_true",
                        help="time every word in ours too (the peers' defaults do not)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("faster_whisper").setLevel(logging.WARNING)

    from engine.asr import local_runner
    from engine.asr.whisper_model import FasterWhisperModel

    transcriber = local_runner(args.model, args.device, files=True,
                               compute_type=args.compute_type)
    transcriber.load()
    peer = FasterWhisperModel(args.model, device=args.device, compute_type=args.compute_type)
    peer.load()
    entries = read_manifest(args.manifest)
    english = [e for e in entries if e.language == "en"]
    items = [Item(e.path.name, load_audio(e.path), e.text) for e in english if e.kind == "long"]
    if args.concat_minutes > 0:
        items.append(build_concatenation(english, args.concat_minutes))
    ours_extra: dict[int, dict[str, Any]] = {}
    systems = make_systems(peer.whisper, transcriber, args.ours_word_timestamps, ours_extra)
    load_at_start = os.getloadavg()
    systems["ours"](items[0].audio[: 30 * SAMPLE_RATE])  # warm-up: VAD session, CT2 kernels
    runs = measure(items, systems, args.repeats)
    summary = summarise(items, runs)
    for row, item in zip(summary["files"], items, strict=True):
        row["ours_counters"] = ours_extra.get(len(item.audio), {})
    info = transcriber.info
    summary["setup"] = {
        "model": info.name, "device": info.device, "compute_type": info.compute_type,
        "repeats": args.repeats, "ours_word_timestamps": args.ours_word_timestamps,
        "ours_streams_x_threads": list(transcriber.model.layout),
        "peers_streams_x_threads": list(peer.layout),
        "cpu_count": os.cpu_count(), "machine": platform.machine(),
        "load_average_at_start": load_at_start, "load_average_at_end": os.getloadavg(),
    }
    print_table(summary)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2))
    png = args.out.with_suffix(".png")
    plot(summary, png, f"long-form, {info.name} {info.device}/{info.compute_type}")
    print(f"\nwrote {args.out} and {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
