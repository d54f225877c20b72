"""`sottovoce transcribe FILE...`: transcribe audio/video files to TXT, SRT, WebVTT or JSON.

Each file is decoded (any format PyAV reads, any rate and channel count), transcribed, and
written atomically to ``-o DIR`` as ``<name>.<format>`` (never over an input; clashes and
over-long names as `engine.outputs` says; the folder is checked before any work), or printed to
stdout without ``-o``.
A file that cannot be read gets a one-line error naming it and the others are still done.
Exit status: 0 all done, 1 some file failed (or the model could not load), 2 usage error.

Every file goes through `engine.files.transcribe_file` (the app's import path too); the progress
bar follows its `Progress` events. ``--engine auto`` (default) gives files under
`AUTO_BATCHED_MIN_SECONDS` to the sequential decoder (faster-whisper's own loop, a mode of the
same entry point) and longer ones to the batched long-form pipeline; ``batched`` and
``sequential`` force one. The sequential decoder reads short clips markedly better, while on a
long reading the pipeline is at par and faster (docs/evidence.md), so short files stay
sequential.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.asr import local_runner
from engine.asr.budget import DECODE_MEMORY_MB, MEMORY_TARGET_MB
from engine.asr.sequential import SequentialRunner
from engine.atomic import OutputWriteError, atomic_write_text
from engine.audio.decode import AudioReader, open_audio
from engine.core.sanitize import clean, one_line
from engine.dictation.rules import RuleError, Rules, apply_rules, parse_rules
from engine.errors import AudioDecodeError, EngineError
from engine.files import FileOptions, Progress, transcribe_file, uses_sequential
from engine.longform.pipeline import SEQUENTIAL_BEAM_SIZE
from engine.models import DEFAULT_MODEL
from engine.outputs import check_folder, output_path
from engine.types import SAMPLE_RATE, Audio, DecodeOptions, Runner, Transcript
from engine.vocabulary import load as load_vocabulary
from engine.wire.export import FORMATS, render

log = logging.getLogger(__name__)

ENGINES = ("auto", "batched", "sequential")
AUTO_BATCHED_MIN_SECONDS = 120.0
ProgressCallback = Callable[[int, int], None]  # (samples done, total samples)


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "transcribe", help="transcribe audio or video files",
        description="Transcribe audio/video files (any format PyAV/FFmpeg decodes).",
        epilog="Exit status: 0 all files done, 1 some failed, 2 usage error.",
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="audio or video files")
    p.add_argument("--sample", action="store_true",
                   help="also transcribe the bundled speech sample (11 s, public domain)")
    # SUPPRESS: `sottovoce --model base transcribe F` (the app-wide option) must not be
    # overwritten by this parser's default.
    p.add_argument("--model", default=argparse.SUPPRESS,
                   help="tiny.en (default, bundled), base (bundled, multilingual), a faster-whisper"
                        " size name, or a CTranslate2 model directory")
    p.add_argument("--language", help="ISO 639-1 code (e.g. de); default: detect")
    p.add_argument("--vocabulary", type=Path, metavar="FILE",
                   help="words and phrases to bias decoding towards (names, jargon): one per "
                        "line, the Settings > Vocabulary format; its default set is used")
    p.add_argument("--format", choices=FORMATS, default="txt", help="output format (txt)")
    p.add_argument("-o", "--output-dir", type=Path, metavar="DIR",
                   help="write <name>.<format> files here (default: print to stdout, each"
                        " file's text after a '==> FILE <==' line when there are several)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto: CUDA float16 if available, else the CPU")
    p.add_argument("--compute-type", default="auto",
                   help="CTranslate2 compute type (auto: float16 on CUDA; on the CPU the one "
                        "measured best for its kernels, as `sottovoce doctor` shows)")
    p.add_argument("--beam-size", type=int, metavar="N",
                   help="beam search width, 1 = greedy (default: 5 for files under 2 minutes;"
                        " longer ones greedy, unsure passages again at 5)")
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="batched long-form pipeline or the sequential decoder (auto: sequential"
                        " under 2 minutes)")
    p.add_argument("--replacements", type=Path, metavar="FILE",
                   help="apply replacement rules (the app's format: one 'a | b => c' or "
                        "'/regex/i => c' per line) to the text")
    p.add_argument("--decode-memory-mb", type=float, default=DECODE_MEMORY_MB, metavar="MB",
                   help="long files: decode buffers in flight, all streams together (default"
                        f" {DECODE_MEMORY_MB:g}; per actor with --cluster; 0: unbounded)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on a terminal")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="bulk mode on Ray (extra 'cluster'): local, auto or ray://HOST:PORT;"
                        " FILE may be a folder; needs -o; reruns skip finished outputs")
    p.add_argument("--actors", type=int, metavar="N",
                   help="--cluster: decode actors (default: one per GPU, else per core share)")
    p.add_argument("--summary", type=Path, metavar="JSON",
                   help="--cluster: summary file (default DIR/sottovoce-summary.json)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "sample", False):  # a first try needs no file of one's own
        from resources import sample_path

        args.files = [*args.files, str(sample_path())]
    if not args.files:  # as argparse does for a missing positional: usage, exit 2
        raise SystemExit(_usage_error("the following arguments are required: FILE (or --sample)"))
    try:
        decode = decode_options(args.language, args.beam_size, args.format)
        if getattr(args, "vocabulary", None) is not None:
            decode = dataclasses.replace(
                decode, hotwords=load_vocabulary(args.vocabulary).as_prompt())
        options = FileOptions.for_beam(decode, args.beam_size)
    except OSError as exc:
        return _usage_error(f"--vocabulary: {exc.strerror or exc}: {args.vocabulary}")
    except ValueError as exc:
        return _usage_error(str(exc))
    if args.output_dir is not None and args.output_dir.exists() and not args.output_dir.is_dir():
        return _usage_error(f"-o {args.output_dir}: exists and is not a directory")
    if args.output_dir is not None:
        try:  # before any work: a folder that cannot be written costs nothing but this
            check_folder(args.output_dir)
        except OutputWriteError as exc:
            _error(str(exc))
            return 1
    model = getattr(args, "model", None) or DEFAULT_MODEL
    rules_file = getattr(args, "replacements", None)
    if getattr(args, "cluster", None):
        if rules_file is not None:
            return _usage_error("--replacements does not work with --cluster yet")
        return _run_cluster(args, options, model)
    try:
        args.rules = _read_rules(rules_file)
    except (OSError, UnicodeDecodeError, RuleError) as exc:
        return _usage_error(f"--replacements {rules_file}: {exc}")
    decoders = make_decoders(model, args.device, args.compute_type, args.engine,
                             getattr(args, "decode_memory_mb", DECODE_MEMORY_MB) or None)
    show_progress = not args.no_progress and sys.stderr.isatty()
    try:
        failed = _transcribe_all(args, decoders, options, show_progress)
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except _FatalError as exc:
        _error(str(exc))
        return 1
    return 1 if failed else 0


def _run_cluster(args: argparse.Namespace, options: FileOptions, model: str) -> int:
    """``--cluster``: the only path that imports Ray (`engine.cluster`)."""
    if args.output_dir is None:
        return _usage_error("--cluster needs -o DIR")
    try:
        from engine.cluster.driver import ClusterOptions, run_cluster
    except ImportError as exc:
        return _usage_error(f"--cluster needs Ray: pip install 'sottovoce[cluster]' ({exc})")
    opts = ClusterOptions(
        args.cluster, args.output_dir, args.format, options, model, engine=args.engine,
        device=args.device, compute_type=args.compute_type, actors=args.actors,
        summary=args.summary, progress=not args.no_progress and sys.stderr.isatty(),
        decode_memory_mb=getattr(args, "decode_memory_mb", DECODE_MEMORY_MB) or None)
    try:
        return run_cluster(args.files, opts)
    except KeyboardInterrupt:
        _error("interrupted (finished outputs are kept; rerun to resume)")
        return 130
    except EngineError as exc:
        _error(str(exc))
        return 1


def decode_options(language: str | None, beam_size: int | None, fmt: str) -> DecodeOptions:
    """The CLI's decode settings (beam None: the sequential decoder's default, see
    `FileOptions.for_beam`). Word timings are only computed where the output uses them
    (subtitle cue borders, JSON words): they cost an extra alignment pass."""
    return DecodeOptions(language=(language or "").strip().lower() or None,
                         beam_size=SEQUENTIAL_BEAM_SIZE if beam_size is None else beam_size,
                         word_timestamps=fmt != "txt")


@dataclass(frozen=True)
class Decoders:
    """What ``--engine`` chose: the batched pipeline's runner, the sequential decoder (None:
    never) and the length under which a file goes to it. Neither is loaded until a file needs
    it."""

    runner: Runner
    sequential: SequentialRunner | None
    sequential_below_s: float


def make_decoders(model: str, device: str, compute_type: str, engine: str,
                  decode_memory_mb: float | None = DECODE_MEMORY_MB) -> Decoders:
    """The backends for ``--engine``, laid out for their decoder.

    faster-whisper's loop decodes one window at a time: one replica on all cores (two one-thread
    replicas were slower over the short clips; docs/evidence.md). The
    pipeline keeps two replicas busy (`engine.asr.local_runner` with ``files``). A run with
    short and long files on the CPU loads the model twice; where the layouts are the same
    (CUDA, one core), one backend serves both.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}")
    runner = local_runner(model, device, files=True, compute_type=compute_type,
                          decode_memory_mb=decode_memory_mb, memory_target_mb=MEMORY_TARGET_MB)
    if engine == "batched":
        return Decoders(runner, None, 0.0)
    below = math.inf if engine == "sequential" else AUTO_BATCHED_MIN_SECONDS
    if runner.streams == 1 or not _on_cpu(device, compute_type):
        return Decoders(runner, SequentialRunner(runner.model), below)  # one model serves both
    return Decoders(runner, SequentialRunner(model, device=device, compute_type=compute_type),
                    below)


