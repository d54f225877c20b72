"""`sottovoce listen`: live transcription in the terminal, from a microphone or a file; with
``--source`` live captions of what the computer plays, one app, or you and them (app.captions).

Partial text is shown on one updating line (committed words plain, tentative ones dim); each
final line shows when it was spoken and its latency; a summary follows at the end. Ctrl+C stops
cleanly: the utterance in flight is decoded and printed (and journaled) before exit; a second
Ctrl+C stops at once, keeping what was already heard (app.stop_signals). SIGTERM and SIGHUP
stop the same way.
In ``--mode ptt`` the Enter key toggles talking (press Enter, speak, press Enter).
Captions (``--source``, ``--translate``, ``--server``) print one plain line per final, labelled
("You: ...", "Them: ...") when there are two sources, its translation on the next line.
Exit status: 0 done (or stopped with one Ctrl+C), 1 the engine failed (no microphone, model
missing...), 2 usage error, 128 + the signal's number when SIGTERM or SIGHUP stopped it or a
second signal cut the stop short (130 for Ctrl+C twice, 143 for SIGTERM).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from app.app_engine import RunningEngine
from app.captions import CaptionConfig
from app.engine_factory import EngineConfig, make_engine
from app.stop_signals import StopSignals, run_until_stopped
from engine.captions import final_line
from engine.core.captions import CaptionLine, continues
from engine.core.form import has_form
from engine.core.sanitize import clean, one_line
from engine.errors import EngineError
from engine.events import (
    EngineFailed,
    Event,
    FinalText,
    Metrics,
    PartialText,
    StateChanged,
    Translation,
)
from engine.models import DEFAULT_MODEL
from engine.types import samples_to_seconds

DIM, RESET, CLEAR = "\033[2m", "\033[0m", "\r\033[K"


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "listen", help="live transcription from the microphone (or a file) in the terminal",
        description="Live transcription: partial text as you speak, final lines with latency.",
        epilog="Ctrl+C stops after the last line; twice, at once (what was heard is saved). "
               "Exit status: 0 done, 1 engine failure, 2 usage error, 128 + N when signal N "
               "(SIGTERM, SIGHUP, a second Ctrl+C) ended it.",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument("--input", metavar="FILE", help="play this audio file as the microphone")
    source.add_argument("--device", metavar="N",
                        help="input device index or name fragment (default: system default)")
    p.add_argument("--model", default=DEFAULT_MODEL, help="model name or directory (tiny.en)")
    p.add_argument("--language", help="ISO 639-1 code; default: detect (multilingual models)")
    p.add_argument("--mode", choices=("vad", "ptt"), default="vad",
                   help="vad: speech detection (default); ptt: Enter starts/stops talking")
    p.add_argument("--fast", action="store_true",
                   help="with --input: run in simulated time instead of real time")
    p.add_argument("--padded", action="store_true",
                   help="use faster-whisper's padded 30 s decode instead of the fast chunk path")
    p.add_argument("--no-partials", action="store_true", help="final text only")
    p.add_argument("--no-journal", action="store_true", help="do not autosave finals")
    captions = p.add_argument_group("captions")
    captions.add_argument(
        "--source", metavar="SOURCE",
        help="caption mic, system (what the computer plays), app:NAME (one app's sound), "
             "both (you on the mic and them on the system) or device:NAME")
    captions.add_argument("--translate", nargs="?", const="below", choices=("below", "alone"),
                          help="English translation under each line (below) or instead (alone); "
                               "uses the multilingual base model")
    captions.add_argument("--server", metavar="URL",
                          help="caption on a remote server (ws://..., whisperlive://...)")
    captions.add_argument("--you", default="You", help="label of the microphone with --source both")
    captions.add_argument("--them", default="Them", help="label of the system with --source both")
    captions.add_argument("--mask-profanity", action="store_true", help="mask swear words")
    captions.add_argument("--list-apps", action="store_true",
                          help="list the apps playing sound now (for --source app:NAME) and exit")
    p.set_defaults(handler=run)


def printable(event: Event) -> Event:
    """``event`` with its text fit for a terminal: a model's, a remote server's or another
    program's text (a caption source's label) may hold escape sequences (engine.core.sanitize)."""
    if isinstance(event, PartialText):
        return replace(event, committed=clean(event.committed), tentative=clean(event.tentative),
                       source=one_line(event.source))
    if isinstance(event, FinalText):
        return replace(event, text=clean(event.text), source=one_line(event.source))
    if isinstance(event, Translation):
        return replace(event, text=clean(event.text), source=one_line(event.source),
                       language=one_line(event.language) if event.language else None)
    if isinstance(event, EngineFailed):
        return replace(event, message=one_line(event.message))
    return event


class Printer:
    """The EventSink: renders events to a terminal and keeps what the summary needs."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.finals: list[FinalText] = []
        self.metrics: list[Metrics] = []
        self.failure: EngineFailed | None = None
        self.listening = threading.Event()
        self._partial_shown = False

    def __call__(self, event: Event) -> None:
        event = printable(event)
        if isinstance(event, PartialText):
            self._partial(event)
        elif isinstance(event, FinalText):
            self._final(event)
        elif isinstance(event, Metrics):
            self.metrics.append(event)
        elif isinstance(event, EngineFailed):
            self._clear()
            print(f"error: {event.message}", file=sys.stderr, flush=True)
            if not event.recoverable:
                self.failure = event
        elif isinstance(event, StateChanged) and event.state == "listening":
            self.listening.set()
            print("listening... (Ctrl+C to stop)", file=sys.stderr, flush=True)

    def _partial(self, event: PartialText) -> None:
        if not self.tty:
            return  # one updating line only makes sense on a terminal
        tentative = f"{DIM}{event.tentative}{RESET}" if event.tentative else ""
        self.out.write(f"{CLEAR}{event.committed} {tentative}".rstrip())
        self.out.flush()
        self._partial_shown = True

    def _final(self, event: FinalText) -> None:
        self._clear()
        if not event.text:
            return
        self.finals.append(event)
        at = samples_to_seconds(event.start)
        self.out.write(f"[{at:7.2f}s] {event.text}   ({event.after_speech_end_ms:.0f} ms after "
                       f"speech end, decode {event.latency_ms:.0f} ms)\n")
        self.out.flush()

    def _clear(self) -> None:
        if self._partial_shown:
            self.out.write(CLEAR)
            self._partial_shown = False

    def summary(self) -> str:
        words = sum(len(f.text.split()) for f in self.finals)
        lines = [f"{len(self.finals)} utterances, {words} words"]
        finals = [m.chunk_rtt_ms for m in self.metrics if m.kind == "final"]
        if finals:
            after = [f.after_speech_end_ms for f in self.finals]
            lines.append(f"final decode median {statistics.median(finals):.0f} ms; final text "
                         f"median {statistics.median(after):.0f} ms after speech end")
        if self.metrics:
            lines.append(f"max lag {max(m.lag_ms for m in self.metrics):.0f} ms; "
                         f"dropped frames {self.metrics[-1].dropped_frames}")
        return "\n".join(lines)


