"""`sottovoce transcribe FILE...`: transcribe audio/video files to TXT, SRT, WebVTT or JSON.

Each file is decoded (any format PyAV reads, any rate and channel count), transcribed, and
written atomically to ``-o DIR`` as ``<name>.<format>``, or printed to stdout without ``-o``.
A file that cannot be read gets a one-line error naming it and the others are still done.
Exit status: 0 all done, 1 some file failed (or the model could not load), 2 usage error.

The decode step is one swappable call (`Decoder`): ``--engine batched`` uses the long-form
pipeline (`engine.longform.transcribe_long`) when that module is installed, ``sequential`` the
backend's own loop (`engine.offline`). ``auto`` (default) uses batched for recordings of at least
`AUTO_BATCHED_MIN_SECONDS` and sequential for shorter ones: a short clip is one 30 s window, so
batching has nothing to gain, and on the shared corpus the sequential decoder was more accurate
on short clips (bench/transcribe.py).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engine.atomic import atomic_write_text
from engine.audio.decode import load_audio
from engine.core.export import FORMATS, render
from engine.errors import AudioDecodeError, EngineError
from engine.models import DEFAULT_MODEL
from engine.offline import ProgressCallback, transcribe_audio
from engine.types import SAMPLE_RATE, Audio, DecodeOptions, Runner, Transcript

log = logging.getLogger(__name__)

ENGINES = ("auto", "batched", "sequential")
AUTO_BATCHED_MIN_SECONDS = 120.0
# audio, options, progress -> transcript: the one call `--engine` swaps.
Decoder = Callable[[Audio, DecodeOptions, "ProgressCallback | None"], Transcript]


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
    p.add_argument("--format", choices=FORMATS, default="txt", help="output format (txt)")
    p.add_argument("-o", "--output-dir", type=Path, metavar="DIR",
                   help="write <name>.<format> files here (default: print to stdout, each"
                        " file's text after a '==> FILE <==' line when there are several)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto: CUDA float16 if available, else CPU int8")
    p.add_argument("--compute-type", default="auto", help="CTranslate2 compute type (auto)")
    p.add_argument("--beam-size", type=int, default=5, help="1 = greedy (default 5)")
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="batched long-form pipeline or the sequential decoder (auto)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on a terminal")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "sample", False):  # a first try needs no file of one's own
        from resources import sample_path

        args.files = [*args.files, str(sample_path())]
    if not args.files:  # as argparse does for a missing positional: usage, exit 2
        raise SystemExit(_usage_error("the following arguments are required: FILE (or --sample)"))
    try:
        options = decode_options(args.language, args.beam_size, args.format)
    except ValueError as exc:
        return _usage_error(str(exc))
    if args.output_dir is not None and args.output_dir.exists() and not args.output_dir.is_dir():
        return _usage_error(f"-o {args.output_dir}: exists and is not a directory")
    model = getattr(args, "model", None) or DEFAULT_MODEL
    sequential, long_form = make_backends(model, args.device, args.compute_type, args.engine)
    try:
        decoder = make_decoder(args.engine, sequential, long_form)
    except ValueError as exc:
        return _usage_error(str(exc))
    show_progress = not args.no_progress and sys.stderr.isatty()
    try:
        failed = _transcribe_all(args, decoder, options, show_progress)
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except _FatalError as exc:
        _error(str(exc))
        return 1
    return 1 if failed else 0


def decode_options(language: str | None, beam_size: int, fmt: str) -> DecodeOptions:
    """The CLI's decode settings. Word timings are only computed where the output uses them
    (subtitle cue borders, JSON words): they cost an extra alignment pass."""
    return DecodeOptions(language=(language or "").strip().lower() or None, beam_size=beam_size,
                         word_timestamps=fmt != "txt")


def make_backends(model: str, device: str, compute_type: str, engine: str) -> tuple[Any, Any]:
    """The backends (neither loaded: each loads when a file first needs it) for faster-whisper's
    own loop and for the long-form pipeline, which want the cores laid out differently.

    faster-whisper decodes one window at a time: one replica on all cores (on the 2-core test
    machine, two one-thread replicas took 1.2x as long over the 26 short clips). The long-form
    pipeline keeps two replicas busy (`engine.longform.long_form_backend`: 7 % less wall time
    than two two-thread replicas, which would serve both). A run with short and long files on
    the CPU loads the model twice; where the layouts are the same (CUDA, one core), one backend
    serves both.
    """
    from engine.asr.sequential import SequentialRunner

    sequential = SequentialRunner(model, device=device, compute_type=compute_type)
    if engine == "sequential" or long_form_entry() is None:
        return sequential, sequential
    from engine.longform import long_form_backend

    long_form = long_form_backend(model, device=device, compute_type=compute_type)
    if long_form.streams == 1 or not _on_cpu(device, compute_type):
        return SequentialRunner(long_form.model), long_form  # one model serves both
    return sequential, long_form


def _on_cpu(device: str, compute_type: str) -> bool:
    if device != "auto":
        return device == "cpu"
    from engine.models import choose_device

    try:
        return choose_device(device, compute_type).device == "cpu"
    except EngineError:
        return False  # the error comes back, with its message, when the model loads


def make_decoder(engine: str, transcriber: Runner,
                 long_form_backend: Runner | None = None) -> Decoder:
    """The decode call for ``--engine``; ValueError when batched is asked for but absent.

    ``transcriber`` runs faster-whisper's own loop, ``long_form_backend`` (default: the same)
    the long-form pipeline; each is loaded by the first decode that needs it (`_FatalError`
    when it cannot be)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}")
    long_form = long_form_entry() if engine != "sequential" else None
    if engine == "batched" and long_form is None:
        raise ValueError("--engine batched needs engine.longform.transcribe_long, which is not "
                         "available in this install; use --engine sequential")
    batched_backend = long_form_backend or transcriber

    def sequential(audio: Audio, options: DecodeOptions,
                   progress: ProgressCallback | None) -> Transcript:
        _load_model(transcriber, options.language)
        return transcribe_audio(audio, transcriber, options, progress)

    if long_form is None:
        return sequential
    min_batched = 0 if engine == "batched" else int(AUTO_BATCHED_MIN_SECONDS * SAMPLE_RATE)

    def batched(audio: Audio, options: DecodeOptions,
                progress: ProgressCallback | None) -> Transcript:
        if len(audio) < min_batched:
            return sequential(audio, options, progress)
        _load_model(batched_backend, options.language)
        log.info("decoding with the batched long-form pipeline")
        result: Transcript = long_form(batched_backend, audio, options, progress=progress)
        return result

    return batched


