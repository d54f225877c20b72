"""Live streaming engine: latency, streaming vs offline WER, silence/noise hallucinations.

    python bench/streaming.py --manifest tests/audio/manifest.jsonl \
        --out bench/results/streaming.json [--realtime] [--model tiny.en] [--limit N]
        [--compare OLD.json] [--final-beam N] [--beam-sweep 1,2,3,5] [--streams 2]
        [--no-speculative] [--runs N]
    python bench/streaming.py --manifest eval --per-speaker 2 --ablate RULE[,RULE] [--ablate ...]
    python bench/streaming.py --manifest eval --no-peer --before OLD.json

Each English short file of the manifest is played through `FileSource` (0.5 s of silence
before, 1.5 s after, so end of speech is detected as it would be live) into `LocalLiveEngine`
with the default fast chunk decoder. Default is simulated time with measured decode costs
(each decode "takes" its real wall time on the audio clock; see engine.live), ``--realtime``
plays at real speed. Measured per decode and utterance:
  chunk_rtt_ms              decode request -> result, every decode (partials and finals)
  padded_chunk_rtt_ms       the same final chunks decoded again with faster-whisper's padded
                            30 s path (plain SequentialRunner): the peer, same run
  final_after_speech_end_ms last speech sample -> final text (includes the min-silence wait;
                            the finals that end an utterance, not pieces committed early)
  first_partial_ms          speech detected -> first partial text of that utterance
                            (``first_partial_first_word_agrees``: share of finals whose first
                            word, normalised, is the first partial's: an early partial that
                            shows the wrong word is worse than a later one)
  wer_streaming / wer_offline  corpus WER of the streamed finals / of faster-whisper on the
                            whole file (beam 5), both normalised (bench/evaluation.py)
  formatted_wer_*           the same with case and punctuation kept, over the references
                            that have them (evaluation.formatted_error_rate);
                            ``formatted_wer_dictated``: the finals joined as dictation types
                            them into one field (what a dictation user sees)
  silence_words             words emitted on 60 s of digital silence + 60 s of noise
  breakdown_ms              per final, from its `FinalText.stages`: end of speech -> utterance
                            closed (the silence wait), closed -> emitted, the final decode's
                            queue wait and duration; ``speculative_share``: finals whose decode
                            was queued before the utterance closed (engine.core.policy.speculation)
Continuous speech (``--no-continuous`` skips it): the manifest's long recordings (a 231 s
reading of 32 LJSpeech sentences whose pauses, 100-600 ms, are mostly under the 500 ms that
ends an utterance), streamed the same way once, reported apart (``continuous``): finals and
their median length, WER and formatted WER against faster-whisper on the whole file, and
``word_lag_ms``: for every word of every final, final emitted -> the word's end (how long
a caption viewer waits for a word to be final), besides end of speech -> final (of the
finals that end an utterance, not of the pieces committed early: ``--commit`` turns
`PolicyOptions.commit_stable` on, off by default). ``--continuous-only`` runs that part alone.
Per reading it also reports (`bench/reading_report.py`) the lag, WER and formatted WER of the
captions (the finals as the caption lines show them: `engine.core.captions.merge_lines`) against the offline decode with their paired 95 % interval over sentences, and the
false sentence ends (a full stop where the reference has none). ``--eval-readings K`` adds the
first K continuous speaker readings `bench/longform.py` builds from the evaluation corpus.
``--streams`` decode streams of the fast runner (default 2, as the app: two one-thread
replicas), ``--no-speculative`` turns speculative finals off, ``--runs N`` repeats the whole set
N times (latency figures pooled, WER from the first run). ``--busy K``: each decode comes back K
times later than measured on the simulated clock (`engine.live.Measured`; nothing sleeps), as on
a busy machine, where a speculative final may outlast the silence wait (the timing rules are
ablated with it: docs/streaming-rules.md, "Under load"); with ``--modelled`` each decode costs
the modelled test machine's time x K instead (`engine.live.DecodeCost`), the same on any
processor and under any load.
Paired comparisons (common: 95 % bootstrap interval over files): ``--ablate RULE`` runs
the full system and the system without the streaming rule (`engine.core.policy.RULES`,
docs/streaming-rules.md; ``RULE,RULE``: both off) on the same files, interleaved file by file;
``--before OLD.json``: this run minus an earlier one. Either reports WER and formatted WER (of
the text as dictated) in points, end of speech -> the file's last final (p50, p95) and first
partial (p50) in ms. ``--manifest eval``: the 371-utterance corpus (common.EVAL_MANIFEST);
``--per-speaker N``: its first N files per speaker; ``--no-peer``: the streamed figures alone.
Prints a table (median, p95, ratios) and the files where streaming and offline differ (with an
earlier run's figures beside them, ``--compare``, both re-scored with today's normaliser), writes
JSON and a latency CDF PNG next to it. ``--final-beam`` sets the policy's final beam for the
run (accuracy per beam: one run each); ``--beam-sweep`` re-decodes the run's 2-5 s first-attempt
finals with each beam size, interleaved, and reports wall and process CPU milliseconds (a fair
comparison on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from reading_report import print_rows, reading_row  # noqa: E402

from common import (  # noqa: E402
    EVAL_MANIFEST,
    REPO,
    balanced,
    paired_latency,
    paired_wer,
    pct,
    print_table,
    speakers_of,
    utterance_errors,
    write_json,
    write_wav,
)
from evaluation import (  # noqa: E402
    ManifestEntry,
    english,
    error_rate,
    formatted_error_rate,
    normalize,
    read_manifest,
)

from engine.asr.ct2_decoder import Ct2Runner  # noqa: E402
from engine.asr.sequential import SequentialRunner  # noqa: E402
from engine.asr.wrapper import RunnerWrapper  # noqa: E402
from engine.audio.decode import load_audio  # noqa: E402
from engine.audio.sources import FileSource  # noqa: E402
from engine.captions import final_line  # noqa: E402
from engine.core.captions import merge_lines  # noqa: E402
from engine.core.policy import PolicyOptions  # noqa: E402
from engine.dictation.format import join  # noqa: E402
from engine.events import Event, FinalText, Metrics, PartialText, SpeechStarted  # noqa: E402
from engine.live import DecodeCost, LiveOptions, LocalLiveEngine, Measured  # noqa: E402
from engine.types import (  # noqa: E402
    SAMPLE_RATE,
    Audio,
    DecodeOptions,
    DecodeRequest,
    Runner,
    Transcript,
)

DEFAULT_MANIFEST = REPO / "tests" / "audio" / "manifest.jsonl"


class Recording(RunnerWrapper):
    """Wraps the engine's runner to keep each final chunk for the padded comparison."""

    def __init__(self, inner: Ct2Runner, busy: float = 1.0) -> None:
        super().__init__(inner)
        self.ct2 = inner  # the beam sweep needs the CTranslate2 runner itself
        self.busy = busy  # ``--busy``, for the record (the engine's decode_cost charges it)
        self.finals: list[tuple[Audio, DecodeOptions]] = []
        self.paths: dict[str, int] = {}

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        results = self.inner.decode_batch(requests)
        for request, result in zip(requests, results, strict=True):
            # Finals ask for word times and may fall back to the padded window; partials
            # never fall back (they ask for word times only to commit early).
            if request.options.word_timestamps and request.options.short_fallback:
                self.finals.append((request.audio, request.options))
            path = str(result.extra.get("path", "padded"))
            self.paths[path] = self.paths.get(path, 0) + 1
        return results


