"""Live captions, end to end: from the last sample of a clip played on the computer's output to
its final caption shown in the real overlay, and the caption WER.

    . .ci/desktop.sh && python bench/captions.py --out bench/results/captions.json

The real app's controller and caption overlay (in this process, on the X display) caption
what PulseAudio plays: the corpus's short English clips (/work/shared/audio, else tests/audio)
are played one at a time by `paplay` into a null sink that is the default output ("system":
what the computer plays), then in pairs for "you and them": one clip into the speakers and
another into the microphone (a second null sink whose monitor the microphone records) at the
same time. Per clip: its last sample played (paplay drained) -> the overlay painting the last
final of that clip (`CaptionWindow.add_final` followed by a synchronous repaint), p50 and p95;
the caption WER of the clip's finals against its reference; for the pairs, whether each clip
was captioned under its own label (none lost, none mislabelled). Prints a table, writes JSON.

``--long N``: the manifest's first N long readings are played through the system source (one
source: pieces committed early), and per reading the overlay's text is scored against the
reading decoded offline (`bench/reading_report.py`: WER and formatted WER with their paired
95 % interval over sentences, false sentence ends) and the last sample -> last caption shown;
the per-word lag is `bench/streaming.py --commit --continuous-only`'s (word times are not shown).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from reading_report import print_rows, reading_row

from common import DEV_MANIFEST, TEST_MANIFEST, pct, print_table, write_json
from evaluation import english, error_rate, read_manifest

SETTLE_S = 4.0  # no new final for this long after the clip: its captions are complete
MAX_WAIT_S = 25.0


def sink(name: str) -> str:
    return subprocess.run(
        ["pactl", "load-module", "module-null-sink", f"sink_name={name}", "rate=16000",
         "channels=1", f"sink_properties=device.description={name}"],
        capture_output=True, text=True, check=True, timeout=10).stdout.strip()


class Overlay:
    """Records when the overlay has painted each final: (time, source label, text)."""

    def __init__(self, controller: Any) -> None:
        from PySide6.QtWidgets import QApplication

        self.app = QApplication.instance() or QApplication([])
        self.shown: list[tuple[float, str, str]] = []
        window = controller.captions
        original = window.add_final

        def add_final(line: Any) -> None:
            original(line)
            window.repaint()  # painted now, not at the next event loop turn
            text = getattr(line, "text", line)
            if str(text).strip():
                self.shown.append((time.monotonic(), getattr(line, "source", ""), str(text)))
        window.add_final = add_final

    def pump(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.app.processEvents()
            time.sleep(0.005)

    def play(self, *plays: tuple[Path, str]) -> list[float]:
        """Play each (wav, sink) at once; the time each one's last sample was played."""
        procs = [subprocess.Popen(["paplay", f"--device={where}", "--latency-msec=20",
                                   str(wav)]) for wav, where in plays]
        ended: list[float | None] = [None] * len(procs)
        while any(t is None for t in ended):
            self.app.processEvents()
            for i, proc in enumerate(procs):
                if ended[i] is None and proc.poll() is not None:
                    ended[i] = time.monotonic()
            time.sleep(0.002)
        return [t for t in ended if t is not None]

    def settle(self, since: int) -> None:
        """Wait until the finals of what was played have come (quiet for SETTLE_S)."""
        deadline = time.monotonic() + MAX_WAIT_S
        last = time.monotonic()
        count = len(self.shown)
        while time.monotonic() < deadline and time.monotonic() - last < SETTLE_S:
            self.pump(0.05)
            if len(self.shown) != count:
                count, last = len(self.shown), time.monotonic()


def run_source(controller: Any, overlay: Overlay, source: str, clips: list[Any],
               speakers: str, mic: str) -> dict[str, Any]:
    controller.set_caption_source(source)
    if controller.engine is None:
        controller.start_engine()
    deadline = time.monotonic() + 300
    while controller.state != "listening" and time.monotonic() < deadline:
        overlay.pump(0.1)
    overlay.pump(2.0)
    rows: list[dict[str, Any]] = []
    pairs = [(c, None) for c in clips] if source == "system" else list(
        zip(clips[0::2], clips[1::2], strict=False))
    for them, you in pairs:
        before = len(overlay.shown)
        plays = [(them.path, speakers)] + ([(you.path, mic)] if you is not None else [])
        ended = overlay.play(*plays)
        overlay.settle(before)
        shown = overlay.shown[before:]
        for clip, label, end in ((them, "Them", ended[0]), *(
                [(you, "You", ended[1])] if you is not None else [])):
            mine = [s for s in shown if source == "system" or s[1] == label]
            text = " ".join(t for _, _, t in mine)
            rows.append({"clip": clip.path.name, "label": label, "reference": clip.text,
                         "captions": text, "latency_s": (mine[-1][0] - end) if mine else None,
                         "lost": not mine})
        print(f"  {source}: {[(r['label'], r['captions'][:60]) for r in rows[-len(plays):]]}",
              file=sys.stderr)
    controller.stop_engine()
    deadline = time.monotonic() + 120
    while controller.state != "stopped" and time.monotonic() < deadline:
        overlay.pump(0.1)
    return summarise(source, rows)


