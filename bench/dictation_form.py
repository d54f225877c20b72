"""Formatted vs normalised WER of dictated text: push-to-talk, VAD and offline, one session each.

    python bench/dictation_form.py [--manifest tests/audio/manifest.jsonl | eval]
        [--per-speaker N] [--limit N] [--out bench/results/dictation_form.json]
        [--model tiny.en] [--rounds 2] [--before OLD.json]

Case and punctuation are what a dictation user sees, and a normalised WER hides their loss
(issue 13: after one unpunctuated final, every later dictation of the session came out
unpunctuated). So the English short clips are dictated one after another in ONE session per
mode, as a person would, so that each final's text becomes the next one's prompt:
  ptt      the stream core in push-to-talk mode: key down 0.3 s before the clip, up 0.5 s after
  vad      the stream core in voice-activity mode: 1 s of silence between clips
  offline  `transcribe_file` on each clip (the file path: 30 s windows, no live prompt)
``--rounds`` plays the whole list that many times in the same session (the bug showed on the
second hearing). Every decode runs on the real model, on this thread, in simulated time (the
stream core is sans-I/O: this is a synchronous driver). Reported per mode: normalised WER (all
clips), formatted WER (case and punctuation kept; only the clips whose reference is formatted,
evaluation.formatted), and finals that lack sentence form (no capital or no end), as
delivered and as Whisper wrote them (before engine.core.form's repair). The modes are compared
pairwise (ptt - offline, vad - offline, vad - ptt; ``--before``: each mode now - before) with a
95 % bootstrap interval over clips (common.paired_wer). ``--manifest eval`` is the
371-utterance corpus (common.EVAL_MANIFEST); ``--per-speaker N`` a fixed speaker-balanced
subset of it. Prints tables and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from common import (
    EVAL_MANIFEST,
    REPO,
    balanced,
    paired_wer,
    print_table,
    speakers_of,
    utterance_errors,
    write_json,
)
from evaluation import (  # noqa: E402
    english,
    error_rate,
    formatted,
    formatted_error_rate,
    read_manifest,
)

from engine.asr.ct2_decoder import Ct2Runner  # noqa: E402
from engine.audio.decode import load_audio  # noqa: E402
from engine.core.stream import StreamCore, StreamOptions  # noqa: E402
from engine.events import Event, FinalText  # noqa: E402
from engine.files import FileOptions, transcribe_file  # noqa: E402
from engine.types import SAMPLE_RATE, Audio, Runner, Segment  # noqa: E402
from engine.vad import default_scorer  # noqa: E402

BLOCK = 1600  # 100 ms blocks, as the microphone delivers them


def lacks_form(text: str) -> bool:
    text = text.strip()
    return bool(text) and (not text[0].isupper() or text[-1] not in ".?!")


class Session:
    """One dictation session on the stream core, decoding synchronously on the real model."""

    def __init__(self, runner: Runner, mode: str) -> None:
        from engine.core.policy import PolicyOptions

        policy = PolicyOptions().for_model(runner.info)
        self.core = StreamCore(StreamOptions(mode=mode, policy=policy), default_scorer())
        self.runner = runner
        self.now = 0.0
        self.finals: list[str] = []
        self.whisper: list[str] = []  # per final: what Whisper wrote, before any repair
        self._decoded: dict[int, str] = {}  # utterance -> its last final decode's text

    def play(self, audio: Audio) -> None:
        for i in range(0, len(audio), BLOCK):
            block = audio[i:i + BLOCK]
            self.now += len(block) / SAMPLE_RATE
            self._take(self.core.feed(block, self.now))
            self._run()

    def silence(self, seconds: float) -> None:
        self.play(np.zeros(int(seconds * SAMPLE_RATE), np.float32))

    def key(self, down: bool) -> None:
        self.core.begin() if down else self.core.end()

    def finish(self) -> None:
        self._take(self.core.flush(self.now))
        self._run()

    def _run(self) -> None:
        while (job := self.core.next_job(self.now)) is not None:
            started = time.perf_counter()
            transcript = self.runner.decode_batch([job.request])[0]
            self.now += time.perf_counter() - started
            if job.kind == "final":  # a speculative one may stand (emitted by a later feed)
                self._decoded[job.utterance_id] = transcript.text.strip()
            self._take(self.core.on_result(job, transcript, self.now))

    def _take(self, events: list[Event]) -> None:
        for e in events:
            if isinstance(e, FinalText) and e.text:
                self.finals.append(e.text)
                self.whisper.append(self._decoded.pop(e.utterance_id, ""))


def dictate(runner: Runner, clips: list[Audio], mode: str, rounds: int
            ) -> tuple[list[list[str]], list[str]]:
    """Per clip (per round), the final texts it produced; and what Whisper wrote for each."""
    session = Session(runner, mode)
    out: list[list[str]] = []
    session.silence(1.0)
    for _ in range(rounds):
        for audio in clips:
            before = len(session.finals)
            if mode == "ptt":
                session.key(True)
                session.silence(0.3)
                session.play(audio)
                session.silence(0.5)
                session.key(False)
                session.silence(0.3)
            else:
                session.play(audio)
                session.silence(1.5)
            out.append(session.finals[before:])
    session.finish()
    return out, session.whisper


def offline(runner: Runner, paths: list[Path]) -> list[list[str]]:
    out = []
    for path in paths:
        pieces = [s.text.strip() for s in transcribe_file(path, runner, FileOptions())
                  if isinstance(s, Segment)]
        out.append([" ".join(p for p in pieces if p)])
    return out


def score(refs: list[str], hyps: list[str], finals: list[list[str]],
          whisper: list[str]) -> dict[str, Any]:
    texts = [t for per_clip in finals for t in per_clip]
    return {
        "wer": round(error_rate(refs, hyps), 4),
        "formatted_wer": round(formatted_error_rate(refs, hyps), 4),
        "finals": len(texts),
        "finals_without_form": sum(lacks_form(t) for t in texts),
        "whisper_without_form": sum(lacks_form(t) for t in whisper),
    }


def per_clip(refs: list[str], hyps: list[str]) -> dict[str, list[int]]:
    """Each clip's (and round's) word errors and reference words, normalised and formatted."""
    errs = [utterance_errors(r, h) for r, h in zip(refs, hyps, strict=True)]
    return {"errors": [e.errors for e in errs], "words": [e.words for e in errs],
            "formatted_errors": [e.formatted_errors for e in errs],
            "formatted_words": [e.formatted_words for e in errs]}


def compare(a: dict[str, list[int]], b: dict[str, list[int]]) -> list[str]:
    """A - B: normalised and formatted WER difference with 95 % intervals (same clips)."""
    wer = paired_wer(a["errors"], b["errors"], a["words"])
    form = [i for i, n in enumerate(a["formatted_words"]) if n]
    fwer = paired_wer([a["formatted_errors"][i] for i in form],
                      [b["formatted_errors"][i] for i in form],
                      [a["formatted_words"][i] for i in form]) if form else None
    return [f"{wer.a:.2f} / {wer.b:.2f}", str(wer),
            "-" if fwer is None else f"{fwer.a:.2f} / {fwer.b:.2f}", str(fwer or "-")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--manifest", default=str(REPO / "tests/audio/manifest.jsonl"))
    parser.add_argument("--out", default=str(REPO / "bench/results/dictation_form.json"))
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--per-speaker", type=int, default=0,
                        help="a fixed speaker-balanced subset: the first N clips per speaker")
    parser.add_argument("--limit", type=int, default=0, help="only the first N clips")
    parser.add_argument("--before", help="an earlier result JSON of the same clips: paired")
    args = parser.parse_args()
    if args.manifest == "eval":
        args.manifest = str(EVAL_MANIFEST)
    entries = english(read_manifest(args.manifest))
    speakers = speakers_of(args.manifest)
    entries = balanced(entries, [speakers[e.path.name] for e in entries],
                       args.per_speaker)[: args.limit or None]
    clips = [load_audio(e.path) for e in entries]
    runner = Ct2Runner(args.model, streams=1)
    runner.load()
    refs = [e.text for e in entries] * args.rounds
    results: dict[str, Any] = {"model": args.model, "clips": len(entries),
                               "formatted_clips": sum(formatted(e.text) for e in entries),
                               "rounds": args.rounds, "load_average": os.getloadavg()[0]}
    texts: dict[str, list[str]] = {}
    for mode in ("ptt", "vad", "offline"):
        if mode == "offline":
            finals = offline(runner, [e.path for e in entries]) * args.rounds
            whisper = [t for f in finals for t in f]
        else:
            finals, whisper = dictate(runner, clips, mode, args.rounds)
        hyps = [" ".join(f) for f in finals]
        results[mode] = score(refs, hyps, finals, whisper)
        results[mode]["per_clip"] = per_clip(refs, hyps)
        texts[mode] = hyps
    results["texts"] = {e.path.name: {m: texts[m][i::len(entries)] for m in texts}
                        for i, e in enumerate(entries)}
    print(f"{len(entries)} English clips x {args.rounds} rounds, one session per mode "
          f"(formatted WER over the {results['formatted_clips']} clips with formatted "
          f"references), {args.model}, load {results['load_average']:.1f}")
    print(f"{'mode':8} {'WER':>7} {'formatted WER':>14} {'finals without form':>20} "
          f"{'as Whisper wrote them':>22}")
    for mode in ("ptt", "vad", "offline"):
        r = results[mode]
        print(f"{mode:8} {r['wer'] * 100:6.2f}% {r['formatted_wer'] * 100:13.2f}% "
              f"{r['finals_without_form']:>13} of {r['finals']:<3} "
              f"{r['whisper_without_form']:>15} of {r['finals']}")
    pairs = [("ptt", "offline"), ("vad", "offline"), ("vad", "ptt")]
    rows = [[f"{a} - {b}", *compare(results[a]["per_clip"], results[b]["per_clip"])]
            for a, b in pairs]
    if args.before:
        before = json.loads(Path(args.before).read_text())
        rows += [[f"{m} now - before", *compare(results[m]["per_clip"], before[m]["per_clip"])]
                 for m in ("ptt", "vad", "offline") if "per_clip" in before.get(m, {})]
    print_table(["A - B", "WER A / B %", "WER diff [95%]", "formatted A / B %",
                 "formatted diff [95%]"], rows,
                title="\npaired over clips x rounds (95 % bootstrap interval)")
    write_json(args.out, results)


if __name__ == "__main__":
    main()
