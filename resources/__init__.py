"""Data files shipped with Sottovoce (icons, stylesheet, the Silero VAD ONNX model).

Located the same way from a source checkout, an installed wheel and a PyInstaller bundle.
"""

from __future__ import annotations

from pathlib import Path

RESOURCES_DIR = Path(__file__).resolve().parent


def resource_path(name: str) -> Path:
    """Absolute path of a bundled resource file; raises FileNotFoundError if it is missing."""
    path = RESOURCES_DIR / name
    if not path.exists():
        raise FileNotFoundError(f"bundled resource missing: {path}")
    return path
