#!/usr/bin/env bash
# CI step: build the PyInstaller bundle and smoke-test the frozen app like a user would run it.
#
# Needs: an activated venv with the dev extra (`pip install -e '.[dev]'`) and, ideally, DISPLAY
# set (scripts/test sources .ci/desktop.sh first); without DISPLAY it starts its own Xvfb.
# Checks, all on the frozen executable, from an empty working directory, with fresh user dirs
# and no Python environment variables, so nothing can leak in from the source tree or the venv:
#   1. `sottovoce --version`          prints the version
#   2. `sottovoce doctor`             exits 0 (nothing essential missing from the bundle)
#   3. `sottovoce transcribe --sample` the bundled model transcribes the bundled speech sample
#   4. `sottovoce --input WAV --exit-after-input`
#                                     the desktop app starts under X, loads the model, transcribes
#                                     the file, writes it to its journal, and exits 0
#                                     without creating a settings file (first run, no save)
#   5. `sottovoce serve`              the WebSocket server starts and answers /health
# Prints bundle size, build time and each check's time; writes dist/bundle-smoke.json.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python}
WAV=$ROOT/resources/samples/jfk-inaugural-1961-excerpt.flac
WAV=${SOTTOVOCE_SMOKE_WAV:-$WAV}
EXPECT=country   # "ask not what your country can do for you"
EXE=$ROOT/dist/sottovoce/sottovoce
step() { printf '\n== %s ==\n' "$*"; }
fail() { echo "bundle smoke test FAILED: $*" >&2; exit 1; }

[ -f "$WAV" ] || fail "speech sample not found: $WAV"

step "pyinstaller"
"$PYTHON" -m pip install -q 'pyinstaller>=6.22,<7'
"$PYTHON" -m PyInstaller --version

step "build bundle"
# The same files and the same packages make the same bundle: a repeated run on this machine (the
# same tree, committed or not, and the same venv) reuses the one it built last instead of
# spending minutes on it again. SOTTOVOCE_BUNDLE_CACHE=off always builds.
BUNDLE_CACHE=${SOTTOVOCE_BUNDLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sottovoce/bundles}
tree_digest() {
    { git ls-files -z -co --exclude-standard | xargs -0 sha256sum 2>&1 || true
      "$PYTHON" -m pip freeze --all; "$PYTHON" -VV; uname -m; } | sha256sum | cut -c1-16
}
KEPT=$BUNDLE_CACHE/$(tree_digest)
if [ "$BUNDLE_CACHE" != off ] && [ -f "$KEPT/bundle-stats.json" ] && [ -x "$KEPT/sottovoce/sottovoce" ]; then
    rm -rf "$ROOT/dist" && mkdir -p "$ROOT/dist" && cp -a "$KEPT/." "$ROOT/dist/"
    echo "bundle reused from $KEPT (built from the same files and packages)"
else
    DIST_DIR=$ROOT/dist BUILD_DIR=$ROOT/build/pyinstaller PYTHON=$PYTHON bash packaging/build_bundle.sh
    if [ "$BUNDLE_CACHE" != off ]; then  # only the newest is kept (a bundle is hundreds of MB)
        mkdir -p "$BUNDLE_CACHE" && rm -rf "$BUNDLE_CACHE"/[0-9a-f]*[0-9a-f] "$KEPT.tmp" \
            && cp -a "$ROOT/dist/." "$KEPT.tmp/" && mv "$KEPT.tmp" "$KEPT" \
            || echo "could not keep the bundle in $BUNDLE_CACHE"
    fi
fi

if [ -z "${DISPLAY:-}" ]; then
    export DISPLAY=:97
    Xvfb "$DISPLAY" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
    XVFB_PID=$!
    trap 'kill "$XVFB_PID" 2>/dev/null || true' EXIT
    for _ in $(seq 50); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done
fi

SMOKE=$(mktemp -d /tmp/sottovoce-smoke.XXXXXX)
mkdir -p "$SMOKE/cwd"
TIMINGS=()

# Run the frozen app in isolation; stdout+stderr go to $SMOKE/<name>.log and are echoed.
frozen() {
    local name=$1; shift
    local started rc
    started=$(date +%s%N)
    set +e
    (cd "$SMOKE/cwd" && env -u PYTHONPATH -u PYTHONHOME -u VIRTUAL_ENV \
        SOTTOVOCE_CONFIG_DIR="$SMOKE/config" SOTTOVOCE_DATA_DIR="$SMOKE/data" \
        SOTTOVOCE_CACHE_DIR="$SMOKE/cache" SOTTOVOCE_CONTROL_SOCKET="$SMOKE/control.sock" \
        HF_HUB_OFFLINE=1 \
        timeout 300 "$EXE" "$@") >"$SMOKE/$name.log" 2>&1
    rc=$?
    set -e
    cat "$SMOKE/$name.log"
    TIMINGS+=("$name $(( ($(date +%s%N) - started) / 1000000 )) $rc")
    return $rc
}

