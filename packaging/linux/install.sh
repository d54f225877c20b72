#!/usr/bin/env bash
# Install (or with --uninstall, remove) the Sottovoce bundle for the current user.
#
#   ./install.sh              installs into ~/.local (no root needed)
#   PREFIX=/usr/local sudo -E ./install.sh   installs system-wide
#
# Copies the bundle to $PREFIX/lib/sottovoce, links $PREFIX/bin/sottovoce, and registers the
# menu entry, icons and AppStream metadata so desktops and software centres find the app.
set -euo pipefail

APP_ID=io.github.sottovoce.Sottovoce
PREFIX=${PREFIX:-$HOME/.local}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LIB_DIR=$PREFIX/lib/sottovoce
SHARE=$PREFIX/share

# Refresh the menu and icon caches where they exist. An icon cache is only updated, never
# created: a cache that we created in ~/.local would hide icons other apps add there later.
refresh_caches() {
    if command -v update-desktop-database >/dev/null; then
        update-desktop-database -q "$SHARE/applications" || true
    fi
    if [ -f "$SHARE/icons/hicolor/icon-theme.cache" ] && command -v gtk-update-icon-cache >/dev/null; then
        gtk-update-icon-cache -q -t -f "$SHARE/icons/hicolor" || true
    fi
}

uninstall() {
    rm -rf "$LIB_DIR"
    rm -f "$PREFIX/bin/sottovoce" "$SHARE/applications/$APP_ID.desktop" \
          "$SHARE/metainfo/$APP_ID.metainfo.xml"
    find "$SHARE/icons/hicolor" -name "$APP_ID.*" -delete 2>/dev/null || true
    refresh_caches
    echo "Sottovoce removed from $PREFIX (settings in ~/.config/sottovoce are kept)"
}

install_files() {
    [ -x "$HERE/sottovoce" ] || { echo "run this from the unpacked bundle folder" >&2; exit 1; }
    rm -rf "$LIB_DIR"
    mkdir -p "$LIB_DIR" "$PREFIX/bin" "$SHARE/applications" "$SHARE/metainfo"
    cp -a "$HERE/sottovoce" "$HERE/_internal" "$LIB_DIR/"
    ln -sfn "$LIB_DIR/sottovoce" "$PREFIX/bin/sottovoce"
    # Absolute Exec path: ~/.local/bin is often missing from the PATH the desktop launcher sees.
    sed "s|^Exec=sottovoce|Exec=$LIB_DIR/sottovoce|" "$HERE/share/applications/$APP_ID.desktop" \
        > "$SHARE/applications/$APP_ID.desktop"
    cp "$HERE/share/metainfo/$APP_ID.metainfo.xml" "$SHARE/metainfo/"
    cp -r "$HERE/share/icons" "$SHARE/"
    refresh_caches
    echo "Sottovoce installed in $LIB_DIR; start it from the menu or run: $PREFIX/bin/sottovoce"
    echo "Check your setup with: $PREFIX/bin/sottovoce doctor"
}

case "${1:-}" in
    --uninstall) uninstall ;;
    "") install_files ;;
    *) echo "usage: $0 [--uninstall]" >&2; exit 2 ;;
esac
