"""The input-method route: dictated text committed through IBus, as Ubuntu's own dictation does.

Where the session's input method is IBus (GTK_IM_MODULE / QT_IM_MODULE / XMODIFIERS say so, or
GNOME, which runs IBus itself) and ibus-daemon answers, this route goes first on X11 and on
Wayland: no virtual keyboard, no portal consent, no clipboard, and any character arrives
whatever the keyboard layout, with no key held by the user turning it into a shortcut.

The engine lives in its own process (resources/ibus/sottovoce_ibus_engine.py, run by the system python3: the
IBus typelib and PyGObject come from the distribution, not from the app's venv); this module
talks to it over its stdin/stdout, one JSON line each way. See that file for how the user's
own engine is kept. A route that fails (the daemon went away, no field took the engine) raises
RouteError, and the caller goes on with the next route.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import threading
from collections.abc import Mapping
from typing import IO, Any

from app.wayland_inject import RouteError
from resources import RESOURCES_DIR

log = logging.getLogger(__name__)

ENGINE_SCRIPT = RESOURCES_DIR / "ibus" / "sottovoce_ibus_engine.py"
SYSTEM_PYTHON = "/usr/bin/python3"  # where Debian/Ubuntu/Fedora put python3-gi's typelibs
START_TIMEOUT_S = 10.0
REPLY_TIMEOUT_S = 10.0  # the engine itself gives up after its 3 s focus wait
IM_VARIABLES = ("GTK_IM_MODULE", "QT_IM_MODULE", "XMODIFIERS", "SDL_IM_MODULE")
NAME = "ibus"
FAKE_CONTEXT_HINT = "/org/freedesktop/IBus/InputContext_1"  # for tests: see the engine script
NOT_IBUS = "the session's input method is not IBus"


class NotAnIBusField(RouteError):
    """The focused window does not use IBus (a terminal without it, nothing focused): this text
    goes the usual way, and the route stays for the next one."""

    transient = True


def session_uses_ibus(env: Mapping[str, str] | None = None) -> str | None:
    """Why this session's input method is IBus (None: it is not, or we cannot tell)."""
    env = os.environ if env is None else env
    if env.get("SOTTOVOCE_IBUS", "") == "0":
        return None
    for key in IM_VARIABLES:
        if "ibus" in env.get(key, "").lower():
            return f"{key}={env[key]}"
    if "GNOME" in env.get("XDG_CURRENT_DESKTOP", "").upper():
        return "GNOME runs IBus as its input method"
    return None


