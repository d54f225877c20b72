"""What every bench shares: the repository on the import path, percentiles, a printed table,
a JSON result next to it, the corpora and a speech mix of them, and paired comparisons with a
confidence interval.

A bench runs as ``python bench/NAME.py``: bench/ is then first on the import path, so a bench
starts with ``from common import ...``, which puts the repository on the path for ``engine``
and ``app``. ``--smoke`` (or ``--limit N``) runs every bench on one or two tiny inputs in
seconds; tests/test_bench_smoke.py runs each one so and checks its JSON.

A bench compares two systems on the same utterances (old rule / new rule, ours / the peer). A
difference of a few words on a few hundred utterances is often noise, so a WER difference is
reported with a 95 % interval from a paired bootstrap over utterances (`paired_wer`): resample
the utterances with replacement, recompute both systems' WER on the same resample, and take the
2.5th and 97.5th percentiles of the difference. An interval that contains 0 is "not
distinguishable from zero" on that corpus.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # (a bench runs as `python bench/x.py`)
    sys.path.insert(0, str(REPO))
if str(REPO / "bench") not in sys.path:  # (a test imports `bench.common`, which reads
    sys.path.append(str(REPO / "bench"))  # `evaluation`; last, so it shadows nothing)

from engine.types import SAMPLE_RATE  # noqa: E402

SHARED = REPO.parent / "shared"
DEV_MANIFEST = SHARED / "audio" / "manifest.jsonl"  # 26 short English clips and a long one
TEST_MANIFEST = REPO / "tests" / "audio" / "manifest.jsonl"  # the tests' corpus, in the repo
EVAL_MANIFEST = SHARED / "audio-eval" / "manifest.jsonl"  # 371 utterances, 45 speakers

BOOTSTRAP_ROUNDS = 2000
PAUSES_S = (0.4, 0.7, 1.0, 1.5, 2.5)  # between utterances of a speech mix, cycled
LONG_PAUSE_S = 8.0  # every 10th gap: a silence the pipelines should skip


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


# Instruction sets that change CTranslate2's speed (its int8 GEMM kernels, MKL or oneDNN) and
# its float results (tests/test_wer.py): a speed ratio measured on one processor need not hold on
# another. On the 2-core AMD EPYC (AVX2, oneDNN) of 4 December 2026 our long-file pipeline was
# 1.7x faster than faster-whisper's batched pipeline; on the machine of earlier sessions, whose
# processor went unrecorded, 2.2x (bench/longform.py).
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def host_info() -> dict[str, Any]:
    """The processor a bench ran on: model name, cores and the ISA flags above (Linux's
    /proc/cpuinfo; elsewhere the model as `platform` knows it), and the CTranslate2 version."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    try:
        from importlib.metadata import version

        ct2 = version("ctranslate2")
    except Exception:  # noqa: BLE001 - not installed (a bench that needs no model)
        ct2 = None
    return {"cpu": model, "cores": os.cpu_count(), "isa": [f for f in ISA_FLAGS if f in flags],
            "ctranslate2": ct2, "kernels": kernels_name()}


# CTranslate2's switches for its CPU kernels; AVX2 without MKL is what an AVX2 AMD processor
# runs (oneDNN), so a bench can measure that kernel set on any x86 machine.
AVX2_KERNELS = {"CT2_USE_MKL": "0", "CT2_FORCE_CPU_ISA": "AVX2"}
KERNEL_SETS = {"default": {}, "avx2": AVX2_KERNELS}


def kernels_name(env: dict[str, str] | None = None) -> str:
    """The kernel set the environment selects: ``default`` (the processor's own choice, MKL
    on Intel) or the CT2_* switches as set."""
    env = dict(os.environ) if env is None else env
    switches = {k: env[k] for k in ("CT2_USE_MKL", "CT2_FORCE_CPU_ISA") if env.get(k)}
    return " ".join(f"{k}={v}" for k, v in sorted(switches.items())) or "default"


def write_json(path: str | Path, result: dict[str, Any]) -> Path:
    """Write ``result`` as indented JSON (folders made as needed) and say where; the processor it
    ran on goes in as ``host`` (`host_info`) unless the result already says."""
    path = Path(path)
    if "host" not in result:
        result = {**result, "host": host_info()}
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

    def as_dict(self) -> dict[str, float | int | bool | list[float]]:
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


def speech_mix(clips: Sequence[tuple[np.ndarray, str]], seconds: float = 0.0,
               seed: int = 1) -> Iterator[tuple[np.ndarray, str]]:
    """Corpus clips (16 kHz audio, text) reshuffled pass after pass, each followed by a pause
    (`PAUSES_S` cycled, every 10th `LONG_PAUSE_S`), until ``seconds`` of audio (one pass at
    least): yields each clip with its pause appended, and its text."""
    rng = np.random.default_rng(seed)
    total = gap = 0
    while True:
        for i in rng.permutation(len(clips)):
            audio, text = clips[i]
            gap += 1
            pause = LONG_PAUSE_S if gap % 10 == 0 else PAUSES_S[gap % len(PAUSES_S)]
            part = np.concatenate([np.asarray(audio, dtype=np.float32),
                                   np.zeros(int(pause * SAMPLE_RATE), np.float32)])
            total += len(part)
            yield part, text
        if total >= seconds * SAMPLE_RATE:
            return


def write_wav(path: str | Path, audio: np.ndarray) -> Path:
    """16 kHz mono 16-bit WAV of float samples in [-1, 1]."""
    import wave

    path = Path(path)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
    return path


@dataclass(frozen=True)
class UtteranceErrors:
    """One utterance's word errors and reference words, normalised and formatted (formatted:
    0/0 when its reference carries no case and punctuation, `bench.evaluation.formatted`)."""

    errors: int
    words: int
    formatted_errors: int
    formatted_words: int


def utterance_errors(reference: str, hypothesis: str) -> UtteranceErrors:
    """Word errors of ``hypothesis`` against ``reference``, as `bench.evaluation`'s corpus WERs
    count them (so summed over utterances they give the same pooled WER)."""
    import jiwer

    from evaluation import formatted, formatted_tokens, normalize

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
