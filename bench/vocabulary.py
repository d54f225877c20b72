"""Custom vocabulary: WER and per-term hits with an empty vs a filled vocabulary, one run.

    python bench/vocabulary.py --manifest tests/audio/manifest.jsonl --out vocabulary.json

Every short English clip of the manifest is transcribed four ways, same model (tiny.en),
same run: {push-to-talk dictation, file} x {no vocabulary, the proper nouns of the clips'
reference texts (`PROPER_NOUNS`)}.
  ptt   the local live engine (`LocalLiveEngine`, simulated time, real Silero VAD) with the
        key held over the whole clip (0.5 s of silence either side), finals joined
  file  `engine.files.transcribe_file` as the CLI runs it (beam 5, `--vocabulary FILE`)
WER is the corpus WER after Whisper's English normaliser. A term *hit* is a clip whose
reference holds the term and whose text holds it spelled exactly (case kept: "Concorde" or
"concord" is a miss); an *insertion* is a term in the text of a clip whose reference does not
hold it (a recited list would show here). ``--decoys N`` puts N unrelated terms first (a long
list: which terms does a short utterance get?), ``--no-relevance`` turns off the live
decodes' ordering by what the partials heard. Prints a table and writes
``{"paths": {"ptt": {"empty": {...}, "filled": {...}}, ...}, "terms": [...], "loadavg": ...}``.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from pathlib import Path
from typing import Any

from common import TEST_MANIFEST, print_table, write_json
from evaluation import ManifestEntry, english, error_rate, read_manifest  # noqa: E402

from app.commands.transcribe import decode_options  # noqa: E402
from engine.asr.ct2_decoder import Ct2Runner  # noqa: E402
from engine.audio.sources import FileSource  # noqa: E402
from engine.core.policy import PolicyOptions  # noqa: E402
from engine.events import Event, FinalText  # noqa: E402
from engine.files import transcribe_file  # noqa: E402
from engine.live import LiveOptions, LocalLiveEngine  # noqa: E402
from engine.types import SAMPLE_RATE, Segment, Transcript  # noqa: E402
from engine.vocabulary import Vocabulary  # noqa: E402

# The proper nouns of the short English clips' reference texts (names of people, places and
# the tool the MFA clips talk about), spelled as they should come out.
PROPER_NOUNS = ("Concord", "Quilter", "Philip Steels", "Whittemore", "Tom", "Phil",
                "Abigail Claflin", "Abbie", "Americans", "Montreal Forced Aligner")
# --decoys N puts N of these first (a user's long list, none said in the clips): a short
# utterance has room for a few terms only, so this measures which ones it gets.
DECOYS = ("Kubernetes", "Anthropic", "PostgreSQL", "Grafana", "Terraform", "Kafka",
          "Zanzibar", "Reykjavik", "Ouagadougou", "Nakamura", "Okonkwo", "Rasmussen",
          "Szczepanski", "Vanderbilt", "Ljubljana", "Quetzalcoatl", "Bartholomew", "Eustace",
          "Wilhelmina", "Thaddeus", "Guinevere", "Przemysl", "Oaxaca", "Tegucigalpa",
          "Chattahoochee", "Mississauga", "Saskatoon", "Yellowknife", "Kamchatka", "Vladivostok")
LEAD_S = 0.5


def ptt_text(runner: Ct2Runner, entry: ManifestEntry, terms: tuple[str, ...]) -> str:
    events: list[Event] = []
    source = FileSource(entry.path, lead_silence_s=LEAD_S, tail_silence_s=LEAD_S)
    options = LiveOptions(mode="ptt", journal=False, policy=PolicyOptions(vocabulary=terms))
    engine = LocalLiveEngine(events.append, source=source, runner=runner, options=options)
    engine.begin_utterance(at=0)  # held over the whole clip
    engine.end_utterance(at=int((entry.duration_s + 2 * LEAD_S) * SAMPLE_RATE))
    engine.start()
    if not engine.wait(600):
        raise RuntimeError(f"{entry.path.name}: the engine did not stop")
    return " ".join(e.text for e in events if isinstance(e, FinalText) and e.text)


def file_text(runner: Ct2Runner, entry: ManifestEntry, terms: tuple[str, ...]) -> str:
    options = decode_options(None, 5, "txt")
    if terms:
        options = type(options)(**{**options.__dict__,
                                   "hotwords": Vocabulary({"": terms}).as_prompt()})
    parts = [s for s in transcribe_file(entry.path, runner, options) if isinstance(s, Segment)]
    return Transcript(segments=tuple(parts)).text


def term_counts(entries: list[ManifestEntry], texts: list[str]) -> dict[str, dict[str, int]]:
    out = {}
    for term in PROPER_NOUNS:
        said = re.compile(rf"\b{re.escape(term)}\b", re.IGNORECASE)
        exact = re.compile(rf"\b{re.escape(term)}\b")
        refs = [bool(said.search(e.text)) for e in entries]
        out[term] = {
            "clips": sum(refs),
            "hits": sum(1 for r, t in zip(refs, texts, strict=True) if r and exact.search(t)),
            "insertions": sum(1 for r, t in zip(refs, texts, strict=True)
                              if not r and said.search(t)),
        }
    return out


def run_path(name: str, runner: Ct2Runner, entries: list[ManifestEntry],
             terms: tuple[str, ...]) -> dict[str, Any]:
    decode = ptt_text if name == "ptt" else file_text
    started = time.perf_counter()
    texts = [decode(runner, e, terms) for e in entries]
    wall = time.perf_counter() - started
    counts = term_counts(entries, texts)
    return {"wer": error_rate([e.text for e in entries], texts), "wall_s": wall,
            "hits": sum(c["hits"] for c in counts.values()),
            "insertions": sum(c["insertions"] for c in counts.values()),
            "terms": counts, "texts": dict(zip([e.path.name for e in entries], texts,
                                               strict=True))}


def print_results(result: dict[str, Any]) -> None:
    clips = sum(1 for _ in result["terms_in_clips"] if _)
    print_table(("path", "vocabulary", "WER %", "hits", "inserted", "wall s"),
                [(path, kind, round(100 * r["wer"], 2), f"{r['hits']}/{clips}", r["insertions"],
                  round(r["wall_s"], 1))
                 for path, runs in result["paths"].items() for kind, r in runs.items()])
    print()
    runs = [(f"{p} {k}", r["terms"]) for p, by_kind in result["paths"].items()
            for k, r in by_kind.items()]
    print_table(("term", *(name for name, _ in runs)),
                [(term, *(f"{t[term]['hits']}/{t[term]['clips']} +{t[term]['insertions']}"
                          for _, t in runs)) for term in PROPER_NOUNS])
    print(f"\n{result['files']} clips, model {result['model']}, load average at start "
          f"{result['loadavg_start']}, at end {result['loadavg_end']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", default=TEST_MANIFEST, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--paths", default="ptt,file", help="ptt, file or both (ptt,file)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N clips (smoke)")
    parser.add_argument("--decoys", type=int, default=0,
                        help="put N unrelated terms before the clips' names (at most 30)")
    parser.add_argument("--no-relevance", action="store_true",
                        help="live decodes take terms in list order only (the comparison)")
    parser.add_argument("--kinds", default="empty,filled", help="empty, filled or both")
    parser.add_argument("--smoke", action="store_true", help="two clips, push-to-talk only")
    args = parser.parse_args(argv)
    if args.smoke:
        args.limit, args.paths = 2, "ptt"
    entries = english(read_manifest(args.manifest), ("short",))
    if args.limit:
        entries = entries[:args.limit]
    if args.no_relevance:
        from engine.core import hotwords

        hotwords.by_relevance = lambda terms, heard: tuple(terms)  # type: ignore[assignment]
    filled = (*DECOYS[:args.decoys], *PROPER_NOUNS)
    loadavg_start = os.getloadavg()
    runner = Ct2Runner(args.model)
    runner.load()
    result: dict[str, Any] = {"paths": {}, "files": len(entries), "model": args.model,
                              "vocabulary": list(filled), "relevance": not args.no_relevance,
                              "loadavg_start": [round(x, 2) for x in loadavg_start]}
    for path in args.paths.split(","):
        result["paths"][path] = {}
        for kind, terms in (("empty", ()), ("filled", filled)):
            if kind not in args.kinds.split(","):
                continue
            result["paths"][path][kind] = run_path(path, runner, entries, terms)
            r = result["paths"][path][kind]
            print(f"{path} {kind}: WER {100 * r['wer']:.2f}%, {r['hits']} hits", flush=True)
    result["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    first = next(iter(next(iter(result["paths"].values())).values()))["terms"]
    result["terms_in_clips"] = [t for t in PROPER_NOUNS for _ in range(first[t]["clips"])]
    print()
    print_results(result)
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