class Collector:
    """EventSink recording what the metrics need, with the engine's clock."""

    def __init__(self) -> None:
        self.engine: LocalLiveEngine | None = None
        self.finals: list[FinalText] = []
        self.metrics: list[Metrics] = []
        self.started_at: dict[int, float] = {}
        self.first_partial_ms: dict[int, float] = {}
        self.first_partial_text: dict[int, str] = {}
        self.breakdowns: list[dict[str, float]] = []
        self.piece_end = -1  # where the last piece committed early ended (its rest goes on)

    def __call__(self, event: Event) -> None:
        assert self.engine is not None
        now = self.engine.now()
        if isinstance(event, SpeechStarted):
            if event.at != self.piece_end:  # (not the rest of a piece committed early)
                self.started_at[event.utterance_id] = now
        elif isinstance(event, PartialText) and (event.committed or event.tentative):
            uid = event.utterance_id
            if uid not in self.first_partial_ms and uid in self.started_at:
                self.first_partial_ms[uid] = (now - self.started_at[uid]) * 1000
                self.first_partial_text[uid] = f"{event.committed} {event.tentative}"
        elif isinstance(event, FinalText):
            if "ended" not in dict(event.stages):
                self.piece_end = event.end
            self.finals.append(event)
            self.breakdowns.append(final_breakdown(event))
        elif isinstance(event, Metrics):
            self.metrics.append(event)


OPTIONS = LiveOptions(journal=False)  # main() may change the final beam, speculation
OFFLINE: dict[Path, str] = {}
STEPS = ("silence_wait", "closed_to_emitted", "queue_wait", "decode", "speculative")


def final_breakdown(final: FinalText) -> dict[str, float]:
    """Milliseconds per step of one final (see the module docstring); {} if not decoded."""
    t = dict(final.stages)
    if not final.text or "queued" not in t or "ended" not in t:  # (not a committed piece)
        return {}
    return {"silence_wait": (t["ended"] - t["speech_end"]) * 1000,
            "closed_to_emitted": (t["emitted"] - t["ended"]) * 1000,
            "queue_wait": (t["decode_start"] - t["queued"]) * 1000,
            "decode": (t["decoded"] - t["decode_start"]) * 1000,
            "speculative": float(t["queued"] < t["ended"])}


def stream(transcriber: Runner, source: FileSource, options: LiveOptions | None = None
           ) -> Collector:
    collector = Collector()
    engine = LocalLiveEngine(collector, source=source, runner=transcriber,
                             options=options or OPTIONS)
    collector.engine = engine
    engine.start()
    if not engine.wait(timeout=600):
        raise RuntimeError("engine did not finish")
    return collector


def edge_words_lost(ref: str, hyp: str) -> tuple[bool, bool]:
    """Are the reference's first / last words *deleted* in ``hyp`` (not merely misheard)?"""
    import jiwer

    r, h = normalize(ref), normalize(hyp)
    if not r.split():
        return False, False
    if not h.split():
        return True, True
    chunks = jiwer.process_words(r, h).alignments[0]
    last = len(r.split()) - 1
    deleted = {i for c in chunks if c.type == "delete"
               for i in range(c.ref_start_idx, c.ref_end_idx)}
    return 0 in deleted, last in deleted