def long_form_entry() -> Callable[..., Transcript] | None:
    """``engine.longform.transcribe_long(transcriber, audio, options, *, progress)``, if present."""
    try:
        module = importlib.import_module("engine.longform")
    except ModuleNotFoundError as exc:
        if exc.name in ("engine.longform", "engine"):
            return None
        raise
    entry = getattr(module, "transcribe_long", None)
    return entry if callable(entry) else None


class _FatalError(Exception):
    """Stops the whole run (the model cannot load, so no file can be transcribed)."""


def _transcribe_all(args: argparse.Namespace, decoder: Decoder, options: DecodeOptions,
                    show_progress: bool) -> int:
    """Transcribe every file in turn; returns how many failed."""
    failed = printed = 0
    used_names: set[str] = set()
    for name in args.files:
        try:
            audio = load_audio(name)
        except AudioDecodeError as exc:
            _error(str(exc))
            failed += 1
            continue
        try:  # the decoder loads its model once a file is worth decoding
            with _progress_bar(Path(name).name, len(audio), show_progress) as progress:
                transcript = decoder(audio, options, progress)
            text = render(transcript, args.format)
            if args.output_dir is None:
                _print_result(name, text, len(args.files) > 1, printed)
                printed += 1
            else:
                target = _output_path(args.output_dir, Path(name), args.format, used_names)
                atomic_write_text(target, text)
                log.info("wrote %s", target)
        except EngineError as exc:
            _error(f"{name}: {exc}")
            failed += 1
    return failed


def _load_model(transcriber: Runner, language: str | None) -> None:
    try:
        transcriber.load()
    except EngineError as exc:
        raise _FatalError(str(exc)) from exc
    info = transcriber.info
    if language and language != "en" and not info.multilingual:
        log.warning("model %s is English-only: --language %s is ignored (try --model base)",
                    info.name, language)


def _print_result(name: str, text: str, with_header: bool, printed_before: int) -> None:
    if with_header:
        # Like head(1) with several files: a header names each file's text.
        sys.stdout.write(("\n" if printed_before else "") + f"==> {name} <==\n")
    sys.stdout.write(text)
    sys.stdout.flush()


def _output_path(folder: Path, source: Path, fmt: str, used: set[str]) -> Path:
    """``folder/<stem>.<fmt>``; a second input with the same stem gets ``<stem>-2`` and so on."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EngineError(f"cannot create output folder {folder}: {exc.strerror}") from exc
    stem, n = source.stem, 1
    while f"{stem}.{fmt}" in used:
        n += 1
        stem = f"{source.stem}-{n}"
    used.add(f"{stem}.{fmt}")
    return folder / f"{stem}.{fmt}"


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
    print(f"sottovoce: error: {' '.join(message.split())}", file=sys.stderr)


def _usage_error(message: str) -> int:
    print("usage: sottovoce transcribe [options] FILE...", file=sys.stderr)
    _error(message)
    return 2
