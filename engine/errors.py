"""One exception hierarchy for the engine; library errors are translated at the boundary."""

from __future__ import annotations


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class ModelNotFoundError(EngineError):
    """A model name or path could not be resolved (offline, unknown name, missing files)."""


class DependencyMissingError(EngineError):
    """An optional third-party library is not installed; the message says which extra to install."""


class AudioDecodeError(EngineError):
    """A file could not be read as audio (missing, empty, corrupt, not audio)."""


class AudioDeviceError(EngineError):
    """A microphone could not be opened or stopped delivering audio."""


class TranscriptionError(EngineError):
    """The ASR backend failed on a chunk."""


class ConnectionLostError(EngineError):
    """The remote server went away."""


def missing_dependency(package: str, extra: str) -> DependencyMissingError:
    """The standard error for an absent optional dependency."""
    return DependencyMissingError(
        f"{package} is not installed; install it with: pip install 'sottovoce[{extra}]'"
    )
