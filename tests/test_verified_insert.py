"""Checked insertion (app.checked_inject, app.verify, app.atspi) against real text fields of other
processes on the virtual X11 desktop, read back through the real accessibility bus (at-spi2-core):
a Qt field (QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1) and a GTK 3 field (system python3 + python3-gi),
a password field of each, a field that ignores paste (a route that "succeeds" and does nothing),
a read-only field (no route works) and a Qt field off the bus (can't be read back). The fields'
exact contents are asserted, as the target apps write them on every change.

Needs: an X display, xdotool, the accessibility bus (.ci/desktop.sh), /usr/bin/python3 with
gi + Gtk 3 (apt: at-spi2-core python3-gi gir1.2-gtk-3.0).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.a11y_targets import (
    GTK_APP,
    SYSTEM_PYTHON,
    TEXT,
    Target,
    missing_prerequisite,
    wait_on_the_bus,
)
from support.desktop_driver import TARGET_APP, LoggedProcess, focus, window_id

from app.verify import MISSING, UNVERIFIABLE, VERIFIED, WAIT_S, Probe, Verifier, judge

# Where nothing checks the field, X11 typing's borrowed keycodes for ü and × can race a target
# that has just started (it may miss the remapping): those tests are about the verdict.
ASCII = "Sent as is. "


# Unit level: what the field shows, judged (no bus needed).
def test_judge_reads_what_arrived() -> None:
    probe = Probe(None, 0, "ab cd", 3, 5, 0)
    assert judge(probe, "X ", "ab X cd").verdict == VERIFIED
    assert judge(probe, "X ", "ab cd") == judge(probe, "X ", "ab cd")
    missing = judge(probe, "Hello ", "ab Hecd")
    assert (missing.verdict, missing.missing, missing.delete_left) == (MISSING, "llo ", 0)
    nothing = judge(Probe(None, 0, "ab cd", 3, 5, 2), "Y", "ab cd")
    assert (nothing.verdict, nothing.missing, nothing.delete_left) == (MISSING, "Y", 2)
    deleted_only = judge(Probe(None, 0, "ab cd", 3, 5, 2), "Y", "acd")
    assert (deleted_only.verdict, deleted_only.missing, deleted_only.delete_left) == (
        MISSING, "Y", 0)
    assert judge(probe, "X ", "ab Z cd").verdict == "changed"  # never sent again


class ArrivingField:
    """A field read on a modelled clock: "ab " then the text one character per read, each read
    taking 1 s: far slower than the check's wait (0.5 s) between the first and the last."""

    def __init__(self, text: str) -> None:
        self.reads, self.text, self.now = 0, text, 0.0

    def count(self, _field: object) -> int:
        return len(self.current())

    def current(self) -> str:
        return "ab " + self.text[:self.reads]

    def text_of(self, _field: object, start: int, end: int) -> str:
        self.reads += 1
        self.now += 1.0
        return self.current()[start:end]


def test_the_check_waits_while_the_text_is_still_arriving() -> None:
    from app.atspi import Field

    field = ArrivingField("slow")
    bus = type("Bus", (), {"count": field.count, "text": field.text_of, "close": lambda: None})
    verifier = Verifier(lambda: bus, wait_s=0.5, clock=lambda: field.now,  # type: ignore[arg-type,return-value]
                        sleep=lambda _s: None)
    probe = Probe(Field(":1.1", "/f", 61, frozenset(), True), 0, "ab ", 3, 3, 0)
    assert verifier.check(probe, "slow").verdict == VERIFIED
    stalled = ArrivingField("sl")  # stops after two characters: the rest is missing
    bus = type("Bus", (), {"count": stalled.count, "text": stalled.text_of})
    verifier = Verifier(lambda: bus, wait_s=0.5, clock=lambda: stalled.now,  # type: ignore[arg-type,return-value]
                        sleep=lambda _s: None)
    missing = verifier.check(probe, "slow")
    assert (missing.verdict, missing.missing) == (MISSING, "ow")


def test_an_unreadable_field_is_not_checked() -> None:
    assert Verifier().check(Probe(None), "text").verdict == UNVERIFIABLE


