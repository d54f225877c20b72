"""Long-form transcription: ours vs faster-whisper's sequential and batched pipelines.

    python bench/longform.py --out longform.json   # the dev set (common.DEV_MANIFEST); --manifest M

For every English ``long`` file of the manifest, plus one continuous reading per speaker of the
evaluation corpus (``--eval-manifest``: each speaker with at least ``--eval-min-speech-s`` of
speech, their utterances in manifest order joined with natural pauses; 7 speakers, 19 min in
all, at the default 100 s), plus, with ``--concat-minutes``, a concatenation of all the
manifest's English audio with real-length pauses (and a few long silences), the three systems
decode the same audio with the same model weights, interleaved, ``--repeats`` times:

- ``ours``: `engine.files.transcribe_file` with its defaults (VAD chunks, greedy, text-only first,
  batched CTranslate2 decoding on two decode streams, hallucination retries), over the model as
  ``sottovoce transcribe`` loads it (`engine.asr.local_runner` with ``files``: on the CPU two
  replicas of cores // 2 threads, sharing the weights); word timings only with
  ``--ours-word-timestamps``, since neither peer computes them by default;
- ``faster_whisper_default``: ``WhisperModel.transcribe(audio)`` with its defaults;
- ``faster_whisper_batched``: ``BatchedInferencePipeline(model).transcribe(audio, batch_size=8)``.

The peers share one model loaded as faster-whisper loads it by default (one replica, all cores
as CTranslate2 threads): that is what they are built for, since both decode one batch at a time
(one thread per core measured 1.3-1.5x slower for the batched pipeline on 2 cores).

RTF is decode wall time / audio time (median and p95 over repeats), also reported as process CPU
time / audio time, which stays meaningful when other work shares the cores. WER is after Whisper's
English normaliser. Per file, ours is compared with the better of the two peers on that file,
with a 95 % paired bootstrap interval over the reference's pieces (the speaker's utterances; the
sentences of a long reading): each system's hypothesis is aligned to the whole reference once
and every error is charged to the piece its reference word belongs to (an insertion to the
piece of the word it precedes). Writes the JSON (top-level ``{system: {"rtf", "wer"}}`` plus
per-file detail and ratios) and a PNG bar chart next to it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from common import DEV_MANIFEST, EVAL_MANIFEST, host_info, paired_wer, pct, print_table
from common import write_json as write_result
from evaluation import ManifestEntry, error_rate, normalize, read_manifest

from engine.audio.decode import load_audio  # noqa: E402
from engine.types import SAMPLE_RATE  # noqa: E402

DEFAULT_MANIFEST = DEV_MANIFEST

SYSTEMS = ("ours", "faster_whisper_default", "faster_whisper_batched")
PAUSES_S = (0.4, 0.7, 1.0, 1.5, 2.5)  # between utterances, cycled
LONG_PAUSE_S = 8.0  # every 10th gap: a silence the pipelines should skip


@dataclass
class Item:
    name: str
    audio: np.ndarray
    reference: str
    pieces: list[str] = field(default_factory=list)  # the reference in parts, for the bootstrap

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


def build_speaker_readings(manifest: Path, min_speech_s: float) -> list[Item]:
    """One continuous reading per speaker of ``manifest`` with at least ``min_speech_s`` of
    speech: their utterances in manifest order, joined with the natural pauses between
    sentences of a reading (`PAUSES_S`, cycled; no long silences)."""
    rows = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    by_speaker: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("language", "en") == "en":
            by_speaker.setdefault(row.get("speaker", "?"), []).append(row)
    items = []
    for speaker, utterances in sorted(by_speaker.items(),
                                      key=lambda kv: -sum(r["duration_s"] for r in kv[1])):
        if sum(r["duration_s"] for r in utterances) < min_speech_s:
            continue
        parts: list[np.ndarray] = []
        for n, row in enumerate(utterances):
            pause = PAUSES_S[n % len(PAUSES_S)]
            parts += [load_audio(manifest.parent / row["file"]),
                      np.zeros(int(pause * SAMPLE_RATE), dtype=np.float32)]
        texts = [row["text"] for row in utterances]
        items.append(Item(f"eval-{speaker}", np.concatenate(parts), " ".join(texts), texts))
    return items


def sentences(text: str) -> list[str]:
    """A long reading's reference cut after each sentence end (the bootstrap's pieces)."""
    return [s for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def piece_errors(pieces: list[str], hypothesis: str) -> tuple[list[int], list[int]]:
    """Word errors and reference words per piece: ``hypothesis`` aligned (jiwer) to the
    pieces' normalised words joined, every error charged to its reference word's piece."""
    import jiwer

    owner: list[int] = []
    words: list[str] = []
    for k, piece in enumerate(pieces):
        norm = normalize(piece).split()
        words += norm
        owner += [k] * len(norm)
    errors = [0] * len(pieces)
    hyp = normalize(hypothesis)
    if not hyp:
        for k in owner:
            errors[k] += 1
        return errors, [owner.count(k) for k in range(len(pieces))]
    out = jiwer.process_words(" ".join(words), hyp)
    for chunk in out.alignments[0]:
        if chunk.type == "equal":
            continue
        if chunk.type == "insert":
            k = owner[min(chunk.ref_start_idx, len(owner) - 1)]
            errors[k] += chunk.hyp_end_idx - chunk.hyp_start_idx
        else:  # substitute, delete
            for i in range(chunk.ref_start_idx, chunk.ref_end_idx):
                errors[owner[i]] += 1
    return errors, [owner.count(k) for k in range(len(pieces))]


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


def summarise(items: list[Item], runs: dict[str, dict[str, Runs]],
              systems: tuple[str, ...] = SYSTEMS) -> dict[str, Any]:
    total_s = sum(item.seconds for item in items)
    out: dict[str, Any] = {}
    for name in systems:
        wall = sum(statistics.median(runs[i.name][name].wall) * i.seconds for i in items)
        cpu = sum(statistics.median(runs[i.name][name].cpu) * i.seconds for i in items)
        wer = error_rate([i.reference for i in items], [runs[i.name][name].text for i in items])
        out[name] = {"rtf": wall / total_s, "cpu_rtf": cpu / total_s, "wer": wer}
    out["files"] = []
    for item in items:
        row: dict[str, Any] = {"file": item.name, "duration_s": round(item.seconds, 1)}
        pieces = item.pieces or sentences(item.reference)
        errors = {}
        for name in systems:
            r = runs[item.name][name]
            errors[name], words = piece_errors(pieces, r.text)
            row[name] = {"rtf_median": statistics.median(r.wall), "rtf_p95": pct(r.wall, 4)["p95"],
                         "cpu_rtf_median": statistics.median(r.cpu),
                         "wer": sum(errors[name]) / max(1, sum(words)), "text": r.text}
        peers = [n for n in systems if n != "ours"]
        if "ours" in systems and peers:
            best = min(peers, key=lambda n: row[n]["wer"])
            paired = paired_wer(errors["ours"], errors[best], words)
            row["vs_best_peer"] = {"peer": best, "pieces": len(pieces), **paired.as_dict()}
        out["files"].append(row)
    if not {"ours", "faster_whisper_batched", "faster_whisper_default"} <= set(systems):
        return out
    ours, batched = out["ours"], out["faster_whisper_batched"]
    # The WER bound holds per file, against the better peer on that file.
    per_file = {row["file"]: row["vs_best_peer"]["diff"] for row in out["files"]}
    out["ratios"] = {
        "speedup_vs_batched": batched["rtf"] / ours["rtf"],
        "cpu_speedup_vs_batched": batched["cpu_rtf"] / ours["cpu_rtf"],
        "speedup_vs_default": out["faster_whisper_default"]["rtf"] / ours["rtf"],
        "wer_points_vs_batched": 100 * (ours["wer"] - batched["wer"]),
        "wer_points_vs_best_peer_per_file": per_file,
        "target_met": bool(batched["rtf"] / ours["rtf"] >= 2.0
                           and max(per_file.values()) <= 0.0),
    }
    return out


def show(summary: dict[str, Any], systems: tuple[str, ...] = SYSTEMS) -> None:
    rows = []
    for row in summary["files"]:
        for name in systems:
            r = row[name]
            rows.append([f"{row['file']} ({row['duration_s']} s)", name, f"{r['rtf_median']:.4f}",
                         f"{r['rtf_p95']:.4f}", f"{r['cpu_rtf_median']:.4f}",
                         f"{100 * r['wer']:.2f}"])
    for name in systems:
        s = summary[name]
        rows.append(["all files", name, f"{s['rtf']:.4f}", "", f"{s['cpu_rtf']:.4f}",
                     f"{100 * s['wer']:.2f}"])
    print_table(["file", "system", "RTF med", "RTF p95", "CPU RTF", "WER %"], rows)
    paired = [[row["file"], row["vs_best_peer"]["peer"], row["vs_best_peer"]["pieces"],
               f"{row['vs_best_peer']['a']:.2f}", f"{row['vs_best_peer']['b']:.2f}",
               f"{row['vs_best_peer']['diff']:+.2f}",
               "[{:+.2f}, {:+.2f}]".format(*row["vs_best_peer"]["ci95"])]
              for row in summary["files"] if "vs_best_peer" in row]
    if paired:
        print()
        print_table(["file", "better peer", "pieces", "ours %", "peer %", "diff pt", "95 % CI"],
                    paired, "ours vs the better peer, per file (paired bootstrap over pieces)")
    setup = summary["setup"]
    host = summary["host"]
    print(f"\nload average at start {setup['load_average_at_start'][0]:.1f}, at end "
          f"{setup['load_average_at_end'][0]:.1f} ({setup['cpu_count']} cores: {host['cpu']}, "
          f"{' '.join(host['isa']) or 'no AVX2 or AVX-512'}; CTranslate2 {host['ctranslate2']})")
    ratios = summary.get("ratios")
    if ratios:
        print(f"ours vs batched: {ratios['speedup_vs_batched']:.2f}x faster (wall), "
              f"{ratios['cpu_speedup_vs_batched']:.2f}x (CPU time), WER "
              f"{ratios['wer_points_vs_batched']:+.2f} points; vs default: "
              f"{ratios['speedup_vs_default']:.2f}x; target (>= 2x batched, per file no worse "
              f"than the better peer) met: {ratios['target_met']}")


def plot(summary: dict[str, Any], path: Path, title: str,
         systems: tuple[str, ...] = SYSTEMS) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_rtf, ax_wer) = plt.subplots(1, 2, figsize=(11, 4))
    files = [row["file"] for row in summary["files"]]
    width = 0.8 / len(systems)
    for k, name in enumerate(systems):
        xs = [i + k * width for i in range(len(files))]
        ax_rtf.bar(xs, [row[name]["rtf_median"] for row in summary["files"]], width, label=name)
        ax_wer.bar(xs, [100 * row[name]["wer"] for row in summary["files"]], width, label=name)
    for ax, label in ((ax_rtf, "real-time factor (lower is faster)"), (ax_wer, "WER %")):
        ax.set_xticks([i + width for i in range(len(files))], files, fontsize=7, rotation=30)
        ax.set_ylabel(label)
    ax_rtf.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--eval-manifest", type=Path, default=EVAL_MANIFEST,
                        help="the evaluation corpus whose speakers become long readings")
    parser.add_argument("--eval-min-speech-s", type=float, default=100.0,
                        help="speakers with at least this much speech get a reading (0: none)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--compute-type", default="auto")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--concat-minutes", type=float, default=0.0,
                        help="add a concatenation of the manifest's clips this long (0: none)")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS),
                        help="run only these (e.g. ours alone while tuning)")
    parser.add_argument("--ours-word-timestamps", action="store_true",
                        help="time every word in ours too (the peers' defaults do not)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("faster_whisper").setLevel(logging.WARNING)
    chosen = tuple(name for name in SYSTEMS if name in args.systems)

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
    if args.eval_min_speech_s > 0:
        items += build_speaker_readings(args.eval_manifest, args.eval_min_speech_s)
    if args.concat_minutes > 0:
        items.append(build_concatenation(english, args.concat_minutes))
    ours_extra: dict[int, dict[str, Any]] = {}
    systems = make_systems(peer.whisper, transcriber, args.ours_word_timestamps, ours_extra)
    systems = {name: systems[name] for name in chosen}
    load_at_start = os.getloadavg()
    if "ours" in systems:
        systems["ours"](items[0].audio[: 30 * SAMPLE_RATE])  # warm-up: VAD session, CT2 kernels
    runs = measure(items, systems, args.repeats)
    summary = summarise(items, runs, chosen)
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
    summary["host"] = host_info()
    show(summary, chosen)
    write_result(args.out, summary)
    png = args.out.with_suffix(".png")
    plot(summary, png, f"long-form, {info.name} {info.device}/{info.compute_type}", chosen)
    print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