step "smoke 1: --version"
frozen version --version || fail "--version exited $?"
grep -q "^sottovoce [0-9]" "$SMOKE/version.log" || fail "--version printed no version"

step "smoke 2: doctor"
frozen doctor doctor || fail "doctor exited $? (an essential check failed)"
# Where the CI desktop provides them, the frozen app must find them too: this catches keyring
# backends, PortAudio or pynput's X11 backend missing from the bundle.
if dbus-send --session --dest=org.freedesktop.DBus --type=method_call --print-reply / \
        org.freedesktop.DBus.ListNames 2>/dev/null | grep -q org.freedesktop.secrets; then
    grep -q "^OK  *Keyring" "$SMOKE/doctor.log" || fail "the bundle sees no keyring backend"
fi
if pactl info >/dev/null 2>&1; then
    grep -q "^OK  *Audio devices" "$SMOKE/doctor.log" || fail "the bundle sees no microphone"
fi
if [ -z "${WAYLAND_DISPLAY:-}" ] && [ "${XDG_SESSION_TYPE:-x11}" != wayland ]; then
    grep -q "^OK  *Hotkeys" "$SMOKE/doctor.log" || fail "the bundle cannot use pynput on X11"
fi

step "smoke 3: transcribe the bundled sample with the bundled model"
frozen transcribe transcribe --no-progress --sample || fail "transcribe exited $?"
grep -qi "$EXPECT" "$SMOKE/transcribe.log" || fail "transcript lacks '$EXPECT'"

step "smoke 4: desktop app under X: --input WAV --exit-after-input"
frozen gui -v --input "$WAV" --exit-after-input || fail "the app exited $?"
grep -rqi "$EXPECT" "$SMOKE/data" 2>/dev/null \
    || fail "the app's journal lacks '$EXPECT' (nothing was transcribed)"
# First run with defaults must not write a settings file: it is created on the first save only.
[ ! -e "$SMOKE/config/settings.toml" ] || fail "a first run without saving wrote settings.toml"

step "smoke 5: sottovoce serve answers /health"
# The frozen server on a free loopback port; proves websockets (lazily imported submodules) and
# the server package made it into the bundle.
started_ms=$(date +%s%N)
(cd "$SMOKE/cwd" && env -u PYTHONPATH -u PYTHONHOME -u VIRTUAL_ENV HF_HUB_OFFLINE=1 \
    SOTTOVOCE_CACHE_DIR="$SMOKE/cache" "$EXE" serve --host 127.0.0.1 --port 0) \
    >"$SMOKE/serve.log" 2>&1 &
SERVER_PID=$!
url=""
for _ in $(seq 600); do   # up to 60 s: the model loads before the server listens
    url=$(grep -o "ws://127.0.0.1:[0-9]*" "$SMOKE/serve.log" || true)
    [ -n "$url" ] || ! kill -0 "$SERVER_PID" 2>/dev/null || { sleep 0.1; continue; }
    break
done
health_rc=0
[ -n "$url" ] && "$PYTHON" - "${url/ws:/http:}/health" <<'PY' || health_rc=$?
import json, sys, urllib.request

with urllib.request.urlopen(sys.argv[1], timeout=10) as reply:
    body = json.loads(reply.read())
print(body)
sys.exit(0 if reply.status == 200 and body.get("status") == "ok" else 1)
PY
kill "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || true
TIMINGS+=("serve $(( ($(date +%s%N) - started_ms) / 1000000 )) $health_rc")
[ -n "$url" ] || { cat "$SMOKE/serve.log"; fail "the server never said where it listens"; }
[ "$health_rc" = 0 ] || { cat "$SMOKE/serve.log"; fail "/health did not answer ok"; }

step "bundle summary"
"$PYTHON" - "$ROOT/dist/bundle-stats.json" "$ROOT/dist/bundle-smoke.json" "${TIMINGS[@]}" <<'PY'
import json, sys
from pathlib import Path

stats = json.loads(Path(sys.argv[1]).read_text())
checks = []
for row in sys.argv[3:]:
    name, millis, rc = row.split()
    checks.append({"check": name, "seconds": int(millis) / 1000, "exit": int(rc)})
Path(sys.argv[2]).write_text(json.dumps({"build": stats, "smoke": checks}, indent=2) + "\n")
print(f"bundle {stats['bundle_mb']} MB, tarball {stats['tarball_mb']} MB, "
      f"build {stats['pyinstaller_s']} s + tarball {stats['tarball_s']} s")
print(f"{'check':<12}{'seconds':>9}{'exit':>6}")
for c in checks:
    print(f"{c['check']:<12}{c['seconds']:>9.2f}{c['exit']:>6}")
PY
rm -rf "$SMOKE"
echo "bundle smoke test passed"