class IBusRoute:
    """One engine process; `insert` is synchronous (call it off the GUI thread)."""

    name = NAME
    commits_text = True  # takes text, not keys: paste mode commits too (no clipboard needed)

    def __init__(self, python: str | None = None) -> None:
        self.python = python or os.environ.get("SOTTOVOCE_IBUS_PYTHON", SYSTEM_PYTHON)
        self.proc: subprocess.Popen[str] | None = None
        self.user_engine = ""
        self.known_engine = ""
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()
        self._next_id = 0

    def prepare(self) -> None:
        """Start the engine process; RouteError with the reason when IBus is not usable."""
        if self.proc is not None:
            return
        try:
            self.proc = subprocess.Popen(
                [self.python, str(ENGINE_SCRIPT)], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, encoding="utf-8",
                start_new_session=True)
        except OSError as exc:
            raise RouteError(f"cannot run {self.python} for the IBus engine: {exc}") from exc
        assert self.proc.stdout is not None
        self._lines = queue.Queue()  # this process's lines only
        threading.Thread(target=self._read, args=(self.proc.stdout, self._lines), daemon=True,
                         name="sottovoce-ibus-reader").start()
        hello = self._answer(START_TIMEOUT_S)
        if hello is None or not hello.get("ready"):
            why = (hello or {}).get("error") or self._no_engine_reason()
            self.close()
            raise RouteError(f"IBus: {why}")
        self.user_engine = str(hello.get("engine") or "")
        # The user's engine as first seen: the one to restore if ours is left set.
        self.known_engine = self.known_engine or self.user_engine

    @staticmethod
    def _read(stream: IO[str], lines: queue.Queue[str | None]) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    def _answer(self, timeout: float) -> dict[str, Any] | None:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is None:
            self._lines.put(None)  # every later read sees the end too
            return None
        try:
            answer = json.loads(line)
        except ValueError:
            return None
        return answer if isinstance(answer, dict) else None

    def _no_engine_reason(self) -> str:
        try:  # its output ended: its exit status follows at once
            code = self.proc.wait(2) if self.proc is not None else None
        except subprocess.TimeoutExpired:
            code = None
        if code not in (None, 0):
            return (f"the engine process could not start ({self.python} needs python3-gi and "
                    "gir1.2-ibus-1.0)")
        return "the engine process did not answer"

    def insert(self, text: str, delete_chars: int = 0) -> None:
        """Backspace over ``delete_chars`` characters, then commit ``text`` into the focused
        field; RouteError when it did not go."""
        with self._lock:
            if self.proc is not None and self.proc.poll() is not None:
                # It ended (ibus-daemon restarted, a crash): a new one, once, for this text.
                log.info("IBus engine process ended (%s): starting it again", self.proc.poll())
                self.close()
            self.prepare()
            assert self.proc is not None and self.proc.stdin is not None
            self._next_id += 1
            request = {"id": self._next_id, "text": text, "delete": max(0, delete_chars),
                       "restore": self.known_engine}
            try:
                self.proc.stdin.write(json.dumps(request, ensure_ascii=False) + "\n")
                self.proc.stdin.flush()
            except (OSError, ValueError) as exc:
                self.close()
                raise RouteError(f"IBus engine process gone: {exc}") from exc
            answer = self._answer(REPLY_TIMEOUT_S)
            while answer is not None and answer.get("id") != self._next_id:
                answer = self._answer(REPLY_TIMEOUT_S)  # a late answer to a timed-out one
            if answer is None:
                self.close()
                raise RouteError("IBus engine did not answer")
            if not answer.get("ok") and answer.get("unfocused"):
                raise NotAnIBusField(f"IBus: {answer.get('error')}")
            if not answer.get("ok"):
                raise RouteError(f"IBus: {answer.get('error') or 'commit failed'}")

    # The Wayland inserter's KeyRoute interface (app.wayland_inject).
    def type_text(self, text: str) -> None:
        self.insert(text)

    def backspace(self, count: int) -> None:
        if count > 0:
            self.insert("", count)

    def paste(self, keys: str) -> None:
        raise RouteError("IBus commits text; it has no paste keys")

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # the engine ends at end of input
            proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait(5)


def probe(env: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """Whether the IBus route would be used now, and why, in words (doctor). The engine is
    asked to check only: registering it (and leaving) would make the daemon drop the user's."""
    why = session_uses_ibus(env)
    if why is None:
        return False, NOT_IBUS
    python = os.environ.get("SOTTOVOCE_IBUS_PYTHON", SYSTEM_PYTHON)
    try:
        done = subprocess.run([python, str(ENGINE_SCRIPT), "--check"], capture_output=True,
                              text=True, encoding="utf-8", timeout=START_TIMEOUT_S, check=False)
        hello = json.loads(done.stdout.splitlines()[0]) if done.stdout.strip() else {}
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        return False, f"{why}, but IBus: cannot run {python} for the IBus engine: {exc}"
    if not hello.get("ready"):
        reason = hello.get("error") or (f"the engine process could not start ({python} needs "
                                         "python3-gi and gir1.2-ibus-1.0)")
        return False, f"{why}, but IBus: {reason}"
    engine = hello.get("engine")
    kept = f"; your engine {engine} is switched back after each text" if engine else ""
    return True, f"commits text through IBus ({why}){kept}"


def start_route(env: Mapping[str, str] | None = None) -> tuple[IBusRoute | None, str]:
    """The started route when the session uses IBus and it works, and why (or why not)."""
    why = session_uses_ibus(env)
    if why is None:
        return None, NOT_IBUS
    route = IBusRoute()
    try:
        route.prepare()
    except RouteError as exc:
        log.info("IBus route unavailable: %s", exc)
        return None, f"{why}, but {exc}"
    return route, f"commits text through IBus ({why})"


def route_line(insert_line: str, used: bool, why: str) -> str:
    """The insertion route's line (doctor, Settings) with whether IBus goes first, and why."""
    if used:
        return f"input method (IBus) first: {why}; then {insert_line}"
    if why != NOT_IBUS:
        return f"{insert_line}; IBus not used: {why}"
    return insert_line
