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
import sys
import time
from pathlib import Path
from typing import Any

from common import EVAL_MANIFEST, REPO, TEST_MANIFEST, pct, print_table, write_json

from engine.polish import ChatClient, PolishError, check_polish, polish_messages
from engine.polish.guard import CAUSES, max_tokens

sys.path.insert(0, str(REPO / "tests"))  # the tests' LLM server
from polish_server import API_KEY, MODEL_ALIAS, llama_server  # noqa: E402

MANIFESTS = {"tests": TEST_MANIFEST, "eval": EVAL_MANIFEST}


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
        "added_ms": {**pct(latencies, 0), "max": round(max(latencies), 0)} if latencies else {},
        "over_budget": over,
        "outcomes": {cause: causes.get(cause, 0) for cause in ("used", *CAUSES, "error")},
        "examples": examples,
    }


def print_results(rows: list[dict[str, Any]], budget_s: float) -> None:
    outcomes = ("used", *CAUSES, "error")
    print_table(("preset", "n", "p50 ms", "p95 ms", "max ms", f">{budget_s:g} s",
                 *(f"{c} %" for c in outcomes)),
                [(row["preset"], row["finals"], row["added_ms"].get("p50"),
                  row["added_ms"].get("p95"), row["added_ms"].get("max"), row["over_budget"],
                  *(round(100 * row["outcomes"][c] / row["finals"]) for c in outcomes))
                 for row in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", choices=tuple(MANIFESTS), default="tests")
    parser.add_argument("--limit", type=int, default=0, help="only the first N finals")
    parser.add_argument("--presets", default="clean,list")
    parser.add_argument("--budget", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "polish.json")
    parser.add_argument("--smoke", action="store_true", help="two finals, the clean preset")
    args = parser.parse_args()
    if args.smoke:
        args.corpus, args.limit, args.presets = "tests", 2, "clean"
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
    print_results(rows, args.budget)
    write_json(args.out, {"corpus": args.corpus, "budget_s": args.budget,
                          "model": "SmolLM2-135M-Instruct Q4_1", "load": load, "presets": rows})


if __name__ == "__main__":
    main()