def run_long(controller: Any, overlay: Overlay, readings: list[Any], speakers: str,
             model: str) -> list[dict[str, Any]]:
    """Each long reading played through the system source; its captions against the offline
    decode of the file (module docstring)."""
    from engine.asr.sequential import SequentialRunner
    from engine.audio.decode import load_audio
    from engine.types import DecodeOptions

    offline = SequentialRunner(model)
    offline.load()
    controller.set_caption_source("system")
    controller.start_engine()
    deadline = time.monotonic() + 300
    while controller.state != "listening" and time.monotonic() < deadline:
        overlay.pump(0.1)
    rows = []
    for item in readings:
        before = len(overlay.shown)
        [ended] = overlay.play((item.path, speakers))
        overlay.settle(before)
        shown = overlay.shown[before:]
        row = reading_row(item.path.name, item.text, None, " ".join(t for _, _, t in shown),
                          offline.decode(load_audio(item.path), DecodeOptions()).text, [])
        row["last_sample_to_shown_s"] = round(shown[-1][0] - ended, 2) if shown else None
        rows.append(row)
    controller.stop_engine()
    return rows


def summarise(source: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    kept = [r for r in rows if not r["lost"]]
    result: dict[str, Any] = {
        "source": source, "clips": len(rows), "lost": len(rows) - len(kept),
        "latency": pct([r["latency_s"] * 1000 for r in kept], 0),
        "wer": round(error_rate([r["reference"] for r in kept], [r["captions"] for r in kept]), 4)
        if kept else None, "rows": rows}
    if source == "both":
        for label in ("Them", "You"):
            mine = [r for r in kept if r["label"] == label]
            result[label] = {"latency": pct([r["latency_s"] * 1000 for r in mine], 0),
                             "wer": round(error_rate([r["reference"] for r in mine],
                                                     [r["captions"] for r in mine]), 4)
                             if mine else None}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=12, help="clips for the system source")
    parser.add_argument("--pairs", type=int, default=6, help="clip pairs for you and them")
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--sources", default="system,both", help="which runs (system, both)")
    parser.add_argument("--out", type=Path, help="write the JSON here")
    parser.add_argument("--manifest", type=Path,
                        help="default: the dev corpus when there is one, else the tests'")
    parser.add_argument("--long", type=int, default=0, metavar="N",
                        help="also play the first N long readings (system source)")
    parser.add_argument("--smoke", action="store_true",
                        help="one clip, the system source only, the tests' corpus")
    args = parser.parse_args()
    if args.smoke:
        args.clips, args.sources, args.manifest = 1, "system", TEST_MANIFEST
    if args.manifest is None:
        args.manifest = DEV_MANIFEST if DEV_MANIFEST.is_file() else TEST_MANIFEST

    speakers, mic = f"bench_speakers_{os.getpid()}", f"bench_mic_{os.getpid()}"
    modules = [sink(speakers), sink(mic)]
    default = subprocess.run(["pactl", "get-default-sink"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
    os.environ["PULSE_SOURCE"] = f"{mic}.monitor"  # the microphone hears the mic sink
    try:
        subprocess.run(["pactl", "set-default-sink", speakers], check=True, timeout=10)
        return _bench(args, speakers, mic)
    finally:
        subprocess.run(["pactl", "set-default-sink", default], timeout=10, check=False)
        for module in modules:
            subprocess.run(["pactl", "unload-module", module], timeout=10, check=False)


def _bench(args: argparse.Namespace, speakers: str, mic: str) -> int:
    from PySide6.QtWidgets import QApplication

    from app.controller import Controller, LaunchOptions
    from app.settings import Settings, with_changes

    clips = [e for e in english(read_manifest(args.manifest))
             if e.duration_s <= 12.0]
    app = QApplication.instance() or QApplication([])
    settings = with_changes(Settings(), listen_mode="captions", model=args.model,
                            caption_lines=4)
    controller = Controller(settings, LaunchOptions(enable_hotkey=False, model=args.model))
    controller.set_captions_visible(True)
    overlay = Overlay(controller)
    runs = {"system": clips[:args.clips], "both": clips[:2 * args.pairs]}
    results = [run_source(controller, overlay, source, runs[source], speakers, mic)
               for source in args.sources.split(",")]
    readings = run_long(controller, overlay, english(read_manifest(args.manifest), kinds=(
        "long",))[:args.long], speakers, args.model) if args.long else []
    controller.captions.close()
    controller.window.close()
    del app
    print_table(("source", "clips", "lost", "last sample -> shown p50 ms", "p95 ms",
                 "caption WER %"), table_rows(results))
    if readings:
        print_rows(readings, "long readings captioned (system source)")
    if args.out:
        write_json(args.out, {"model": args.model, "results": results, "long": readings})
    return 0


def table_rows(results: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    def wer(value: float | None) -> float | None:
        return None if value is None else round(100 * value, 1)

    rows: list[tuple[Any, ...]] = []
    for r in results:
        rows.append((r["source"], r["clips"], r["lost"], r["latency"]["p50"],
                     r["latency"]["p95"], wer(r["wer"])))
        rows += [(f"both: {label}", "", "", r[label]["latency"]["p50"], r[label]["latency"]["p95"],
                  wer(r[label]["wer"])) for label in ("Them", "You") if label in r]
    return rows


if __name__ == "__main__":
    sys.exit(main())
