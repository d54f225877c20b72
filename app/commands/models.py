"""`sottovoce models list | download NAME | remove NAME`: the model manager in a terminal.

``list`` shows the catalogue (size on disk, languages, where each one is: bundled, downloaded,
or not here) and the model recommended for this machine. ``download`` shows progress on one
line (bytes, rate, time left); Ctrl+C stops it and keeps what arrived (the next ``download``
resumes it). ``remove`` deletes a download in the cache (a name from ``list``, never a path)
and says how much space was freed.
Exit status: 0 done, 1 the download or removal failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from engine.model_catalog import CATALOGUE, installed, recommend, this_machine
from engine.model_download import ModelDownloadError, Progress, download, format_bytes, remove


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "models", help="list, download and remove Whisper models",
        description="The faster-whisper models: what is here, what suits this machine, "
                    "downloads from the Hugging Face hub (HF_ENDPOINT, HF_HUB_OFFLINE and proxy "
                    "variables are honoured).",
        epilog="Exit status: 0 done, 1 failure, 2 usage error.")
    sub = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    sub.add_parser("list", help="the catalogue, what is installed, and a recommendation")
    get = sub.add_parser("download", help="download a model (resumes an interrupted one)")
    get.add_argument("name", help="a catalogue name, e.g. small.en or large-v3-turbo")
    rm = sub.add_parser("remove", help="delete a downloaded model")
    rm.add_argument("name", help="a downloaded model's name, as `list` shows it (not a path)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.models_command == "list":
        print_list()
        return 0
    try:
        if args.models_command == "download":
            return _download(args.name)
        freed = remove(args.name)
    except ModelDownloadError as exc:
        print(f"sottovoce: {exc}", file=sys.stderr)
        return 1
    print(f"removed {args.name}: {format_bytes(freed)} freed")
    return 0


def print_list() -> None:
    here = {m.name: m for m in installed()}
    machine = this_machine()
    english = recommend(machine, english_only=True)
    multi = recommend(machine, english_only=False)
    print(f"{'model':<17} {'size':>9}  {'languages':<13} {'status':<11} note")
    for model in CATALOGUE:
        found = here.get(model.name)
        status = found.kind if found is not None else "-"
        mark = " *" if model.name in (english.model, multi.model) else ""
        print(f"{model.name:<17} {format_bytes(model.size_mb * 1_000_000):>9}  "
              f"{model.languages:<13} {status:<11} {model.note}{mark}")
    print(f"\nthis machine: {machine.describe()}")
    print(f"* recommended: {english.model} ({english.device} {english.compute_type}) for English; "
          f"{multi.model} for other languages ({english.reason})")


def _download(name: str) -> int:
    tty = sys.stdout.isatty()
    last = [""]

    def show(p: Progress) -> None:
        line = f"{name}: {p.describe()}"
        if tty:
            print("\r\033[K" + line, end="", flush=True)
        last[0] = line

    try:
        path = download(name, progress=show)
    except KeyboardInterrupt:
        print(f"\nstopped; what arrived is kept: `sottovoce models download {name}` resumes it",
              file=sys.stderr)
        return 1
    if tty:
        print()
    print(f"{name} downloaded and verified: {path}")
    return 0
