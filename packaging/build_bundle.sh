#!/usr/bin/env bash
# Build the one-folder Sottovoce bundle with PyInstaller, add the Linux desktop files, pack a
# tarball, and print the bundle size and build time (also written as JSON for CI and bench/).
#
# Usage (repository root, venv with `pip install -e '.[dev]'` active):
#     packaging/build_bundle.sh
# Environment: PYTHON (default: python), DIST_DIR (default: dist), BUILD_DIR (default:
# build/pyinstaller). Output: $DIST_DIR/sottovoce/ (the bundle), $DIST_DIR/sottovoce-<version>-
# <os>-<arch>.tar.gz, $DIST_DIR/bundle-stats.json.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PYTHON=${PYTHON:-python}
DIST_DIR=${DIST_DIR:-$ROOT/dist}
BUILD_DIR=${BUILD_DIR:-$ROOT/build/pyinstaller}
APP_ID=io.github.sottovoce.Sottovoce
BUNDLE=$DIST_DIR/sottovoce

VERSION=$("$PYTHON" -c 'import engine; print(engine.__version__)')
OS=$(uname -s | tr '[:upper:]' '[:lower:]')
ARCH=$(uname -m)
TARBALL=$DIST_DIR/sottovoce-$VERSION-$OS-$ARCH.tar.gz

t0=$(date +%s.%N)
"$PYTHON" -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath "$DIST_DIR" --workpath "$BUILD_DIR" packaging/sottovoce.spec
t1=$(date +%s.%N)

if [ "$OS" = linux ]; then
    # Desktop integration files travel inside the bundle; install.sh puts them in place.
    mkdir -p "$BUNDLE/share/applications" "$BUNDLE/share/metainfo"
    cp packaging/linux/$APP_ID.desktop "$BUNDLE/share/applications/"
    cp packaging/linux/$APP_ID.metainfo.xml "$BUNDLE/share/metainfo/"
    for png in resources/icons/sottovoce-[0-9]*.png; do
        size=${png##*-}; size=${size%.png}
        mkdir -p "$BUNDLE/share/icons/hicolor/${size}x${size}/apps"
        cp "$png" "$BUNDLE/share/icons/hicolor/${size}x${size}/apps/$APP_ID.png"
    done
    mkdir -p "$BUNDLE/share/icons/hicolor/scalable/apps"
    cp resources/icons/sottovoce.svg "$BUNDLE/share/icons/hicolor/scalable/apps/$APP_ID.svg"
    cp packaging/linux/install.sh "$BUNDLE/install.sh"
fi

# gzip -1: the model and shared libraries barely compress, so higher levels cost minutes for ~2 %.
rm -f "$TARBALL"
tar -C "$DIST_DIR" -cf - sottovoce | gzip -1 > "$TARBALL"
t2=$(date +%s.%N)

"$PYTHON" - "$BUNDLE" "$TARBALL" "$t0" "$t1" "$t2" "$DIST_DIR/bundle-stats.json" <<'PY'
import json, os, sys
from pathlib import Path

bundle, tarball, t0, t1, t2, out = sys.argv[1:]
size = sum(p.stat().st_size for p in Path(bundle).rglob("*") if p.is_file() and not p.is_symlink())
stats = {
    "bundle_dir": bundle,
    "bundle_mb": round(size / 1e6, 1),
    "tarball": tarball,
    "tarball_mb": round(os.path.getsize(tarball) / 1e6, 1),
    "pyinstaller_s": round(float(t1) - float(t0), 1),
    "tarball_s": round(float(t2) - float(t1), 1),
    "total_s": round(float(t2) - float(t0), 1),
}
Path(out).write_text(json.dumps(stats, indent=2) + "\n")
print(f"bundle   {stats['bundle_mb']:8.1f} MB  {bundle}")
print(f"tarball  {stats['tarball_mb']:8.1f} MB  {tarball}")
print(f"build    {stats['pyinstaller_s']:8.1f} s   pyinstaller")
print(f"         {stats['tarball_s']:8.1f} s   tarball")
print(f"total    {stats['total_s']:8.1f} s")
PY
