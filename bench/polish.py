"""AI polish: the latency it adds to a final and how often the guard rejects the answer.

    python bench/polish.py [--corpus tests|eval] [--limit N] [--presets clean,list]
                           [--budget 2.0] [--out bench/results/polish.json]

Starts the real llama-cpp-python server on 127.0.0.1 with SmolLM2-135M-Instruct (the llm venv of
.ci/llm-venv.sh, as tests/test_polish.py does) and sends it the corpus's finals: the reference
texts of tests/audio/manifest.jsonl (``--corpus tests``, 36) or of
/work/shared/audio-eval/manifest.jsonl (``--corpus eval``, 371), in sentence case with a final
period as Whisper writes them (LibriSpeech's references are upper case without punctuation),
through the app's own client and guard (engine.polish): one request per final, one at a time,
after one warm-up request. For each preset (clean, the default, and a formatting one in the
same run) it prints and writes:
  added ms    request sent -> answer back (p50, p95, max): what a final waits for its polish
  over budget answers slower than --budget: the app would have inserted the raw text
  rejected     how often the guard threw the answer away, by cause (empty, refusal, preamble,
               length, words), and how often the answer was used
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from polish_server import API_KEY, MODEL_ALIAS, llama_server  # noqa: E402

from engine.polish import ChatClient, PolishError, check_polish, polish_messages  # noqa: E402
from engine.polish.guard import CAUSES, max_tokens  # noqa: E402

MANIFESTS = {"tests": REPO / "tests" / "audio" / "manifest.jsonl",
             "eval": Path("/work/shared/audio-eval/manifest.jsonl")}


def finals(corpus: str, limit: int) -> list[str]:
    """The corpus's reference texts as a final reads: sentence case, a closing period."""
    texts = []
    for line in MANIFESTS[corpus].read_text(encoding="utf-8").splitlines():
        text = json.loads(line).get("text", "").strip()
        if text and json.loads(line).get("language", "en") == "en":
            text = text.lower()
            texts.append(text[0].upper() + text[1:] + ("" if text[-1] in ".?!" else "."))
    return texts[:limit] if limit else texts


def run_preset(client: ChatClient, texts: list[str], preset: str,
               budget_s: float) -> dict[str, Any]:
    latencies: list[float] = []
    causes: collections.Counter[str] = collections.Counter()
    examples: dict[str, dict[str, str]] = {}
    for text in texts:
        started = time.monotonic()
        try:
            reply = client.complete(polish_messages(text, preset), 60.0,
                                    max_tokens(text, preset))
        except PolishError as exc:
            causes["error"] += 1
            examples.setdefault("error", {"raw": text, "answer": str(exc)})
            continue
        ms = 1000 * (time.monotonic() - started)
        latencies.append(ms)
        verdict = check_polish(text, reply.text, preset, reply.truncated)
        cause = "used" if verdict.ok else verdict.cause
        causes[cause] += 1
        examples.setdefault(cause, {"raw": text, "answer": reply.text})
    n = len(texts)
    over = sum(ms > budget_s * 1000 for ms in latencies)
    return {
        "preset": preset, "finals": n,
        "added_ms": {"p50": float(np.percentile(latencies, 50)),
                     "p95": float(np.percentile(latencies, 95)),
                     "max": max(latencies), "mean": statistics.fmean(latencies)}
        if latencies else {},
        "over_budget": over,
        "outcomes": {cause: causes.get(cause, 0) for cause in ("used", *CAUSES, "error")},
        "examples": examples,
    }


def print_table(rows: list[dict[str, Any]], budget_s: float) -> None:
    head = (f"{'preset':<8} {'n':>4} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} "
            f"{'>' + format(budget_s, 'g') + ' s':>6} {'used':>6} "
            + " ".join(f"{c:>8}" for c in (*CAUSES, "error")))
    print(head)
    print("-" * len(head))
    for row in rows:
        ms, out, n = row["added_ms"], row["outcomes"], row["finals"]
        print(f"{row['preset']:<8} {n:>4} {ms.get('p50', 0):>8.0f} {ms.get('p95', 0):>8.0f} "
              f"{ms.get('max', 0):>8.0f} {row['over_budget']:>6} "
              f"{100 * out['used'] / n:>5.0f}% "
              + " ".join(f"{100 * out[c] / n:>7.0f}%" for c in (*CAUSES, "error")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", choices=tuple(MANIFESTS), default="tests")
    parser.add_argument("--limit", type=int, default=0, help="only the first N finals")
    parser.add_argument("--presets", default="clean,list")
    parser.add_argument("--budget", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "polish.json")
    args = parser.parse_args()
    texts = finals(args.corpus, args.limit)
    rows = []
    with llama_server(API_KEY) as url:
        client = ChatClient(url, MODEL_ALIAS, API_KEY)
        client.complete(polish_messages("Warm up.", "clean"), 60.0, 16)
        for preset in args.presets.split(","):
            rows.append(run_preset(client, texts, preset.strip(), args.budget))
        client.close()
    load = os.getloadavg()[0]
    print(f"AI polish through llama-cpp-python + SmolLM2-135M-Instruct Q4_1, {len(texts)} "
          f"finals of the {args.corpus} corpus, budget {args.budget:g} s, load {load:.1f}")
    print_table(rows, args.budget)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"corpus": args.corpus, "budget_s": args.budget,
                                    "model": "SmolLM2-135M-Instruct Q4_1", "load": load,
                                    "presets": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
