"""Standard output for a command line tool: a reader that goes away (``| head -c1``) ends the
command quietly, and a failing write (``> /dev/full``) is one line on stderr, not a traceback.

`guarded_stdout()` wraps ``sys.stdout`` for the length of a command: a write or flush that fails
raises `StdoutError`, which is no OSError, so no handler meant for input files catches it by
mistake. `run_guarded()` turns it into the exit status: 141 (128 + SIGPIPE, what a shell reports
for a C tool killed by the closed pipe) for a closed pipe, 1 for any other write error. SIGPIPE
itself stays ignored (Python's default): restoring it would let a closed socket kill `serve`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

EXIT_CLOSED_PIPE = 128 + 13


class StdoutError(Exception):
    """Writing standard output failed; ``closed_pipe`` when the reader went away."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(cause.strerror or str(cause))
        self.closed_pipe = isinstance(cause, BrokenPipeError) or cause.errno == errno.EPIPE


class _Guarded:
    """Delegates to the real stream; turns OSError from write/flush into StdoutError."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream  # None: started with stdout closed (`>&-`)

    def write(self, text: str) -> int:
        try:
            return self._real().write(text)
        except OSError as exc:
            raise StdoutError(exc) from exc

    def flush(self) -> None:
        try:
            self._real().flush()
        except OSError as exc:
            raise StdoutError(exc) from exc

    def _real(self) -> TextIO:
        if self._stream is None:
            raise OSError(errno.EBADF, "standard output is closed")
        return self._stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    real = sys.stdout
    sys.stdout = _Guarded(real)
    try:
        yield
    finally:
        sys.stdout = real


def run_guarded(command: Callable[[], int]) -> int:
    """Run ``command`` with a guarded stdout and flush it; map a stdout failure to a status."""
    try:
        with guarded_stdout():
            code = command()
            sys.stdout.flush()
        return code
    except StdoutError as exc:
        _silence_stdout()
        if exc.closed_pipe:
            return EXIT_CLOSED_PIPE
        with contextlib.suppress(OSError):
            print(f"sottovoce: cannot write to standard output: {exc}", file=sys.stderr)
        return 1


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null, so the interpreter's last flush at exit cannot fail again (and
    print "Exception ignored ... BrokenPipeError")."""
    if sys.stdout is None:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real fd (captured in a test)
        pass