def _toggle_on_enter(engine: RunningEngine) -> None:
    """Push-to-talk from the keyboard: each Enter alternates begin/end."""
    talking = False
    for _line in sys.stdin:
        talking = not talking
        if talking:
            engine.begin_utterance()
        else:
            engine.end_utterance()
        print("talking..." if talking else "stopped talking", file=sys.stderr, flush=True)


class CaptionPrinter(Printer):
    """Captions: one plain line per sentence (labelled when there are two sources), its
    translation under it; the timing stays in the summary. The pieces of a long utterance
    committed while it is still spoken (`PolicyOptions.commit_stable`) go on the line of
    their sentence (`engine.core.captions.continues`): it ends where the sentence does, or
    where the next final does not go on with it."""

    def __init__(self, out: TextIO) -> None:
        super().__init__(out)
        self._open: CaptionLine | None = None  # the line printed so far, its sentence open
        self._shown = ""  # ... as printed (label and the finals joined)

    def __call__(self, event: Event) -> None:
        event = printable(event)
        if isinstance(event, Translation):
            self._clear()
            self._end_line()
            label = f"{event.source} " if event.source else ""
            self.out.write(f"  {label}[{event.language or '?'} → en] {event.text}\n")
            self.out.flush()
        else:
            super().__call__(event)

    def _partial(self, event: PartialText) -> None:
        if self._open is not None:  # (the partial text goes on after the open line)
            event = replace(event, committed=f"{self._shown} {event.committed}".strip())
        super()._partial(event)

    def _final(self, event: FinalText) -> None:
        self._clear()
        if not event.text:
            return
        self.finals.append(event)
        line = final_line(event)
        if self._open is not None and continues(self._open, line):
            self._open = replace(self._open, text=line.text, end_s=line.end_s)
            self._shown += " " + line.text
            self.out.write(" " + line.text)
        else:
            self._end_line()
            self._open = line
            self._shown = (f"{event.source}: " if event.source else "") + line.text
            self.out.write(self._shown)
        if has_form(line.text):
            self._end_line()
        self.out.flush()

    def _clear(self) -> None:
        if self._partial_shown and self._open is not None:  # back to the open line alone
            self.out.write(f"{CLEAR}{self._shown}")
            self._partial_shown = False
        super()._clear()

    def _end_line(self) -> None:
        if self._open is not None:
            self.out.write("\n")
            self.out.flush()
            self._open = None

    def summary(self) -> str:
        self._end_line()
        return super().summary()