def _on_cpu(device: str, compute_type: str) -> bool:
    if device != "auto":
        return device == "cpu"
    from engine.models import choose_device

    try:
        return choose_device(device, compute_type).device == "cpu"
    except EngineError:
        return False  # the error comes back, with its message, when the model loads


def transcribe(audio: Audio | AudioReader, decoders: Decoders,
               options: FileOptions | DecodeOptions, progress: ProgressCallback | None = None,
               ) -> Transcript:
    """One file's transcript through `engine.files.transcribe_file`, loading the decoder it
    needs first (`_FatalError` when it cannot load); ``progress(done, total)`` follows it."""
    file_options = dataclasses.replace(FileOptions.coerce(options),
                                       sequential_below_s=decoders.sequential_below_s)
    # A reader decodes ahead only as far as the short-file limit to tell (kept for the run).
    length = (len(audio) if isinstance(audio, np.ndarray)
              else audio.length_within(file_options.sequential_below_s))
    if length is not None and uses_sequential(length, file_options, decoders.sequential):
        assert decoders.sequential is not None
        _load_model(decoders.sequential, file_options.decode.language)
    else:
        _load_model(decoders.runner, file_options.decode.language)
        log.info("decoding with the batched long-form pipeline")
    run = transcribe_file(audio, decoders.runner, file_options, sequential=decoders.sequential)
    for event in run:
        if isinstance(event, Progress) and progress is not None:
            progress(event.done, event.total)
    return run.transcript()


