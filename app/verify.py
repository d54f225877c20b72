"""Did the dictated text arrive? Read the focused field before and after an insertion.

`Verifier.probe` (before) finds the focused object on the accessibility bus (app.atspi) and
keeps the text around its caret; `Verifier.check` (after) polls that same object until it holds
exactly what the insertion should have made of it, or until it has not changed for `wait_s`
(text still arriving is waited for: sending the rest then would put it in twice), and `judge` says
what the text shows: all of it arrived (VERIFIED), none or only the first part (MISSING, with
what is missing, so only that is sent again: nothing goes in twice), something else changed
(CHANGED: not retried), or the field can't be read (UNVERIFIABLE: a terminal, a game, an app
without accessibility: "sent, not verified"). A password field is PASSWORD: dictation never
types into it.

No Qt: the calls block, so app.checked_inject runs these on a worker thread.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.atspi import REGISTRY, ROOT, AccessibilityBus, AccessibilityError, Field
from app.focus import focused_window_pid

log = logging.getLogger(__name__)

CONTEXT = 200  # characters kept on each side of the caret: enough to place the insertion
WAIT_S = 2.0  # a paste lands when the target has fetched the clipboard; a busy one is slow
POLL_S = 0.015

VERIFIED, MISSING, CHANGED, UNVERIFIABLE, PASSWORD = (
    "verified", "missing", "changed", "unverifiable", "password")


@dataclass(frozen=True)
class Probe:
    """The focused field before an insertion (`field` None: nothing readable has focus)."""

    field: Field | None
    start: int = 0  # where `before` begins in the field's text
    before: str = ""
    caret: int = 0  # the caret's offset within `before`
    count: int = 0  # the field's length
    delete_chars: int = 0

    @property
    def verdict(self) -> str | None:
        """What is known before inserting: PASSWORD, UNVERIFIABLE, or None (check after)."""
        if self.field is not None and self.field.password:
            return PASSWORD
        if self.field is None or not self.field.readable:
            return UNVERIFIABLE
        return None


@dataclass(frozen=True)
class Check:
    verdict: str
    missing: str = ""  # MISSING: the end of the text that did not arrive
    delete_left: int = 0  # MISSING: characters still to be deleted before it


def judge(probe: Probe, text: str, after: str) -> Check:
    """What `after` (the field's text from probe.start on) says about inserting `text`."""
    cut = max(0, probe.caret - probe.delete_chars)
    head, tail = probe.before[:cut], probe.before[probe.caret:]
    if after == head + text + tail:
        return Check(VERIFIED)
    if after == probe.before:  # nothing happened, the deletion included
        return Check(MISSING, text, probe.delete_chars)
    fits = after.startswith(head) and after.endswith(tail) and len(after) >= len(head + tail)
    arrived = after[len(head):len(after) - len(tail)] if fits else None
    if arrived is not None and text.startswith(arrived):
        return Check(MISSING, text[len(arrived):], 0)
    return Check(CHANGED)


def availability() -> tuple[bool, str]:
    """(can check, a line for `sottovoce doctor`): is the accessibility bus there, and how
    many apps show their fields on it."""
    try:
        bus = AccessibilityBus()
    except AccessibilityError as exc:
        return False, f"texts are sent, not verified ({exc})"
    try:
        apps = len(bus.children(REGISTRY, ROOT))
    except AccessibilityError as exc:
        return False, f"texts are sent, not verified (the registry did not answer: {exc})"
    finally:
        bus.close()
    return True, ("inserted text is read back over the accessibility bus (apps showing their "
                  f"fields now: {apps}; one that does not gets \"sent, not verified\"); "
                  "password fields get nothing")


def focus_pid() -> int | None:
    """X11: the focused window's process; a Wayland session's windows can't be asked (the X
    focus of XWayland says nothing about native windows)."""
    return None if os.environ.get("WAYLAND_DISPLAY") else focused_window_pid()


class Verifier:
    """Probes and checks through one accessibility-bus connection, made on first use."""

    def __init__(self, connect: Callable[[], AccessibilityBus] = AccessibilityBus,
                 wait_s: float = WAIT_S, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._connect = connect
        self.wait_s = wait_s
        self._clock, self._sleep = clock, sleep  # (tests model time with these)
        self._bus: AccessibilityBus | None = None

    def _get_bus(self) -> AccessibilityBus | None:
        if self._bus is None:
            try:
                self._bus = self._connect()
            except AccessibilityError as exc:
                log.info("insertions can't be verified: %s", exc)
        return self._bus

    def probe(self, delete_chars: int = 0) -> Probe:
        """The focused field now; never raises (an unreadable field is a Probe without one)."""
        bus = self._get_bus()
        if bus is None:
            return Probe(None)
        try:
            field = bus.focused(focus_pid())
            if field is None or not field.readable:
                return Probe(field)
            caret, count = bus.caret(field), bus.count(field)
            start = max(0, caret - delete_chars - CONTEXT)
            before = bus.text(field, start, min(count, caret + CONTEXT))
            return Probe(field, start, before, caret - start, count, delete_chars)
        except AccessibilityError as exc:
            log.info("focused field not readable: %s", exc)
            self.close()  # a broken connection is made anew next time
            return Probe(None)

    def check(self, probe: Probe, text: str) -> Check:
        """Poll the probed field until it holds the insertion or stays the same for `wait_s`."""
        if probe.verdict is not None:
            return Check(probe.verdict)
        bus = self._get_bus()
        assert probe.field is not None
        deadline = self._clock() + self.wait_s
        result, seen = Check(UNVERIFIABLE), None
        while bus is not None:
            try:
                grown = bus.count(probe.field) - probe.count
                end = probe.start + len(probe.before) + grown
                after = bus.text(probe.field, probe.start, end)
            except AccessibilityError as exc:
                log.info("focused field no longer readable: %s", exc)
                return Check(UNVERIFIABLE)
            result = judge(probe, text, after)
            if after != seen:  # still arriving (slow typing): sending the rest now would double it
                seen, deadline = after, self._clock() + self.wait_s
            if result.verdict == VERIFIED or self._clock() >= deadline:
                break
            self._sleep(POLL_S)  # the next look; the outcome is what the field holds
        return result

    def close(self) -> None:
        if self._bus is not None:
            self._bus.close()
            self._bus = None
