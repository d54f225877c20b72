"""Kernel set x compute type: encoder and decoder time, WER on the short set and a long reading.

    python bench/compute_types.py --out compute_types.json [--kernels default avx2]
        [--compute-types int8 int16 float32] [--long-s 300]

For each CTranslate2 kernel set (``default``: the processor's own, MKL on Intel; ``avx2``:
``CT2_USE_MKL=0 CT2_FORCE_CPU_ISA=AVX2``, oneDNN, what an AVX2 AMD processor runs; a kernel set is
chosen when CTranslate2 loads, so each runs in a child process of this script) and each compute
type the kernels support, tiny.en is loaded with all cores as threads and:

- every English short clip of the tests' corpus (``--manifest``) is encoded (its 30 s padded
  window, as faster-whisper does) and decoded greedily, text only: the encoder's and the
  decoder's CPU time per clip (process time, so other work on the machine counts less) and the
  WER of the texts;
- the first speaker reading of the evaluation corpus of at least ``--long-s`` seconds (as
  bench/longform.py builds them) is transcribed by our long-file pipeline (`sottovoce
  transcribe`'s runner, `engine.files.transcribe_file`) with that compute type: its CPU time
  and WER.

Times are CPU seconds of this process and relative: compare rows of one run. The table is what
`engine.compute_choice` encodes as the default compute type for a processor (see there).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import EVAL_MANIFEST, KERNEL_SETS, TEST_MANIFEST, kernels_name, print_table, write_json
from evaluation import english, error_rate, read_manifest

from engine.audio.decode import load_audio  # noqa: E402
from engine.types import SAMPLE_RATE  # noqa: E402

COMPUTE_TYPES = ("int8", "int16", "float32")


def short_set(model_name: str, compute_type: str, manifest: Path) -> dict[str, Any]:
    """Encoder and greedy decoder CPU seconds summed over the short clips, and their WER."""
    from faster_whisper.tokenizer import Tokenizer

    from engine.asr.whisper_model import FasterWhisperModel

    holder = FasterWhisperModel(model_name, device="cpu", compute_type=compute_type)
    holder.load()
    model = holder.whisper
    tokenizer = Tokenizer(model.hf_tokenizer, False, task="transcribe", language="en")
    prompt = model.get_prompt(tokenizer, [], without_timestamps=True)
    entries = english(read_manifest(manifest))
    refs, hyps, encode_s, decode_s = [], [], 0.0, 0.0
    for n, entry in enumerate(entries):
        audio = load_audio(entry.path)[: 30 * SAMPLE_RATE]
        features = model.feature_extractor(audio, padding=30 * SAMPLE_RATE - len(audio))
        features = features[:, : model.feature_extractor.nb_max_frames]
        started = time.process_time()
        encoded = model.encode(features)
        middle = time.process_time()
        result = model.model.generate(encoded, [prompt], beam_size=1, max_length=224,
                                      suppress_blank=True)
        ended = time.process_time()
        if n > 0:  # the first call pays for kernel selection and caches: not counted
            encode_s += middle - started
            decode_s += ended - middle
        refs.append(entry.text)
        hyps.append(tokenizer.decode(result[0].sequences_ids[0]).strip())
    return {"clips": len(entries), "encoder_cpu_s": round(encode_s, 3),
            "decoder_cpu_s": round(decode_s, 3), "short_wer": round(error_rate(refs, hyps), 4)}


def long_reading(model_name: str, compute_type: str, min_s: float) -> dict[str, Any]:
    """Our long-file pipeline on one speaker reading of at least ``min_s`` seconds."""
    from longform import build_speaker_readings

    from engine.asr import local_runner
    from engine.files import transcribe_file
    from engine.longform import LongFormOptions

    items = build_speaker_readings(EVAL_MANIFEST, min_s)
    if not items:
        return {}
    item = min(items, key=lambda i: i.seconds)
    runner = local_runner(model_name, "cpu", files=True, compute_type=compute_type)
    runner.load()
    transcribe_file(item.audio[: 20 * SAMPLE_RATE], runner, LongFormOptions())  # warm-up
    started = time.process_time()
    text = transcribe_file(item.audio, runner, LongFormOptions()).transcript().text
    return {"long_item": item.name, "long_audio_s": round(item.seconds, 1),
            "long_cpu_s": round(time.process_time() - started, 2),
            "long_wer": round(error_rate([item.reference], [text]), 4)}


def child(args: argparse.Namespace) -> int:
    """One kernel set (this process's environment): a JSON line per compute type."""
    import ctranslate2

    supported = ctranslate2.get_supported_compute_types("cpu")
    for compute_type in args.compute_types:
        if compute_type not in supported:
            print(json.dumps({"compute_type": compute_type, "supported": False}), flush=True)
            continue
        row: dict[str, Any] = {"compute_type": compute_type, "supported": True,
                               "kernels": kernels_name()}
        row.update(short_set(args.model, compute_type, args.manifest))
        if args.long_s > 0:
            row.update(long_reading(args.model, compute_type, args.long_s))
        print("ROW " + json.dumps(row), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", nargs="+", choices=sorted(KERNEL_SETS),
                        default=["default", "avx2"])
    parser.add_argument("--compute-types", nargs="+", default=list(COMPUTE_TYPES))
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--manifest", type=Path, default=TEST_MANIFEST)
    parser.add_argument("--long-s", type=float, default=100.0,
                        help="the long reading's least length (0: none)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.child:
        return child(args)
    rows: list[dict[str, Any]] = []
    for kernels in args.kernels:
        cmd = [sys.executable, __file__, "--child", "--model", args.model, "--manifest",
               str(args.manifest), "--long-s", str(args.long_s), "--compute-types",
               *args.compute_types]
        out = subprocess.run(cmd, env={**os.environ, **KERNEL_SETS[kernels]}, text=True,
                             stdout=subprocess.PIPE, check=False)
        print(out.stdout, end="", flush=True)
        if out.returncode != 0:
            raise RuntimeError(f"{kernels} kernels failed (status {out.returncode})")
        found = [json.loads(line[4:]) for line in out.stdout.splitlines()
                 if line.startswith("ROW ")]
        rows += [{**row, "kernel_set": kernels} for row in found]
    print_table(["kernels", "compute type", "encoder CPU s", "decoder CPU s", "short WER %",
                 "long CPU s", "long WER %"],
                [[r["kernel_set"], r["compute_type"], r["encoder_cpu_s"], r["decoder_cpu_s"],
                  f"{100 * r['short_wer']:.2f}", r.get("long_cpu_s", "-"),
                  f"{100 * r['long_wer']:.2f}" if "long_wer" in r else "-"] for r in rows],
                f"{args.model}, kernel set x compute type")
    if args.out:
        write_json(args.out, {"model": args.model, "rows": rows,
                              "load_average_at_end": os.getloadavg()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