def _read_rules(path: Path | None) -> Rules:
    if path is None:
        return ()
    return parse_rules(path.read_text(encoding="utf-8"))


def with_rules(transcript: Transcript, rules: Rules,
               problems: list[RuleError] | None = None) -> Transcript:
    """The transcript's text with the replacement rules applied (word timings as decoded); a
    rule that runs too long or grows a text too much is skipped there (``problems``)."""
    if not rules:
        return transcript
    segments = tuple(dataclasses.replace(s, text=apply_rules(s.text, rules, problems))
                     for s in transcript.segments)
    return dataclasses.replace(transcript, segments=segments)


class _FatalError(Exception):
    """Stops the whole run (the model cannot load, so no file can be transcribed)."""


def _transcribe_all(args: argparse.Namespace, decoders: Decoders, options: FileOptions,
                    show_progress: bool) -> int:
    """Transcribe every file in turn; returns how many failed."""
    failed = printed = 0
    used: set[Path] = set()
    inputs = {Path(os.path.abspath(name)).resolve() for name in args.files}
    for name in args.files:
        try:
            audio = open_audio(name)  # decoded piece by piece: memory bounded by length
        except AudioDecodeError as exc:
            _error(str(exc))
            failed += 1
            continue
        try:  # the model loads once a file is worth decoding
            with _progress_bar(Path(name).name, audio.expected_samples,
                               show_progress) as progress:
                transcript = transcribe(audio, decoders, options, progress)
            problems: list[RuleError] = []
            text = render(with_rules(transcript, getattr(args, "rules", ()), problems),
                          args.format)
            for problem in dict.fromkeys(str(p) for p in problems):  # once each, in order
                _warn(f"{name}: {problem}")
            if args.output_dir is None:
                _print_result(name, text, len(args.files) > 1, printed)
                printed += 1
            else:
                target = output_path(args.output_dir, Path(name), args.format,
                                     lambda p: p in used or p.resolve() in inputs)
                used.add(target)
                atomic_write_text(target, text)
                log.info("wrote %s", target)
        except AudioDecodeError as exc:  # found while decoding the file: it names the file
            _error(str(exc))
            failed += 1
        except EngineError as exc:
            _error(f"{name}: {exc}")
            failed += 1
    return failed


