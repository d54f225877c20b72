"""`sottovoce toggle`, `sottovoce ptt press|release`, `sottovoce paste-last`,
`sottovoce captions older|newer|live` (scroll the caption overlay) and `sottovoce edit
press|release` (a voice edit of the selection, app.voice_edit): drive the running app from a desktop
shortcut (Wayland has no global key grabs for apps; bind these in the desktop's settings)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(subparsers: Any) -> None:
    toggle = subparsers.add_parser(
        "toggle", help="start or stop dictation in the running app",
        description="Start or stop push-to-talk dictation in the running Sottovoce app.")
    toggle.set_defaults(handler=run, control_command="toggle")
    ptt = subparsers.add_parser(
        "ptt", help="push-to-talk: press (start talking) or release (finish)",
        description="Bind 'ptt press' to a key's press and 'ptt release' to its release.")
    ptt.add_argument("action", choices=("press", "release"))
    ptt.set_defaults(handler=run, control_command="ptt")
    paste_last = subparsers.add_parser(
        "paste-last", help="insert the last dictated text again",
        description="Insert the last dictated text into the focused app again.")
    paste_last.set_defaults(handler=run, control_command="paste-last")
    captions = subparsers.add_parser(
        "captions", help="scroll the caption window back (older), forward (newer) or to live",
        description="Scroll the caption overlay without giving it the keyboard focus: bind "
                    "'captions older' and 'captions newer' to keys in the desktop's settings.")
    captions.add_argument("direction", choices=("older", "newer", "live"))
    captions.set_defaults(handler=run, control_command="captions")
    edit = subparsers.add_parser(
        "edit", help="voice edit of the selected text: press, say what to do, release",
        description="Bind 'edit press' to a key's press and 'edit release' to its release: "
                    "the spoken instruction is applied to the selected text by the AI polish "
                    "server (Settings > AI polish).")
    edit.add_argument("action", choices=("press", "release"))
    edit.set_defaults(handler=run, control_command="edit")


def run(args: argparse.Namespace) -> int:
    from app.control_client import ControlError, send_command

    command = args.control_command
    if command in ("ptt", "edit"):
        command = f"{command} {args.action}"
    elif command == "captions":
        command = f"captions {args.direction}"
    try:
        reply = send_command(command)
    except ControlError as exc:
        print(f"sottovoce: {exc}", file=sys.stderr)
        return 1
    if args.verbose:
        print(reply)
    return 0
