"""Per-user directories (platformdirs), each overridable by an environment variable for tests
and portable installs: SOTTOVOCE_CONFIG_DIR, SOTTOVOCE_DATA_DIR, SOTTOVOCE_CACHE_DIR."""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "sottovoce"


def _dir(env: str, kind: str) -> Path:
    override = os.environ.get(env)
    if override:
        return Path(override)
    import platformdirs

    return Path(getattr(platformdirs, f"user_{kind}_dir")(APP_NAME, appauthor=False))


def config_dir() -> Path:
    """Settings (settings.toml)."""
    return _dir("SOTTOVOCE_CONFIG_DIR", "config")


def data_dir() -> Path:
    """Journal of transcripts (journal/*.jsonl)."""
    return _dir("SOTTOVOCE_DATA_DIR", "data")


def cache_dir() -> Path:
    """Joined or downloaded models."""
    return _dir("SOTTOVOCE_CACHE_DIR", "cache")