def dictated(finals: list[str]) -> str:
    """The finals as dictation types them into one empty field (engine.dictation.format.join,
    "sentence" style): a piece that continues a sentence loses Whisper's start capital."""
    field = ""
    for text in finals:
        joined = join(field, text)
        field = field[:len(field) - joined.delete_chars] + joined.text
    return field


def run_files(entries: list[Any], fast: Recording, offline: SequentialRunner | None,
              realtime: bool, options: LiveOptions | None = None) -> dict[str, Any]:
    """Each file streamed once with ``options`` (default OPTIONS); ``offline`` None: no peer
    decode (ablations: the peer does not change with the policy)."""
    rtts, rtts_final, rtts_2_5, after, first = [], [], [], [], []
    agrees: list[bool] = []  # the first partial's first word is the final's first word
    steps: dict[str, list[float]] = {name: [] for name in STEPS}
    refs, hyps, hyps_off, hyps_typed, per_file = [], [], [], [], []
    for item in entries:
        source = FileSource(item.path, realtime=realtime, lead_silence_s=0.5, tail_silence_s=1.5)
        got = stream(fast, source, options)
        text = " ".join(f.text for f in got.finals if f.text)
        typed = dictated([f.text for f in got.finals if f.text])
        if offline is not None and item.path not in OFFLINE:  # once per file, however many runs
            OFFLINE[item.path] = offline.decode(load_audio(item.path), DecodeOptions()).text
        offline_text = OFFLINE.get(item.path, "")
        refs.append(item.text)
        hyps.append(text)
        hyps_off.append(offline_text)
        hyps_typed.append(typed)
        rtts += [m.chunk_rtt_ms for m in got.metrics]
        rtts_final += [m.chunk_rtt_ms for m in got.metrics if m.kind == "final"]
        ends = []
        for f in got.finals:
            if f.text and "ended" in dict(f.stages):  # (not a piece committed early)
                ends.append(f.after_speech_end_ms)
                if 2 * SAMPLE_RATE <= f.end - f.start <= 5 * SAMPLE_RATE:
                    rtts_2_5.append(f.latency_ms)
        after += ends
        first += list(got.first_partial_ms.values())
        agrees += [normalize(got.first_partial_text[f.utterance_id]).split()[:1]
                   == normalize(f.text).split()[:1]
                   for f in got.finals if f.text and f.utterance_id in got.first_partial_text]
        for row in got.breakdowns:
            for name, value in row.items():
                steps[name].append(value)
        lost_first, lost_last = edge_words_lost(item.text, text)
        off_first, off_last = edge_words_lost(item.text, offline_text)
        errs = utterance_errors(item.text, text)
        per_file.append({"file": item.path.name, "streaming": text, "offline": offline_text,
                         "dictated": typed,
                         "wer_streaming": round(error_rate([item.text], [text]), 3),
                         "wer_offline": round(error_rate([item.text], [offline_text]), 3),
                         # Paired figures (--ablate, --before): this file's word errors and
                         # reference words, normalised and formatted (of the text as dictated),
                         # and the wait for its last final after the speech ended and for its
                         # first partial (None: no final / no partial).
                         "errors": errs.errors, "words": errs.words,
                         "formatted_errors": utterance_errors(item.text, typed).formatted_errors,
                         "formatted_words": errs.formatted_words,
                         "after_ms": round(ends[-1], 1) if ends else None,
                         "first_partial_ms": round(min(got.first_partial_ms.values()), 1)
                         if got.first_partial_ms else None,
                         "first_word_lost": lost_first and not off_first,
                         "last_word_lost": lost_last and not off_last})
        print(f"  {item.path.name:45s} wer {per_file[-1]['wer_streaming']:.2f} "
              + (f"(offline {per_file[-1]['wer_offline']:.2f})" if offline else ""), flush=True)
    return {"rtts": rtts, "rtts_final": rtts_final, "rtts_2_5": rtts_2_5, "after": after,
            "first": first, "steps": steps, "wer_streaming": error_rate(refs, hyps),
            "wer_offline": error_rate(refs, hyps_off) if offline is not None else float("nan"),
            "fwer_streaming": formatted_error_rate(refs, hyps),
            "fwer_offline": formatted_error_rate(refs, hyps_off) if offline is not None
            else float("nan"),
            "fwer_dictated": formatted_error_rate(refs, hyps_typed), "per_file": per_file,
            "first_word_agrees": round(float(np.mean(agrees)), 3) if agrees else None}


