"""`sottovoce export SESSION`: a saved caption (or dictation) session as TXT, SRT, VTT or JSON,
with or without source labels and timestamps, whole or a time range of it.

SESSION is a journal file, a session id, or "last" (the newest caption session). Times
(``--from``/``--to``) are seconds from the session's start. Writes to ``-o FILE`` (atomically)
or prints. Exit status: 0 done, 1 the session can't be read or the file written, 2 usage.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from engine.wire.export import FORMATS as EXPORT_FORMATS


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "export", help="export a saved caption session (TXT, SRT, VTT, JSON)",
        description="Export a saved session: labels and timestamps optional, or a time range.")
    p.add_argument("session", help="journal file, session id, or 'last' (newest captions)")
    p.add_argument("--format", choices=EXPORT_FORMATS, default="txt")
    p.add_argument("--no-labels", action="store_true", help="leave out 'You:' / 'Them:'")
    p.add_argument("--no-timestamps", action="store_true",
                   help="leave out times (TXT, JSON; subtitles always have them)")
    p.add_argument("--no-translations", action="store_true", help="leave out translations")
    p.add_argument("--from", dest="start", metavar="S", help="from S seconds")
    p.add_argument("--to", dest="end", metavar="S", help="to S seconds")
    p.add_argument("-o", "--output", metavar="FILE", help="write here (default: print)")
    p.set_defaults(handler=run)


class NothingToExport(ValueError):
    """The session, or the range asked for, holds no text."""


def export_session(path: Path, fmt: str, *, labels: bool = True, timestamps: bool = True,
                   translations: bool = True, start: float | None = None,
                   end: float | None = None, name: str = "") -> str:
    """The session at ``path`` rendered (OSError when it can't be read; NothingToExport when
    it, or the range, holds no text: an empty file would look like a success)."""
    from engine.core.captions import in_range
    from engine.journal import caption_lines, read_journal
    from engine.wire.export import export_captions

    every = [line for line in caption_lines(read_journal(path)) if line.text.strip()]
    if not every:
        raise NothingToExport("the last session holds no text" if name == "last" else
                              f"the session {path.stem!r} holds no text")
    lines = in_range(every, start, end)
    if not lines:
        raise NothingToExport(
            f"nothing was said {_range(start, end)} (the session runs from "
            f"{every[0].start_s:.1f} to {every[-1].end_s:.1f} s)")
    return export_captions(lines, fmt, labels=labels, timestamps=timestamps,
                           translations=translations)


def _range(start: float | None, end: float | None) -> str:
    if start is None:
        return f"before {end:g} s"
    if end is None:
        return f"after {start:g} s"
    return f"between {start:g} and {end:g} s"


def _seconds(text: str | None, option: str) -> float | None:
    """A time option's value: seconds from the session's start (ValueError naming it)."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{option} must be a number of seconds (from the session's start), "
                         f"not {text[:40]!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from engine.atomic import atomic_write_text
    from engine.errors import EngineError
    from engine.journal import find_session

    try:
        start, end = _seconds(args.start, "--from"), _seconds(args.end, "--to")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if start is not None and end is not None and end < start:
        print("error: --to must not be before --from", file=sys.stderr)
        return 2
    try:
        path = find_session(args.session)
        text = export_session(path, args.format, labels=not args.no_labels,
                              timestamps=not args.no_timestamps,
                              translations=not args.no_translations,
                              start=start, end=end, name=args.session)
        if args.output:
            atomic_write_text(args.output, text)
            print(f"saved to {args.output}", file=sys.stderr)
        else:
            sys.stdout.write(text)
    except (OSError, EngineError, NothingToExport) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
