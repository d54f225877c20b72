"""Where a batched server decode spends its time: one ``decode_batch`` of N requests against N
single calls, split into encoder, generate, alignment and the rest (Python: features, guards,
tokenizing), for the request mixes the server's streaming policy produces.

    python bench/batch_profile.py --manifest tests/audio/manifest.jsonl [--repeats 3] \
        [--out FILE.json]
    python bench/batch_profile.py --smoke --out /tmp/batch.json   # seconds: 2 requests, once

Scenarios (N = 8 by default, real English speech from the manifest):
- ``partials_similar``: greedy, short window, no prompt/words, ~3 s each (a steady partial load);
- ``partials_mixed``: the same at 1-8 s (partials of utterances at different stages);
- ``finals_similar`` / ``finals_mixed``: beam 5, words, a prompt, temperatures (0.0, 0.4);
- ``mixed``: half partials, half finals (what one gather window holds under load);
- ``finals_overload``: 16 whole utterances (<= 12 s) as finals with prompts: the work of an
  overloaded server, whose policies have backed partials off.
Modes: ``single`` (N calls), ``batched`` (one call; on a CPU its items are still encoded one
by one, see `engine.asr.ct2_passes.EncodedBatch`), ``scheduler`` (as the server's round: runs
of similar length, `split_by_length`, each one call, without prompts).
Batched and single runs are interleaved in every repeat, so load from other processes hits
both alike; medians are reported, in milliseconds of process CPU time by default (``--clock
wall`` for wall time): on a shared machine the wall clock mostly measures the neighbours.
The ``x_`` rows are speedups over ``single`` (above 1: the batch costs less).
Then the encoder alone (n x frames in one call against n calls) and generate() alone (k copies
of one encoded chunk, cost per item at k = 1..16, greedy and beam 5).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from common import TEST_MANIFEST as DEFAULT_MANIFEST
from common import print_table, write_json
from evaluation import english, read_manifest  # noqa: E402

from engine.asr.ct2_decoder import Ct2Runner  # noqa: E402
from engine.audio.decode import load_audio  # noqa: E402
from engine.server.scheduler import SchedulerOptions, split_by_length, without_prompts  # noqa: E402
from engine.types import DecodeOptions, DecodeRequest  # noqa: E402

SR = 16_000
# What "ms" means in the tables: process CPU time (default; other processes on a shared
# machine slow the wall clock far more than they change the work done) or wall time.
CLOCK: list[Any] = [time.process_time]
# N calls; one call; the server's way (split by length, no prompts)
MODES = ("single", "batched", "scheduler")
MAX_PAD_RATIO = SchedulerOptions().max_pad_ratio
PARTIAL = DecodeOptions(language="en", word_timestamps=False, beam_size=1, temperatures=(0.0,),
                        short_context=True)
FINAL = DecodeOptions(language="en", word_timestamps=True, beam_size=5,
                      temperatures=(0.0, 0.4), short_context=True,
                      prompt="And so my fellow Americans, ask not what your country can do.")


class TimedModel:
    """Wraps the CTranslate2 Whisper model and adds up the seconds spent in each call."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.seconds: dict[str, float] = defaultdict(float)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._model, name)
        if name not in ("encode", "generate", "align", "detect_language"):
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = CLOCK[0]()
            try:
                return attr(*args, **kwargs)
            finally:
                self.seconds[name] += CLOCK[0]() - started
        return timed


def scenarios(clips: list[np.ndarray], whole: list[tuple[np.ndarray, str]], n: int
              ) -> dict[str, list[DecodeRequest]]:
    rng = np.random.default_rng(7)

    def cut(i: int, seconds: float) -> np.ndarray:
        audio = clips[i % len(clips)]
        return np.ascontiguousarray(audio[:int(min(len(audio), seconds * SR))])

    similar = [3.0 + 0.2 * rng.random() for _ in range(n)]
    mixed = list(np.linspace(1.0, 8.0, n))
    return {
        "partials_similar": [DecodeRequest(cut(i, s), PARTIAL) for i, s in enumerate(similar)],
        "partials_mixed": [DecodeRequest(cut(i, s), PARTIAL) for i, s in enumerate(mixed)],
        "finals_similar": [DecodeRequest(cut(i, s), FINAL) for i, s in enumerate(similar)],
        "finals_mixed": [DecodeRequest(cut(i, s), FINAL) for i, s in enumerate(mixed)],
        "mixed": [DecodeRequest(cut(i, s), PARTIAL if i % 2 else FINAL)
                  for i, s in enumerate(mixed)],
        # What an overloaded server holds: whole utterances' finals (the policy has backed
        # partials off), each with the previous utterance's text as prompt, as the policy
        # gives it (about 40 characters per second of audio, at most 200).
        "finals_overload": [DecodeRequest(audio, replace(FINAL, prompt=whole[i - 1][1][
            :min(200, int(40 * len(audio) / SR))])) for i, (audio, _) in enumerate(whole)],
        "finals_overload_noprompt": [DecodeRequest(audio, replace(FINAL, prompt=None))
                                     for audio, _ in whole],
    }


def measure(runner: Ct2Runner, timed: TimedModel, requests: list[DecodeRequest],
            mode: str) -> dict[str, float]:
    timed.seconds.clear()
    started = CLOCK[0]()
    if mode == "scheduler":  # as one scheduler round: runs of similar length, in turn
        results = [r for group in split_by_length(
            [SimpleNamespace(request=q) for q in requests], MAX_PAD_RATIO)  # type: ignore[misc]
            for r in runner.decode_batch(without_prompts([g.request for g in group]))]
    elif mode != "single":
        results = runner.decode_batch(requests)
    else:
        results = [runner.decode_batch([request])[0] for request in requests]
    wall = CLOCK[0]() - started
    parts = {k: timed.seconds.get(k, 0.0) for k in ("encode", "generate", "align")}
    # A fallback re-decodes on the 30 s window: count them, they dominate when they happen.
    padded = sum(r.extra.get("path") == "padded" for r in results)
    return {"wall": wall, **parts, "other": wall - sum(parts.values()), "padded": padded}