def paired(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """System A minus system B on the files both ran (per_file rows, matched by name): WER
    and formatted WER (of the text as dictated) in points, and the median and p95 of end of
    speech -> last final and of the first partial (ms), each with its 95 % bootstrap interval
    over files (common)."""
    rows_b = {r["file"]: r for r in b}
    pairs = [(r, rows_b[r["file"]]) for r in a if r["file"] in rows_b]
    out: dict[str, Any] = {"files": len(pairs)}
    out["wer"] = paired_wer([x["errors"] for x, _ in pairs], [y["errors"] for _, y in pairs],
                            [x["words"] for x, _ in pairs])
    form = [(x, y) for x, y in pairs if x["formatted_words"]]
    out["formatted_wer"] = paired_wer(
        [x["formatted_errors"] for x, _ in form], [y["formatted_errors"] for _, y in form],
        [x["formatted_words"] for x, _ in form]) if form else None
    for key in ("after_ms", "first_partial_ms"):
        both = [(x[key], y[key]) for x, y in pairs if x[key] is not None and y[key] is not None]
        for q in (50, 95):
            out[f"{key}_p{q}"] = (paired_latency([x for x, _ in both], [y for _, y in both], q=q)
                                  if both else None)
    return out


def print_paired(title: str, comparisons: dict[str, dict[str, Any]]) -> None:
    """One row per comparison (A - B): differences with their 95 % intervals."""
    def lat(v: tuple[float, float, float] | None) -> str:
        return "-" if v is None else f"{v[0]:+.0f} [{v[1]:+.0f}, {v[2]:+.0f}]"

    rows = [[name, c["files"], f"{c['wer'].a:.2f} / {c['wer'].b:.2f}", str(c["wer"]),
             str(c["formatted_wer"] or "-"), lat(c["after_ms_p50"]), lat(c["after_ms_p95"]),
             lat(c["first_partial_ms_p50"])] for name, c in comparisons.items()]
    print_table(["A vs B", "files", "WER A / B %", "WER diff [95%]", "formatted WER diff",
                 "end->final p50 ms", "end->final p95 ms", "first partial p50 ms"], rows,
                title=title)


def as_json(comparison: dict[str, Any]) -> dict[str, Any]:
    return {k: v.as_dict() if hasattr(v, "as_dict") else v for k, v in comparison.items()}


def run_ablations(entries: list[Any], fast: Recording, realtime: bool,
                  variants: list[str], out: Path) -> int:
    """``--ablate``: the full system and each variant (rules removed, comma-separated) on the
    same files, interleaved file by file (a load change hits all alike); paired differences
    variant minus full system."""
    systems = {"full": OPTIONS} | {v: replace(OPTIONS, policy=OPTIONS.policy.without(
        *v.split(","))) for v in variants}
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in systems}
    for n, item in enumerate(entries):
        print(f"[{n + 1}/{len(entries)}] {item.path.name}", flush=True)
        for name, options in systems.items():
            rows[name] += run_files([item], fast, None, realtime, options)["per_file"]
        if (n + 1) % 10 == 0 or n + 1 == len(entries):  # (a long run can be read as it goes)
            comparisons = {f"without {v}": paired(rows[v], rows["full"]) for v in variants}
            print_paired(f"\nablations on {n + 1} files: variant minus full system (95 % "
                         "bootstrap interval over files)", comparisons)
            write_json(out, {"files": n + 1, "busy": fast.busy,
                             "load_average": os.getloadavg()[0],
                             "comparisons": {k: as_json(c) for k, c in comparisons.items()},
                             "per_file": rows})
    return 0


def long_entries(manifest: Path, eval_readings: int) -> tuple[list[Any], dict[str, list[str]]]:
    """The manifest's long English recordings, plus the first ``eval_readings`` speaker readings
    of the evaluation corpus (written as WAV files to a temporary folder), and the sentences of
    the readings whose reference has no punctuation (file name -> utterance texts)."""
    entries = english(read_manifest(manifest), kinds=("long",))
    sentences: dict[str, list[str]] = {}
    if eval_readings:
        import tempfile

        from longform import build_speaker_readings

        folder = Path(tempfile.mkdtemp(prefix="sottovoce-readings-"))
        for item in build_speaker_readings(EVAL_MANIFEST, 100.0)[:eval_readings]:
            path = write_wav(folder / f"{item.name}.wav", item.audio)
            entries.append(ManifestEntry(path=path, text=item.reference, language="en",
                                         kind="long", duration_s=item.seconds))
            sentences[path.name] = item.pieces
    rows = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    sentences.update({Path(r["file"]).name: r["pieces"] for r in rows if r.get("pieces")})
    return entries, sentences