def _list_apps() -> int:
    from engine.audio.outputs import playing_apps

    try:
        apps = playing_apps()
    except EngineError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 1
    for app in apps:  # names and titles other programs chose: only their text is printed
        print(f"{one_line(app.name)}\t{one_line(app.media)}{'  (paused)' if app.corked else ''}")
    if not apps:
        print("no app is playing sound now", file=sys.stderr)
    return 0


def _engine_config(args: argparse.Namespace, captions: bool) -> EngineConfig:
    """The engine the app would run for these options (raises ValueError on bad ones)."""
    device: int | str = args.device or ""
    if isinstance(device, str) and device.isdigit():
        device = int(device)
    input_path = Path(args.input) if args.input else None
    if captions:
        return EngineConfig(mode="vad", captions=CaptionConfig(
            source=args.source or "mic", you=args.you, them=args.them,
            translate=args.translate or "off", mask=args.mask_profanity, model=args.model,
            language=args.language, server=args.server or "", journal=not args.no_journal,
            mic=device if device != "" else None, input_path=input_path))
    return EngineConfig(model=args.model, language=args.language, mode=args.mode,
                        input_path=input_path, input_device=device,
                        partials=not args.no_partials, padded=args.padded,
                        journal=not args.no_journal, realtime=not args.fast,
                        microphone_fallback=False)


def _finish(printer: Printer, journal_path: str | None, signals: StopSignals) -> int:
    print(printer.summary(), file=sys.stderr)
    if journal_path and printer.finals:
        print(f"saved to {journal_path}", file=sys.stderr)
    return signals.exit_status(1 if printer.failure is not None else 0)


def run(args: argparse.Namespace) -> int:
    if args.list_apps:
        return _list_apps()
    captions = bool(args.source or args.translate or args.server)
    if captions and (args.mode == "ptt" or args.fast or args.padded):
        print("error: captions listen by voice activity in real time (no --mode ptt, "
              "--fast or --padded)", file=sys.stderr)
        return 2
    if args.fast and not args.input:
        print("error: --fast needs --input", file=sys.stderr)
        return 2
    try:
        config = _engine_config(args, captions)
    except ValueError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    if config.captions is not None and config.captions.decode_model != args.model:
        print(f"translating with the multilingual {config.captions.decode_model!r} model",
              file=sys.stderr)
    with StopSignals() as signals:
        return _run(config, CaptionPrinter(sys.stdout) if captions else Printer(sys.stdout),
                    signals)


def _run(config: EngineConfig, printer: Printer, signals: StopSignals) -> int:
    """Run the engine until its input ends or a signal stops it; then the summary."""
    try:
        engine = make_engine(config, printer)
    except EngineError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 1
    if signals.received:  # stopped before anything was heard
        return signals.exit_status(0)
    engine.start()
    if config.mode == "ptt":
        threading.Thread(target=_toggle_on_enter, args=(engine,), daemon=True).start()
    run_until_stopped(engine, signals, abort=engine.abort, finishing="finishing the last line"
                      if config.captions is not None else "finishing the last utterance")
    return _finish(printer, engine.journal_path, signals)
