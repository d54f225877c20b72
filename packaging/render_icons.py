"""Render the PNG icon sizes from the hand-drawn SVGs in resources/icons/.

Run after editing an SVG:  QT_QPA_PLATFORM=offscreen python packaging/render_icons.py
The PNGs are committed so neither the app nor the bundle build needs an SVG renderer. It also
writes the Windows .ico and macOS .icns that packaging/sottovoce.spec uses on those platforms
(with Pillow, which the dev extra brings in through matplotlib).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

PACKAGING_DIR = Path(__file__).resolve().parent
ICONS_DIR = PACKAGING_DIR.parent / "resources" / "icons"
WINDOWS_ICO = PACKAGING_DIR / "windows" / "sottovoce.ico"
MACOS_ICNS = PACKAGING_DIR / "macos" / "sottovoce.icns"
APP_SIZES = (16, 24, 32, 48, 64, 128, 256)
TRAY_SIZES = (16, 22, 24, 32, 48, 64)
# (svg stem, sizes): app icon and both tray states.
SOURCES = (
    ("sottovoce", APP_SIZES),
    ("sottovoce-tray", TRAY_SIZES),
    ("sottovoce-tray-recording", TRAY_SIZES),
)


def render(svg: Path, size: int, out: Path) -> None:
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"{svg}: not a valid SVG")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    if not image.save(str(out), "PNG"):
        raise SystemExit(f"could not write {out}")


def render_all(out_dir: Path) -> list[Path]:
    """Render every size of every icon into ``out_dir``; returns the files written."""
    # QPainter on a QImage needs a GUI application object; reuse one if the caller has it (tests).
    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # noqa: F841 - keep alive
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, sizes in SOURCES:
        for size in sizes:
            out = out_dir / f"{stem}-{size}.png"
            render(ICONS_DIR / f"{stem}.svg", size, out)
            written.append(out)
    return written


def write_platform_icons(png_256: Path) -> list[Path]:
    """The Windows .ico (16-256 px inside) and macOS .icns from the 256 px PNG."""
    from PIL import Image

    image = Image.open(png_256)
    WINDOWS_ICO.parent.mkdir(parents=True, exist_ok=True)
    MACOS_ICNS.parent.mkdir(parents=True, exist_ok=True)
    image.save(WINDOWS_ICO, sizes=[(s, s) for s in (16, 24, 32, 48, 64, 128, 256)])
    image.save(MACOS_ICNS)
    return [WINDOWS_ICO, MACOS_ICNS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ICONS_DIR, help="output folder")
    args = parser.parse_args(argv)
    for path in render_all(args.out):
        print(path)
    if args.out == ICONS_DIR:
        for path in write_platform_icons(ICONS_DIR / "sottovoce-256.png"):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