def run_continuous(entries: list[Any], fast: Recording, offline: SequentialRunner,
                   realtime: bool, sentences: dict[str, list[str]] | None = None,
                   ) -> dict[str, Any] | None:
    """Long recordings streamed once (module docstring: continuous speech)."""
    if not entries:
        return None
    refs, hyps, hyps_off, after, lengths = [], [], [], [], []
    lags: list[float] = []
    pieces: list[list[str]] = []
    per_reading = []
    for item in entries:
        before = len(lags)
        source = FileSource(item.path, realtime=realtime, lead_silence_s=0.5, tail_silence_s=1.5)
        got = stream(fast, source)
        finals = [f for f in got.finals if f.text]
        refs.append(item.text)
        # The captions as shown: pieces and finals that go on with a sentence joined to its
        # line, a full stop the next one takes back made a comma (engine.core.captions).
        hyps.append(" ".join(line.text for line in merge_lines([final_line(f) for f in finals])))
        pieces.append([f.text for f in finals])
        hyps_off.append(offline.decode(load_audio(item.path), DecodeOptions()).text)
        for f in finals:
            emitted = dict(f.stages)["emitted"]
            lags += [(emitted - w.end / SAMPLE_RATE) * 1000 for w in f.words]
            if "ended" in dict(f.stages):  # (not a piece committed early)
                after.append(f.after_speech_end_ms)
            lengths.append((f.end - f.start) / SAMPLE_RATE)
        per_reading.append(reading_row(item.path.name, item.text,
                                       (sentences or {}).get(item.path.name), hyps[-1],
                                       hyps_off[-1], lags[before:]))
        print(f"  {item.path.name:45s} {len(finals)} finals", flush=True)
    return {"files": len(entries), "finals": len(lengths), "per_reading": per_reading,
            "utterance_s_p50": round(statistics.median(lengths), 1) if lengths else None,
            "utterance_s_max": round(max(lengths), 1) if lengths else None,
            "word_lag_ms": pct(lags), "final_after_speech_end_ms": pct(after),
            "wer_streaming": round(error_rate(refs, hyps), 4),
            "wer_offline": round(error_rate(refs, hyps_off), 4),
            "formatted_wer_streaming": round(formatted_error_rate(refs, hyps), 4),
            "formatted_wer_offline": round(formatted_error_rate(refs, hyps_off), 4),
            "text": hyps, "finals_text": pieces}


def padded_rtts(chunks: list[tuple[Audio, DecodeOptions]],
                padded: SequentialRunner) -> list[float]:
    """The same final chunks and options, decoded on faster-whisper's padded 30 s path."""
    out = []
    for audio, options in chunks:
        started = time.perf_counter()
        padded.decode(audio, options)
        out.append((time.perf_counter() - started) * 1000)
    return out


def beam_sweep(chunks: list[tuple[Audio, DecodeOptions]], fast: Ct2Runner,
               beams: list[int], repeats: int = 3) -> dict[str, Any]:
    """The 2-5 s first-attempt finals (short path) re-decoded with each beam, interleaved."""

    picked = [(a, o) for a, o in chunks if o.short_context and
              2 * SAMPLE_RATE <= len(a) <= 5 * SAMPLE_RATE]
    wall: dict[int, list[float]] = {b: [] for b in beams}
    cpu: dict[int, list[float]] = {b: [] for b in beams}
    for _ in range(repeats):
        for audio, options in picked:
            for beam in beams:
                w, c = time.perf_counter(), time.process_time()
                fast.decode_batch([DecodeRequest(audio, replace(options, beam_size=beam))])
                wall[beam].append((time.perf_counter() - w) * 1000)
                cpu[beam].append((time.process_time() - c) * 1000)
    out = {str(b): {"wall_ms": pct(wall[b]), "cpu_ms": pct(cpu[b])} for b in beams}
    print(f"\nfinal beam sweep: {len(picked)} chunks of 2-5 s x {repeats}, interleaved")
    for b in beams:
        ratio = np.median(wall[b]) / np.median(wall[beams[-1]])
        print(f"  beam {b}: wall p50 {out[str(b)]['wall_ms']['p50']} p95 "
              f"{out[str(b)]['wall_ms']['p95']} ms, CPU p50 {out[str(b)]['cpu_ms']['p50']} ms, "
              f"wall p50 {ratio:.2f}x beam {beams[-1]}")
    return out


def silence_words(fast: Runner) -> int:
    rng = np.random.default_rng(2026)
    white = rng.normal(0, 0.03, 30 * SAMPLE_RATE)
    brown = np.cumsum(rng.normal(0, 1, 30 * SAMPLE_RATE))
    brown = (brown - np.convolve(brown, np.ones(800) / 800, "same")) * 0.004  # no DC drift
    noise = np.clip(np.concatenate([white, brown]), -1, 1).astype(np.float32)
    words = 0
    for audio in (np.zeros(60 * SAMPLE_RATE, dtype=np.float32), noise):
        got = stream(fast, FileSource(audio=audio))
        words += sum(len(f.words) or len(f.text.split()) for f in got.finals)
    return words


