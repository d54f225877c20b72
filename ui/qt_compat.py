"""Work-arounds for bugs in the Qt bindings, in one place.

PySide6 6.12.0 (with CPython 3.11) returns the bool from `SignalInstance.emit()` without taking
a reference to it, so every emit made from Python drops one reference to `True`. After a few
hundred emits CPython frees `True` and aborts ("bool_dealloc: deallocating True or False"),
mid-session or at exit. `emit()` below gives the reference back when, and only when, a probe
shows the running PySide6 has the bug; use it (and `forwarder()` for signal-to-signal chains)
instead of calling `.emit` directly. Harmless on fixed versions: the probe finds nothing to fix.

The same bindings return `None` from every C++ method returning void (`setText`, `setPen`,
`drawText`, ...) without taking a reference to it: each such call made from Python drops one
reference to `None`, which a Qt process holds only ~5000 of, and CPython aborts
("none_dealloc: deallocating None") once they are gone; a caption overlay painting a few lines
makes that many calls in minutes. `keep_none_alive()` gives `None` a reserve of references
that outlasts any session (as CPython 3.12 does by making it immortal), when, and only when, a
probe shows the bug.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

_lock = threading.Lock()
_emit_drops_ref: bool | None = None


class _Probe(QObject):
    fired = Signal()


def _emit_result(signal: Any, *args: Any) -> object:
    # The stubs say emit() returns None; the bindings return a bool (the object at issue here).
    result: object = signal.emit(*args)
    return result


def _detect() -> bool:
    probe = _Probe()
    before = sys.getrefcount(True) + sys.getrefcount(False)
    for _ in range(8):
        result = _emit_result(probe.fired)
        _incref(result)  # keep the probe itself from draining the count
        del result
    after = sys.getrefcount(True) + sys.getrefcount(False)
    probe.deleteLater()
    # Fixed bindings: after == before + 8 (our increfs). Buggy: after == before.
    return after < before + 8


def _incref(obj: object) -> None:
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


def emit_drops_reference() -> bool:
    global _emit_drops_ref
    if _emit_drops_ref is None:
        with _lock:
            if _emit_drops_ref is None:
                _emit_drops_ref = _detect()
    return _emit_drops_ref


_NONE_RESERVE = 1 << 40  # references: more void calls than a process makes in years
_none_kept = False


def void_call_drops_none() -> bool:
    """Does a void C++ method called from Python drop a reference to None?"""
    probe = QObject()
    before = sys.getrefcount(None)
    for _ in range(8):
        probe.setObjectName("probe")
    dropped = sys.getrefcount(None) < before - 4
    probe.deleteLater()
    return dropped


def keep_none_alive() -> None:
    """Give None its reserve where the bindings have the bug (idempotent; see the module
    docstring). CPython >= 3.12 makes None immortal: nothing to do there."""
    global _none_kept
    with _lock:
        if _none_kept or sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
            return
        _none_kept = True
        if void_call_drops_none():
            # ob_refcnt is the first field of every CPython object.
            ctypes.c_ssize_t.from_address(id(None)).value += _NONE_RESERVE


def emit(signal: Any, *args: Any) -> None:
    """`signal.emit(*args)`, safe on PySide6 versions whose emit leaks a reference to bool."""
    result = _emit_result(signal, *args)
    if isinstance(result, bool) and emit_drops_reference():
        _incref(result)


def forwarder(signal: Any, nargs: int) -> Callable[..., None]:
    """A slot that re-emits its first `nargs` arguments on `signal`; use it instead of connecting
    `signal.emit` (Qt's triggered(bool) would otherwise hand a no-argument signal its flag)."""
    return lambda *args: emit(signal, *args[:nargs])
