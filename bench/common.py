"""What every bench shares: the repository on the import path, percentiles, a printed table,
a JSON result next to it, the corpora, and paired comparisons with a confidence interval.

A bench compares two systems on the same utterances (old rule / new rule, ours / the peer). A
difference of a few words on a few hundred utterances is often noise, so a WER difference is
reported with a 95 % interval from a paired bootstrap over utterances (`paired_wer`): resample
the utterances with replacement, recompute both systems' WER on the same resample, and take the
2.5th and 97.5th percentiles of the difference. An interval that contains 0 is "not
distinguishable from zero" on that corpus.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # (a bench runs as `python bench/x.py`)
    sys.path.insert(0, str(REPO))

SHARED = REPO.parent / "shared"
DEV_MANIFEST = SHARED / "audio" / "manifest.jsonl"  # 26 short English clips and a long one
EVAL_MANIFEST = SHARED / "audio-eval" / "manifest.jsonl"  # 371 utterances, 45 speakers

BOOTSTRAP_ROUNDS = 2000


def pct(values: Sequence[float], digits: int = 1) -> dict[str, float | None]:
    """Median and p95 (and the count) of ``values``; None for an empty list."""
    if not len(values):
        return {"p50": None, "p95": None, "n": 0}
    arr = np.asarray(values, dtype=np.float64)
    return {"p50": round(float(np.percentile(arr, 50)), digits),
            "p95": round(float(np.percentile(arr, 95)), digits), "n": len(values)}


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "") -> None:
    """A plain aligned table on stdout (benches are read in terminals and CI logs)."""
    cells = [[str(h) for h in headers], *[["-" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    if title:
        print(title)
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def write_json(path: str | Path, result: dict[str, Any]) -> Path:
    """Write ``result`` as indented JSON (folders made as needed) and say where."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return path


@dataclass(frozen=True)
class PairedWer:
    """System A's WER minus system B's on the same utterances (points), with its 95 %
    bootstrap interval; ``a``/``b``: each system's WER (%)."""

    a: float
    b: float
    diff: float
    low: float
    high: float
    n: int

    @property
    def distinguishable(self) -> bool:
        """The interval does not contain zero."""
        return self.low > 0 or self.high < 0

    def __str__(self) -> str:
        return f"{self.diff:+.2f} [{self.low:+.2f}, {self.high:+.2f}]"

    def as_dict(self) -> dict[str, float | int | bool]:
        return {"a": self.a, "b": self.b, "diff": self.diff, "ci95": [self.low, self.high],
                "n": self.n, "distinguishable": self.distinguishable}


def paired_wer(errors_a: Sequence[int], errors_b: Sequence[int], words: Sequence[int],
               rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0) -> PairedWer:
    """Paired bootstrap over utterances: ``errors_a[i]``/``errors_b[i]`` are each system's word
    errors (substitutions + deletions + insertions) on utterance i, ``words[i]`` its reference
    length. WERs are pooled (total errors / total words), as a corpus WER is."""
    ea, eb, n = (np.asarray(x, dtype=np.float64) for x in (errors_a, errors_b, words))
    if not (len(ea) == len(eb) == len(n)) or not len(n) or n.sum() <= 0:
        raise ValueError("paired_wer needs the same utterances, with words, for both systems")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(n), size=(rounds, len(n)))
    diffs = 100 * (ea[picks].sum(1) - eb[picks].sum(1)) / np.maximum(n[picks].sum(1), 1)
    low, high = np.percentile(diffs, [2.5, 97.5])
    a, b = 100 * ea.sum() / n.sum(), 100 * eb.sum() / n.sum()
    return PairedWer(a=round(float(a), 2), b=round(float(b), 2), diff=round(float(a - b), 2),
                     low=round(float(low), 2), high=round(float(high), 2), n=len(n))


def paired_latency(a: Sequence[float], b: Sequence[float], q: float = 50,
                   rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0) -> tuple[float, float, float]:
    """The difference of the ``q``-th percentiles of two paired latency lists (A - B) and its
    95 % bootstrap interval."""
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(xa) != len(xb) or not len(xa):
        raise ValueError("paired_latency needs the same utterances for both systems")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(xa), size=(rounds, len(xa)))
    diffs = np.percentile(xa[picks], q, axis=1) - np.percentile(xb[picks], q, axis=1)
    low, high = np.percentile(diffs, [2.5, 97.5])
    return (round(float(np.percentile(xa, q) - np.percentile(xb, q)), 2),
            round(float(low), 2), round(float(high), 2))


@dataclass(frozen=True)
class UtteranceErrors:
    """One utterance's word errors and reference words, normalised and formatted (formatted:
    0/0 when its reference carries no case and punctuation, `engine.evaluation.formatted`)."""

    errors: int
    words: int
    formatted_errors: int
    formatted_words: int


def utterance_errors(reference: str, hypothesis: str) -> UtteranceErrors:
    """Word errors of ``hypothesis`` against ``reference``, as `engine.evaluation`'s corpus WERs
    count them (so summed over utterances they give the same pooled WER)."""
    import jiwer

    from engine.evaluation import formatted, formatted_tokens, normalize

    def count(ref: str, hyp: str) -> tuple[int, int]:
        if not ref.split():
            return 0, 0
        out = jiwer.process_words(ref, hyp)
        return int(out.substitutions + out.deletions + out.insertions), len(ref.split())

    norm = count(normalize(reference), normalize(hypothesis))
    form = (count(" ".join(formatted_tokens(reference)), " ".join(formatted_tokens(hypothesis)))
            if formatted(reference) else (0, 0))
    return UtteranceErrors(*norm, *form)


def balanced(entries: Sequence[Any], speakers: Sequence[str], per_speaker: int) -> list[Any]:
    """A fixed speaker-balanced subset: the first ``per_speaker`` entries of each speaker, in
    manifest order (0: all)."""
    if per_speaker <= 0:
        return list(entries)
    seen: dict[str, int] = {}
    out = []
    for entry, speaker in zip(entries, speakers, strict=True):
        seen[speaker] = seen.get(speaker, 0) + 1
        if seen[speaker] <= per_speaker:
            out.append(entry)
    return out


def speakers_of(manifest: str | Path) -> dict[str, str]:
    """File name -> the manifest's ``speaker`` field (the file name itself when it has none)."""
    out = {}
    for line in Path(manifest).read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out[Path(row["file"]).name] = str(row.get("speaker") or Path(row["file"]).name)
    return out