def plot_cdf(series: dict[str, list[float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, values in series.items():
        if values:
            xs = np.sort(values)
            ax.step(xs, np.arange(1, len(xs) + 1) / len(xs), where="post", label=label)
    ax.set_xlabel("milliseconds")
    ax.set_ylabel("fraction ≤ x")
    ax.set_title("Sottovoce live engine latency (CDF)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST,
                        help=f"a JSONL manifest; 'eval': {EVAL_MANIFEST} (371 utterances, "
                        "45 speakers); default: the dev set, tests/audio")
    parser.add_argument("--per-speaker", type=int, default=0,
                        help="a fixed speaker-balanced subset: the first N files per speaker")
    parser.add_argument("--ablate", action="append", default=[], metavar="RULE[,RULE]",
                        help="run the full system and the system without these rules "
                        "(engine.core.policy RULES; repeat for more variants) on the same "
                        "files and print the paired differences")
    parser.add_argument("--before", type=Path,
                        help="an earlier result JSON of the same files: paired differences")
    parser.add_argument("--no-peer", action="store_true",
                        help="skip the offline peer, padded re-decodes, silence and continuous "
                        "speech (streamed WER and latency only)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "streaming.json")
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--realtime", action="store_true", help="play files at real speed")
    parser.add_argument("--limit", type=int, default=0, help="only the first N files")
    parser.add_argument("--compare", type=Path, help="an earlier result JSON to diff per file")
    parser.add_argument("--final-beam", type=int, help="the policy's final beam for this run")
    parser.add_argument("--commit-beam", type=int,
                        help="the policy's beam for partials when committing early (--commit)")
    parser.add_argument("--commit-end-hold", type=float, metavar="S",
                        help="committing early, a sentence's last word waits S s (0: off)")
    parser.add_argument("--busy-factor", type=float,
                        help="the policy's busy_factor: partials spaced by this x their round trip")
    parser.add_argument("--beam-sweep", default="", help="e.g. 1,2,3,5: time finals per beam")
    parser.add_argument("--streams", type=int, default=2, help="decode streams of the live engine")
    parser.add_argument("--threads", type=int, default=0,
                        help="CTranslate2 threads per stream (0: cores / streams)")
    parser.add_argument("--busy", type=float, default=1.0, metavar="K",
                        help="each decode takes K times its measured time (a busy machine)")
    parser.add_argument("--modelled", action="store_true",
                        help="charge each decode the modelled test machine's time (x --busy), "
                             "not the measured one")
    parser.add_argument("--no-speculative", action="store_true", help="no speculative finals")
    parser.add_argument("--runs", type=int, default=1, help="repeat the set (latency pooled)")
    parser.add_argument("--min-silence-ms", type=int, help="the segmenter's hangover (tuning)")
    parser.add_argument("--min-partial-s", type=float, help="audio before a first partial")
    parser.add_argument("--finished-silence-ms", type=int,
                        help="the wait once the speculative final ends a sentence (0: off)")
    parser.add_argument("--open-silence-ms", type=int,
                        help="the wait once the speculative final reads as going on (0: off)")
    parser.add_argument("--padding", choices=("encoded", "silence"),
                        help="how padded-window decodes encode the window after the audio")
    parser.add_argument("--first-words-step-s", type=float,
                        help="new audio before a partial is tried again while none has words")
    parser.add_argument("--sentence-cut-s", type=float,
                        help="audio before a long utterance may be cut at a sentence end (0: off)")
    parser.add_argument("--no-continuous", action="store_true",
                        help="skip the continuous-speech recordings")
    parser.add_argument("--commit", action="store_true",
                        help="commit the words partials agree on before the utterance ends")
    parser.add_argument("--eval-readings", type=int, default=0, metavar="K",
                        help="add the first K speaker readings of the evaluation corpus "
                             "(bench/longform.py) to the continuous-speech recordings")
    parser.add_argument("--continuous-only", action="store_true",
                        help="only the continuous-speech recordings")
    args = parser.parse_args()
    if str(args.manifest) == "eval":
        args.manifest = EVAL_MANIFEST
    global OPTIONS
    policy = PolicyOptions(speculative_finals=not args.no_speculative,
                           commit_stable=args.commit)
    if args.final_beam:
        policy = replace(policy, final_beam_size=args.final_beam)
    if args.commit_beam:
        policy = replace(policy, commit_beam_size=args.commit_beam)
    if args.commit_end_hold is not None:
        policy = replace(policy, commit_end_hold_s=args.commit_end_hold)
    if args.busy_factor:
        policy = replace(policy, busy_factor=args.busy_factor)
    if args.min_partial_s is not None:
        policy = replace(policy, min_partial_audio_s=args.min_partial_s)
    if args.first_words_step_s is not None:
        policy = replace(policy, first_words_step_s=args.first_words_step_s)
    if args.padding is not None:
        policy = replace(policy, padding=args.padding)
    if args.sentence_cut_s is not None:
        policy = replace(policy, sentence_cut_s=args.sentence_cut_s)
    OPTIONS = LiveOptions(journal=False, policy=policy, decode_cost=(
        DecodeCost().scaled(args.busy) if args.modelled else Measured(args.busy)))
    if args.min_silence_ms is not None:
        OPTIONS = replace(OPTIONS, segmenter=replace(OPTIONS.segmenter,
                                                     min_silence_ms=args.min_silence_ms))
    if args.finished_silence_ms is not None:
        OPTIONS = replace(OPTIONS, segmenter=replace(
            OPTIONS.segmenter, finished_silence_ms=args.finished_silence_ms))
    if args.open_silence_ms is not None:
        OPTIONS = replace(OPTIONS, segmenter=replace(
            OPTIONS.segmenter, open_silence_ms=args.open_silence_ms))

    fast = Recording(Ct2Runner(args.model, device=args.device, streams=args.streams,
                               cpu_threads=args.threads), busy=args.busy)
    fast.load()
    entries = english(read_manifest(args.manifest))
    speakers = speakers_of(args.manifest)
    entries = balanced(entries, [speakers[e.path.name] for e in entries], args.per_speaker)
    entries = entries[: args.limit or None]
    if args.ablate:
        print(f"{len(entries)} files, {fast.info.name}, load average {os.getloadavg()[0]:.1f}")
        return run_ablations(entries, fast, args.realtime, args.ablate, args.out)
    padded = SequentialRunner(args.model, device=args.device)
    padded.load()  # the padded peer (all cores, one stream)
    print(f"{len(entries)} files, model {padded.info.name} on {padded.info.device}/"
          f"{padded.info.compute_type}, {'real' if args.realtime else 'simulated'} time, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    load_start = os.getloadavg()[0]
    if args.continuous_only:
        return only_continuous(args, fast, padded, load_start)
    peer = None if args.no_peer else padded
    res = run_files(entries, fast, peer, args.realtime)
    for _ in range(args.runs - 1):  # more latency samples; WER stays the first run's
        more = run_files(entries, fast, peer, args.realtime)
        for key in ("rtts", "rtts_final", "rtts_2_5", "after", "first"):
            res[key] += more[key]
        for name in STEPS:
            res["steps"][name] += more["steps"][name]
    padded_ms = [] if args.no_peer else padded_rtts(fast.finals, padded)
    fast_final_ms = res["rtts_final"]
    silent = None if args.no_peer else silence_words(fast)
    sweep = beam_sweep(fast.finals, fast.ct2, [int(b) for b in args.beam_sweep.split(",")]) \
        if args.beam_sweep else None
    paths = dict(fast.paths)  # (the short clips')
    continuous = None
    if not (args.no_continuous or args.no_peer):
        long, sentences = long_entries(args.manifest, args.eval_readings)
        continuous = run_continuous(long, fast, padded, args.realtime, sentences)

    result = {
        "chunk_rtt_ms": pct(res["rtts"]),
        "final_after_speech_end_ms": pct(res["after"]),
        "first_partial_ms": pct(res["first"]),
        "breakdown_ms": {name: pct(res["steps"][name]) for name in STEPS[:-1]},
        "speculative_share": round(float(np.mean(res["steps"]["speculative"])), 3)
        if res["steps"]["speculative"] else None,
        "streams": args.streams, "threads": args.threads, "speculative_finals": not args.no_speculative,
        "min_silence_ms": OPTIONS.segmenter.min_silence_ms,
        "finished_silence_ms": OPTIONS.segmenter.finished_silence_ms,
        "open_silence_ms": OPTIONS.segmenter.open_silence_ms,
        "min_partial_audio_s": OPTIONS.policy.min_partial_audio_s,
        "first_words_step_s": OPTIONS.policy.first_words_step_s,
        "sentence_cut_s": OPTIONS.policy.sentence_cut_s,
        "commit_stable": OPTIONS.policy.commit_stable,
        "commit_beam_size": OPTIONS.policy.commit_beam_size,
        "commit_end_hold_s": OPTIONS.policy.commit_end_hold_s,
        "busy_factor": OPTIONS.policy.busy_factor,
        "padding": OPTIONS.policy.padding,
        "first_partial_first_word_agrees": res["first_word_agrees"],
        "runs": args.runs,
        "wer_streaming": round(res["wer_streaming"], 4),
        "wer_offline": round(res["wer_offline"], 4),
        "formatted_wer_streaming": round(res["fwer_streaming"], 4),
        "formatted_wer_offline": round(res["fwer_offline"], 4),
        "formatted_wer_dictated": round(res["fwer_dictated"], 4),
        "padded_chunk_rtt_ms": pct(padded_ms),
        "silence_words": silent,
        "final_chunk_rtt_ms": pct(fast_final_ms),
        "final_chunk_rtt_2_5s_utterances_ms": pct(res["rtts_2_5"]),
        "decode_paths": paths,
        "first_words_lost": sum(f["first_word_lost"] for f in res["per_file"]),
        "last_words_lost": sum(f["last_word_lost"] for f in res["per_file"]),
        "setup": {"model": padded.info.name, "device": padded.info.device,
                  "compute_type": padded.info.compute_type, "realtime": args.realtime,
                  "files": len(entries), "manifest": str(args.manifest),
                  "per_speaker": args.per_speaker, "busy": args.busy, "modelled": args.modelled,
                  "cpu_count": os.cpu_count(),
                  "load_average_start": round(load_start, 2),
                  "load_average_end": round(os.getloadavg()[0], 2)},
        "final_beam": OPTIONS.policy.final_beam_size,
        "beam_sweep": sweep,
        "continuous": continuous,
        "per_file": res["per_file"],
    }
    if args.before:
        result["vs_before"] = as_json(paired(res["per_file"],
                                             json.loads(args.before.read_text())["per_file"]))
    write_json(args.out, result)
    png = args.out.with_suffix(".png")
    plot_cdf({"chunk RTT (all decodes)": res["rtts"], "final chunk RTT": fast_final_ms,
              "padded final chunk RTT (peer)": padded_ms,
              "final after speech end": res["after"], "first partial": res["first"]}, png)
    print_report(result, fast_final_ms, padded_ms)
    if not args.no_peer:
        print_file_diffs(entries, result,
                         json.loads(args.compare.read_text()) if args.compare else None)
    if args.before:
        print_paired(f"\nthis run minus {args.before} (95 % bootstrap interval over files)",
                     {"now vs before": paired(res["per_file"],
                                              json.loads(args.before.read_text())["per_file"])})
    print(f"wrote {png}")
    return 0


def only_continuous(args: argparse.Namespace, fast: Recording, padded: SequentialRunner,
                    load_start: float) -> int:
    """``--continuous-only``: the long recordings alone (table line and JSON)."""
    entries, sentences = long_entries(args.manifest, args.eval_readings)
    continuous = run_continuous(entries, fast, padded, args.realtime, sentences)
    if continuous is None:
        print("no long recordings in the manifest")
        return 1
    continuous["load_average"] = [round(load_start, 2), round(os.getloadavg()[0], 2)]
    continuous["busy"] = args.busy
    print_continuous(continuous)
    write_json(args.out, {"continuous": continuous})
    return 0


def print_continuous(c: dict[str, Any]) -> None:
    print(f"continuous speech ({c['files']} long file(s)): {c['finals']} finals, utterance "
          f"p50 {c['utterance_s_p50']} s (max {c['utterance_s_max']} s); word lag p50 / p95 "
          f"{c['word_lag_ms']['p50']} / {c['word_lag_ms']['p95']} ms; end of speech -> "
          f"final {c['final_after_speech_end_ms']['p50']} / "
          f"{c['final_after_speech_end_ms']['p95']} ms")
    print(f"  WER streaming {c['wer_streaming']:.3f}  offline {c['wer_offline']:.3f}; "
          f"formatted {c['formatted_wer_streaming']:.3f}  offline "
          f"{c['formatted_wer_offline']:.3f}")
    if c.get("per_reading"):
        print_rows(c["per_reading"])


def print_report(result: dict[str, Any], fast_ms: list[float], padded_ms: list[float]) -> None:
    rows = ["chunk_rtt_ms", "final_chunk_rtt_ms", "final_chunk_rtt_2_5s_utterances_ms",
            "padded_chunk_rtt_ms", "final_after_speech_end_ms", "first_partial_ms"]
    print(f"\n{'metric':38s} {'p50':>8s} {'p95':>8s} {'n':>5s}")
    for name in rows:
        r = result[name]
        print(f"{name:38s} {r['p50'] if r['p50'] is not None else '-':>8} "
              f"{r['p95'] if r['p95'] is not None else '-':>8} {r['n']:>5}")
    if fast_ms and padded_ms:
        print(f"padded/fast final chunk RTT ratio: p50 "
              f"{statistics.median(padded_ms) / statistics.median(fast_ms):.2f}x")
    for name, r in result["breakdown_ms"].items():
        print(f"  final step {name:27s} {r['p50'] if r['p50'] is not None else '-':>8} "
              f"{r['p95'] if r['p95'] is not None else '-':>8} {r['n']:>5}")
    print(f"finals decoded speculatively: {result['speculative_share']}; first partial's first "
          f"word = the final's: {result['first_partial_first_word_agrees']}")
    print(f"WER streaming {result['wer_streaming']:.3f}  offline {result['wer_offline']:.3f}  "
          f"(diff {100 * (result['wer_streaming'] - result['wer_offline']):+.1f} points)")
    print(f"formatted WER streaming {result['formatted_wer_streaming']:.3f}  offline "
          f"{result['formatted_wer_offline']:.3f}  (diff "
          f"{100 * (result['formatted_wer_streaming'] - result['formatted_wer_offline']):+.1f} "
          "points; references with case and punctuation)")
    print(f"formatted WER of the finals dictated into one field (joined as the app types them): "
          f"{result['formatted_wer_dictated']:.3f}")
    if (c := result.get("continuous")) is not None:
        print_continuous(c)
    print(f"silence/noise words {result['silence_words']}; first words lost "
          f"{result['first_words_lost']}, last words lost {result['last_words_lost']}; "
          f"decode paths {result['decode_paths']}")


def word_errors(ref: str, hyp: str) -> int:
    import jiwer

    r = normalize(ref)
    if not r:
        return 0
    out = jiwer.process_words(r, normalize(hyp))
    return int(out.substitutions + out.deletions + out.insertions)


def print_file_diffs(entries: list[Any], result: dict[str, Any],
                     before: dict[str, Any] | None) -> None:
    """Word errors per file, streaming vs offline, where they differ (now or before)."""
    refs = {e.path.name: e.text for e in entries}
    old = {f["file"]: f for f in (before or {}).get("per_file", [])}
    rows, totals = [], [0, 0, 0, 0]
    for f in result["per_file"]:
        ref, prev = refs[f["file"]], old.get(f["file"])
        now = [word_errors(ref, f["streaming"]), word_errors(ref, f["offline"])]
        then = [word_errors(ref, prev["streaming"]), word_errors(ref, prev["offline"])] if prev else []
        for i, n in enumerate(now + then):
            totals[i] += n
        if now[0] != now[1] or (then and then[0] != then[1]):
            rows.append(f"  {f['file'][:40]:40s} {now[0]:4d} {now[1]:4d} {now[0] - now[1]:+5d}"
                        + (f"   {then[0]:4d} {then[1]:4d} {then[0] - then[1]:+5d}" if then else ""))
    words = sum(len(normalize(refs[f["file"]]).split()) for f in result["per_file"])
    print(f"\nword errors per file ({words} reference words): streaming, offline, diff"
          + ("   | before: streaming, offline, diff" if old else ""))
    print("\n".join(rows))
    print(f"  {'total':40s} {totals[0]:4d} {totals[1]:4d} {totals[0] - totals[1]:+5d}"
          + (f"   {totals[2]:4d} {totals[3]:4d} {totals[2] - totals[3]:+5d}" if old else ""))


if __name__ == "__main__":
    sys.exit(main())
