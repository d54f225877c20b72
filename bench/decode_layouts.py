"""Decode stream layouts for the live engine: how long a 2-5 s final takes alone and with a
second decode running at the same time, per (replicas x threads) layout of the same model.

    python bench/decode_layouts.py --runs 3 --out bench/results/decode_layouts.json

The live engine decodes on ``runner.streams`` replicas (app.engine_factory: two one-thread
replicas on a CPU), so a final never waits behind a partial and a speculative final can run
beside one. Whether that beats one two-thread replica (each decode faster, but serialised)
depends on the machine and on how busy it is: this measures the layouts interleaved, in one
sitting, with the load average. "pair" is the slower of two identical decodes started together.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

from common import REPO, pct, print_table, write_json

from engine.asr.ct2_decoder import Ct2Runner  # noqa: E402
from engine.audio.decode import load_audio  # noqa: E402
from engine.types import DecodeOptions, DecodeRequest  # noqa: E402

CLIPS = ("arctic-aew-a0001.flac", "arctic-axb-a0004.flac", "cmusphinx-goforward.flac",
         "ls-tc-6930-75918-0000.flac")
LAYOUTS = {"2x1": (2, 1), "1x2": (1, 2), "2x2": (2, 2)}  # replicas x threads each
# A first-attempt final as the policy asks for one (greedy, word times, short window).
FINAL = DecodeOptions(language="en", word_timestamps=True, beam_size=1,
                      temperatures=(0.0, 0.4), short_context=True)


def timed(runner: Ct2Runner, request: DecodeRequest) -> float:
    started = time.perf_counter()
    runner.decode_batch([request])
    return (time.perf_counter() - started) * 1000


def pair(runner: Ct2Runner, request: DecodeRequest) -> float:
    out: list[float] = []
    threads = [threading.Thread(target=lambda: out.append(timed(runner, request)))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return max(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="passes over the clips")
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--out", type=Path,
                        default=REPO / "bench" / "results" / "decode_layouts.json")
    parser.add_argument("--smoke", action="store_true", help="one clip, once")
    args = parser.parse_args(argv)
    names = CLIPS[:1] if args.smoke else CLIPS
    if args.smoke:
        args.runs = 1
    clips = [load_audio(REPO / "tests" / "audio" / name) for name in names]
    runners = {}
    for name, (streams, threads) in LAYOUTS.items():
        runners[name] = Ct2Runner(args.model, device="cpu", streams=streams, cpu_threads=threads)
        runners[name].load()
    load_start = os.getloadavg()[0]
    alone: dict[str, list[float]] = {name: [] for name in LAYOUTS}
    both: dict[str, list[float]] = {name: [] for name in LAYOUTS}
    for _ in range(args.runs):
        for clip in clips:
            request = DecodeRequest(clip, FINAL)
            for name, runner in runners.items():  # interleaved: the same load for each
                alone[name].append(timed(runner, request))
                both[name].append(pair(runner, request))
    result = {"layouts": {name: {"alone_ms": pct(alone[name], 0), "pair_ms": pct(both[name], 0)}
                          for name in LAYOUTS},
              "clips": list(names), "runs": args.runs, "cpu_count": os.cpu_count(),
              "load_average_1m": [load_start, os.getloadavg()[0]]}
    print_table(("layout", "alone p50 ms", "p95", "pair p50 ms", "p95"),
                [(name, r["alone_ms"]["p50"], r["alone_ms"]["p95"], r["pair_ms"]["p50"],
                  r["pair_ms"]["p95"]) for name, r in result["layouts"].items()])
    print(f"1-minute load average before/after: {load_start:.1f} / {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
