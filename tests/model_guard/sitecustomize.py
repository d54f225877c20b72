"""Start-up hook for Python processes that a fast-lane test starts (tests/conftest.py puts this
folder first on their PYTHONPATH): with SOTTOVOCE_MODEL_GUARD set, loading a Whisper model
fails and is recorded in the file it names, so the test that started the process fails too.

Hooks the import of ``faster_whisper.transcribe`` (where WhisperModel lives) instead of importing
it here: processes that never touch faster-whisper start as fast as before."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

GUARD_ENV = "SOTTOVOCE_MODEL_GUARD"


def _refuse(*_args: Any, **_kwargs: Any) -> None:
    with open(os.environ[GUARD_ENV], "a", encoding="utf-8") as record:
        record.write(f"pid {os.getpid()}: {' '.join(sys.argv)[:200]}\n")
    raise RuntimeError("a Whisper model was loaded by a test without @pytest.mark.model")


class _GuardFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "faster_whisper.transcribe":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_and_guard(module: ModuleType) -> None:
            exec_module(module)
            module.WhisperModel.__init__ = _refuse

        loader.exec_module = exec_and_guard  # type: ignore[method-assign]
        return spec


if os.environ.get(GUARD_ENV):
    sys.meta_path.insert(0, _GuardFinder())
