"""`sottovoce` command line: dispatches to subcommands; no subcommand starts the desktop app."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from engine import __version__

# Each module registers its own subcommand(s) and sets ``handler`` with set_defaults.
# A module that is absent (thin install) is skipped.
SUBCOMMAND_MODULES = (
    "app.commands.transcribe",  # sottovoce transcribe FILE...
    "app.commands.listen",  # sottovoce listen
    "app.commands.serve",  # sottovoce serve
    "app.commands.control",  # sottovoce toggle | ptt press|release | paste-last | edit press|release
    "app.commands.doctor",  # sottovoce doctor
    "app.commands.models",  # sottovoce models list | download NAME | remove NAME
    "app.commands.export",  # sottovoce export SESSION (caption sessions as TXT/SRT/VTT/JSON)
)
# Run by compositor key bindings on every press and release: parse them without importing the
# other commands' modules (numpy, Qt), so the release reaches the app sooner.
CONTROL_COMMANDS = ("toggle", "ptt", "paste-last")


def build_parser(modules: Sequence[str] = SUBCOMMAND_MODULES) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sottovoce",
        description="Dictation and live captions on Whisper. With no command, starts the app.",
    )
    parser.add_argument("--version", action="version", version=f"sottovoce {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    parser.add_argument("--input", help="(app) play this audio file as the microphone")
    parser.add_argument("--model", help="(app) model name or directory (default tiny.en)")
    parser.add_argument("--exit-after-input", action="store_true",
                        help="(app) quit once --input is transcribed (smoke tests)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl+C before a command handles it (loading): no traceback
        print(file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    control = bool(argv) and argv[0] in CONTROL_COMMANDS
    parser = build_parser(("app.commands.control",) if control else SUBCOMMAND_MODULES)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(levelname)s %(name)s: %(message)s",
    )
    if args.command is None:
        from app.gui_main import run_gui

        return run_gui(args)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.error(f"unknown command {args.command}")
    from app.stdout_guard import run_guarded

    # `transcribe a.wav | head -c1` or `> /dev/full`: a quiet exit or one line, no traceback.
    return run_guarded(lambda: int(handler(args)))


if __name__ == "__main__":
    sys.exit(main())
