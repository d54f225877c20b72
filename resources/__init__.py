"""Data files shipped with Sottovoce (icons, stylesheet, Silero VAD model, a speech sample).

Located the same way from a source checkout, an installed wheel and a PyInstaller bundle: the
files sit next to this module in all three (the spec in packaging/ copies the folder verbatim),
so every lookup goes through ``RESOURCES_DIR`` and nothing depends on the working directory.
"""

from __future__ import annotations

from pathlib import Path

RESOURCES_DIR = Path(__file__).resolve().parent
ICONS_DIR = RESOURCES_DIR / "icons"
APP_ICON_NAME = "sottovoce"
# Rendered PNG sizes (packaging/render_icons.py); the SVG covers every other size.
APP_ICON_SIZES: tuple[int, ...] = (16, 24, 32, 48, 64, 128, 256)
TRAY_ICON_SIZES: tuple[int, ...] = (16, 22, 24, 32, 48, 64)
STYLESHEET_NAME = "style.qss"
# A public-domain speech sample (samples/README.md) and what it says, for `sottovoce transcribe
# --sample` and the doctor's end-to-end check: a first run needs no file of the user's own.
SAMPLE_NAME = "samples/jfk-inaugural-1961-excerpt.flac"
SAMPLE_TEXT = ("And so, my fellow Americans: ask not what your country can do for you, "
               "ask what you can do for your country.")


def resource_path(name: str) -> Path:
    """Absolute path of a bundled resource file; raises FileNotFoundError if it is missing."""
    path = RESOURCES_DIR / name
    if not path.exists():
        raise FileNotFoundError(f"bundled resource missing: {path}")
    return path


def icon_path(size: int | None = None, *, tray: bool = False, recording: bool = False) -> Path:
    """The app icon (or tray icon) as a file: the SVG when ``size`` is None, else that PNG size.

    ``recording`` selects the tray variant with a red dot; it needs ``tray=True``.
    Raises ValueError for a size that was not rendered and FileNotFoundError if a file is missing.
    """
    if recording and not tray:
        raise ValueError("recording=True only exists for the tray icon (pass tray=True)")
    stem = APP_ICON_NAME
    sizes: tuple[int, ...] = APP_ICON_SIZES
    if tray:
        stem += "-tray-recording" if recording else "-tray"
        sizes = TRAY_ICON_SIZES
    if size is None:
        return resource_path(f"icons/{stem}.svg")
    if size not in sizes:
        raise ValueError(f"no {size}px rendering of {stem}; sizes: {', '.join(map(str, sizes))}")
    return resource_path(f"icons/{stem}-{size}.png")


def icon_files(*, tray: bool = False, recording: bool = False) -> list[Path]:
    """Every PNG size of one icon, smallest first: feed them all to a QIcon so Qt picks the best
    size for a panel, title bar or task switcher instead of scaling one image."""
    sizes = TRAY_ICON_SIZES if tray else APP_ICON_SIZES
    return [icon_path(s, tray=tray, recording=recording) for s in sizes]


def stylesheet() -> str:
    """The application stylesheet (Qt style sheet syntax), to pass to ``QApplication.setStyleSheet``."""
    return resource_path(STYLESHEET_NAME).read_text(encoding="utf-8")


def sample_path() -> Path:
    """The bundled speech sample (11 s, 16 kHz mono FLAC); its words are ``SAMPLE_TEXT``."""
    return resource_path(SAMPLE_NAME)