def _load_model(runner: Runner, language: str | None) -> None:
    try:
        runner.load()
    except EngineError as exc:
        raise _FatalError(str(exc)) from exc
    info = runner.info
    if language and language != "en" and not info.multilingual:
        log.warning("model %s is English-only: --language %s is ignored (try --model base)",
                    info.name, language)


def _print_result(name: str, text: str, with_header: bool, printed_before: int) -> None:
    if with_header:
        # Like head(1) with several files: a header names each file's text.
        sys.stdout.write(("\n" if printed_before else "") + f"==> {name} <==\n")
    # A model's (or a cluster worker's) text may hold escape sequences: only text reaches a
    # terminal, with the transcript's own line breaks.
    sys.stdout.write(clean(text, newlines=True, tabs=True))
    sys.stdout.flush()


@contextmanager
def _progress_bar(label: str, total_samples: int,
                  enabled: bool) -> Iterator[ProgressCallback | None]:
    """A tqdm bar on stderr counting audio seconds done / total, with speed and ETA."""
    if not enabled:
        yield None
        return
    try:
        from tqdm import tqdm  # comes with faster-whisper
    except ImportError:
        yield None
        return
    columns, rows = _terminal_size()
    bar = tqdm(total=round(total_samples / SAMPLE_RATE, 1), desc=label, unit="s", leave=True,
               file=sys.stderr, ncols=columns, nrows=rows,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} s audio "
                          "[{elapsed}<{remaining}, {rate_fmt}]")

    def update(done: int, total: int) -> None:
        bar.total = round(total / SAMPLE_RATE, 1)  # the header's length, until the end is read
        bar.update(round(done / SAMPLE_RATE, 1) - bar.n)

    try:
        yield update
    finally:
        bar.close()


def _terminal_size() -> tuple[int, int]:
    """stderr's columns and rows, 80x24 where the terminal reports none: a fresh pseudo-terminal
    says 0x0, and tqdm then hides the bar as if it were below the bottom of the screen."""
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
        columns, rows = size.columns, size.lines
    except (OSError, ValueError):
        columns = rows = 0
    return (columns if columns > 0 else 80), (rows if rows > 0 else 24)


def _error(message: str) -> None:
    print(f"sottovoce: error: {one_line(message)}", file=sys.stderr)


def _warn(message: str) -> None:
    print(f"sottovoce: warning: {one_line(message)}", file=sys.stderr)


def _usage_error(message: str) -> int:
    print("usage: sottovoce transcribe [options] FILE...", file=sys.stderr)
    _error(message)
    return 2