def decoder_scaling(whisper: Any, audio: np.ndarray, repeats: int) -> list[dict[str, float]]:
    """generate() alone on k copies of one encoded 4 s chunk: ms per item at k = 1..16, greedy
    and beam 5. Flat per-item cost means the decoder does not batch on this machine."""
    import ctranslate2
    from faster_whisper.tokenizer import Tokenizer

    model = whisper.model
    features = whisper.feature_extractor(audio[:4 * SR])[:, :400]
    features = np.pad(features, ((0, 0), (0, 100)))[None].astype(np.float32)
    encoded = np.asarray(model.encode(ctranslate2.StorageView.from_array(features)))
    prompt = list(Tokenizer(whisper.hf_tokenizer, False, task="transcribe",
                            language="en").sot_sequence)
    rows = []
    for beam in (1, 5):
        for k in (1, 2, 4, 8, 16):
            batch = ctranslate2.StorageView.from_array(np.ascontiguousarray(
                np.repeat(encoded, k, axis=0)))
            times = []
            for _ in range(repeats):
                started = CLOCK[0]()
                model.generate(batch, [prompt] * k, beam_size=beam, max_length=64)
                times.append(CLOCK[0]() - started)
            rows.append({"beam": beam, "k": k, "ms_per_item": round(
                statistics.median(times) * 1000 / k, 1)})
    return rows


def encoder_scaling(model: Any, frames: int, n: int, repeats: int) -> dict[str, float]:
    """The encoder alone: one call on n x frames against n calls on 1 x frames (ms)."""
    import ctranslate2

    features = np.random.default_rng(1).standard_normal((n, 80, frames)).astype(np.float32)
    single, batch = [], []
    for _ in range(repeats):
        started = CLOCK[0]()
        for i in range(n):
            model.encode(ctranslate2.StorageView.from_array(features[i:i + 1]))
        single.append(CLOCK[0]() - started)
        started = CLOCK[0]()
        model.encode(ctranslate2.StorageView.from_array(features))
        batch.append(CLOCK[0]() - started)
    return {"frames": frames, "single_ms": round(statistics.median(single) * 1000, 1),
            "batched_ms": round(statistics.median(batch) * 1000, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", default=DEFAULT_MANIFEST, type=Path)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--threads", type=int, default=0, help="CTranslate2 intra threads")
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--modes", default=",".join(MODES), help="single first, then others")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--smoke", action="store_true",
                        help="N = 2, one repeat, one scenario, no scaling studies: seconds")
    args = parser.parse_args(argv)
    if args.smoke:
        args.n, args.repeats, args.only = 2, 1, args.only or "partials_similar"
    CLOCK[0] = time.process_time if args.clock == "cpu" else time.perf_counter
    entries = english(read_manifest(args.manifest))
    clips = [load_audio(e.path) for e in entries if e.duration_s >= 8.0]
    whole = [(load_audio(e.path), e.text) for e in entries if e.duration_s <= 12.0][:16]
    runner = Ct2Runner(args.model, cpu_threads=args.threads)
    runner.load()
    timed = TimedModel(runner.model.whisper.model)
    runner.model.whisper.model = timed  # every ct2 call of the runner now goes through the timer
    runner.decode_batch([DecodeRequest(clips[0][:3 * SR], PARTIAL)])  # warm-up
    results: dict[str, Any] = {}
    for name, requests in scenarios(clips, whole, args.n).items():
        if args.only and name not in args.only.split(","):
            continue
        modes = [m for m in MODES if m in args.modes.split(",")]
        runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
        for _ in range(args.repeats):
            for mode in modes:
                runs[mode].append(measure(runner, timed, requests, mode))
        results[name] = {mode: {k: round(statistics.median(r[k] for r in rs)
                                         * (1 if k == "padded" else 1000), 1)
                                for k in rs[0]} for mode, rs in runs.items()}
        row = results[name]
        for mode in modes[1:]:
            row[f"x_{mode}"] = {k: round(row["single"][k] / max(row[mode][k], 1e-6), 2)
                                for k in row["single"] if k != "padded"}
    print_table(("scenario", "mode", "total ms", "encode", "generate", "align", "other", "padded"),
                [(name, mode, r["wall"], r["encode"], r["generate"], r["align"], r["other"],
                  r.get("padded", "")) for name, row in results.items() for mode, r in row.items()])
    if args.smoke:
        if args.out:
            write_json(args.out, results)
        return 0
    scaling = [encoder_scaling(timed._model, f, args.n, args.repeats) for f in (300, 500, 900)]
    for row in scaling:
        print(f"encoder only, {args.n} x {row['frames']} frames: single {row['single_ms']} ms, "
              f"batched {row['batched_ms']} ms")
    results["encoder_scaling"] = {str(r["frames"]): r for r in scaling}
    decoder = decoder_scaling(runner.model.whisper, clips[0], args.repeats)
    for beam in (1, 5):
        print(f"generate only, beam {beam}, ms per item at k = 1, 2, 4, 8, 16: "
              + ", ".join(str(r["ms_per_item"]) for r in decoder if r["beam"] == beam))
    results["decoder_scaling"] = decoder
    if args.out:
        write_json(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