def test_the_doctor_says_whether_insertions_can_be_checked(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from app.commands import doctor

    if missing_prerequisite() is None:
        found = doctor.check_verification()
        assert found.status == doctor.OK and "read back" in found.detail, found
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={tmp_path}/no-bus")
    found = doctor.check_verification()
    assert found.status == doctor.WARN and "sent, not verified" in found.detail, found
    assert "at-spi2-core" in found.hint


@pytest.fixture
def target(tmp_path: Path) -> Iterator[object]:
    """start(toolkit, *flags, a11y=True): a focused text field in another process."""
    if (why := missing_prerequisite()) is not None:
        pytest.skip(why)
    started: list[Target] = []

    def start(toolkit: str, *flags: str, a11y: bool = True) -> Target:
        title = f"verify-{toolkit}-{len(started)}-{os.getpid()}"
        out = tmp_path / f"{title}.txt"
        env = dict(os.environ)
        if toolkit == "qt":
            if a11y:
                env["QT_LINUX_ACCESSIBILITY_ALWAYS_ON"] = "1"
            args = [sys.executable, str(TARGET_APP), str(out), "--title", title, *flags]
        else:
            args = [SYSTEM_PYTHON, str(GTK_APP), str(out), "--title", title, *flags]
        process = LoggedProcess(args, env, read_stdout=True)
        started.append(Target(process, out, title))
        process.wait_for("ready", 60)
        focus(window_id(f"^{title}$"))
        if a11y:
            wait_on_the_bus(title)
        return started[-1]

    yield start
    for each in started:
        each.process.stop()


def insert(qtbot, mode: str, text: str = TEXT, delete_chars: int = 0,  # type: ignore[no-untyped-def]
           wait_s: float = WAIT_S):
    """`text` through a checked injector; `wait_s` (the product's by default) is how long the
    check waits on a field that does not change."""
    from app.checked_inject import CheckedInjector
    from app.inject import TextInjector

    injector = CheckedInjector(TextInjector(mode), Verifier(wait_s=wait_s))
    try:
        started = time.monotonic()
        with qtbot.waitSignal(injector.finished, timeout=30000) as done:
            injector.insert(text, delete_chars)
        print(f"X11 {mode}: {done.args[1]!r} after {(time.monotonic() - started) * 1000:.0f} ms")
        return tuple(done.args), injector.timings
    finally:
        injector.close()


@pytest.mark.parametrize("toolkit", ["qt", "gtk"])
@pytest.mark.parametrize("mode", ["paste", "type"])
def test_text_is_seen_in_the_field(qtbot, target, toolkit, mode) -> None:  # type: ignore[no-untyped-def]
    field = target(toolkit)
    (ok, message), timings = insert(qtbot, mode)
    assert ok and message.endswith(" · verified"), message
    assert field.text() == TEXT
    assert [step for step, _ in timings][-1] == "verified"
    # A second text after the first, with one character of it deleted first.
    (ok, message), _ = insert(qtbot, mode, "no", delete_chars=1)
    assert ok and message.endswith(" · verified"), message
    assert field.text() == TEXT[:-1] + "no"


@pytest.mark.parametrize("toolkit", ["qt", "gtk"])
def test_a_password_field_gets_nothing(qtbot, target, toolkit) -> None:  # type: ignore[no-untyped-def]
    field = target(toolkit, "--password")
    for mode in ("type", "paste"):
        (ok, message), _ = insert(qtbot, mode)
        assert not ok and "password" in message, message
    assert field.text() == ""
    assert "text" not in " ".join(field.process.log)  # no change at all, not even undone


def test_a_paste_that_never_arrives_is_typed_instead(qtbot, target) -> None:  # type: ignore[no-untyped-def]
    """The paste route "works" (keys sent, exit status fine) but the field ignores paste:
    the check sees nothing arrived and the text goes in by typing, once."""
    field = target("qt", "--no-paste")
    (ok, message), _ = insert(qtbot, "paste")
    assert ok and message.endswith(" · verified"), message
    assert "Pasted" in message and "Typed" in message
    assert field.text() == TEXT


def test_when_no_route_gets_through_the_text_waits_on_the_clipboard(qtbot, target) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtGui import QGuiApplication

    field = target("qt", "--read-only")
    # Nothing ever arrives, so any wait gives this outcome; a short one saves each route 2 s.
    (ok, message), timings = insert(qtbot, "type", wait_s=0.25)
    assert not ok and message.startswith("Not inserted: press Ctrl+V"), message
    assert [step for step, _ in timings][-1] == "not_inserted"
    assert field.text() == ""
    assert QGuiApplication.clipboard().text() == TEXT.strip()


def test_a_field_off_the_bus_is_sent_not_verified(qtbot, target) -> None:  # type: ignore[no-untyped-def]
    field = target("qt", a11y=False)
    (ok, message), timings = insert(qtbot, "type", ASCII)
    assert ok and message.endswith(" · sent, not verified"), message
    assert [step for step, _ in timings][-1] == "sent_not_verified"  # the latency meter's
    qtbot.waitUntil(lambda: field.text() == ASCII, timeout=20000)


def test_a_broken_check_never_holds_dictation_back(qtbot, target) -> None:  # type: ignore[no-untyped-def]
    """The checker failing in a way nobody planned for (here: connecting raises a TypeError)
    still lets the text in, said as sent, not verified; a text the cleaner empties (only a
    control character) is dropped without being waited for, and the next text goes in."""
    from app.checked_inject import CheckedInjector
    from app.inject import TextInjector

    def broken() -> Verifier:
        raise TypeError("a reply of a shape nobody expected")

    field = target("qt")
    injector = CheckedInjector(TextInjector("type"), Verifier(connect=broken))  # type: ignore[arg-type]
    try:
        with qtbot.waitSignal(injector.finished, timeout=30000) as done:
            injector.insert("\x1b", 0)
            injector.insert(ASCII, 0)
        assert done.args == [True, f"Typed {len(ASCII.strip())} characters · sent, not verified"]
    finally:
        injector.close()
    qtbot.waitUntil(lambda: field.text() == ASCII, timeout=20000)
