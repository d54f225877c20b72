"""What a `sottovoce doctor` check returns, and the deadline its blocking probes run under."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

OK, WARN, FAIL = "OK", "WARN", "FAIL"
PROBE_TIMEOUT_S = 5.0
T = TypeVar("T")


@dataclass(frozen=True)
class CheckResult:
    """One line of the report. ``essential`` failures make `sottovoce doctor` exit 1."""

    name: str
    status: str  # OK | WARN | FAIL
    detail: str
    hint: str = ""
    essential: bool = False

    def __post_init__(self) -> None:
        if self.status not in (OK, WARN, FAIL):
            raise ValueError(f"status must be OK, WARN or FAIL, not {self.status!r}")


class ProbeTimeout(Exception):
    """A probe did not answer within its deadline (hung D-Bus, sound server, driver)."""


def with_deadline(probe: Callable[[], T], seconds: float = PROBE_TIMEOUT_S) -> T:
    """Run ``probe`` in a daemon thread and give up after ``seconds``.

    The thread is abandoned, not killed (Python cannot kill threads); it is a daemon, so a hung
    probe cannot keep the process alive after the report is printed.
    """
    answers: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)

    def run() -> None:
        try:
            answers.put((True, probe()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, re-raised there
            answers.put((False, exc))

    threading.Thread(target=run, name="doctor-probe", daemon=True).start()
    try:
        ok, value = answers.get(timeout=seconds)
    except queue.Empty:
        raise ProbeTimeout(f"no answer within {seconds:g} s") from None
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]
