#!/usr/bin/env bash
# CI step: the repository stands alone. Clones this repository's committed HEAD, by itself, into
# an empty temporary folder (no sibling folders beside it), runs the README's main command
# there, `bash scripts/sottovoce transcribe --sample`, and checks the transcript against the
# sample's known words (resources.SAMPLE_TEXT). Then collects the tests in the clone and runs
# the corpus checks, so the tests find their speech in the clone too.
#
# The clone gets its own .venv. A full first-run install (faster-whisper, Qt, the models) takes
# minutes, so by default the new .venv reuses the packages of an existing one:
#   SOTTOVOCE_STANDALONE_VENV=/path/to/venv   reuse that venv's packages (default: this repo's
#                                              .venv); the clone itself is installed into its
#                                              own .venv (editable, --no-deps), so the code that
#                                              runs is the clone's
#   SOTTOVOCE_STANDALONE_VENV=                (empty) no reuse: scripts/sottovoce installs
#                                              everything as on a new user's first run
# Uncommitted changes are not in the clone: this checks what was committed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BASE_VENV=${SOTTOVOCE_STANDALONE_VENV-$ROOT/.venv}
fail() { echo "standalone check FAILED: $*" >&2; exit 1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

WORK=$(mktemp -d /tmp/sottovoce-standalone.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
CLONE=$WORK/sottovoce
git clone --quiet "$ROOT" "$CLONE"
echo "cloned $(git -C "$CLONE" rev-parse --short HEAD) into $CLONE; beside it: $(ls -A "$WORK")"
! git -C "$CLONE" grep -n '\.\./shared' || fail "the clone still reads a sibling folder"

if [ -n "$BASE_VENV" ]; then
  [ -x "$BASE_VENV/bin/python" ] || fail "SOTTOVOCE_STANDALONE_VENV=$BASE_VENV is not a venv"
  started=$(now_ms)
  "$BASE_VENV/bin/python" -m venv "$CLONE/.venv"
  site=$("$CLONE/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  base_site=$("$BASE_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # A plain path line: the base venv's packages become importable, but its own .pth files (its
  # editable install of another checkout) are not run, so `app` and `engine` come from the clone.
  echo "$base_site" > "$site/zz-reuse-base-venv.pth"
  (cd "$CLONE" && .venv/bin/python -m pip install -q --no-deps -e .)
  touch "$CLONE/.venv/.installed"   # scripts/sottovoce: setup done, do not reinstall
  echo "clone venv reusing $BASE_VENV: $(( $(now_ms) - started )) ms"
fi

started=$(now_ms)
out=$(cd "$WORK" && env -u PYTHONPATH -u VIRTUAL_ENV \
  SOTTOVOCE_CONFIG_DIR="$WORK/config" SOTTOVOCE_DATA_DIR="$WORK/data" \
  SOTTOVOCE_CACHE_DIR="$WORK/cache" HF_HUB_OFFLINE=1 \
  bash sottovoce/scripts/sottovoce transcribe --sample --no-progress) \
  || fail "bash scripts/sottovoce transcribe --sample exited $?"
echo "bash scripts/sottovoce transcribe --sample ($(( $(now_ms) - started )) ms):"
echo "$out"
[ -n "$BASE_VENV" ] || echo "first-run install: .venv is $(du -sh "$CLONE/.venv" | cut -f1)"
# From outside the clone, so the import shows what the clone's install resolves to.
(cd "$WORK" && env -u PYTHONPATH sottovoce/.venv/bin/python - "$out" "$CLONE" <<'PY') \
  || fail "the transcript is not the sample's text, or the code is not the clone's"
import sys
from pathlib import Path

import app
import resources
from app.selftest import MIN_AGREEMENT, agreement

clone = Path(sys.argv[2]).resolve()
for module in (app, resources):
    assert Path(module.__file__).resolve().is_relative_to(clone), module.__file__
score = agreement(sys.argv[1], resources.SAMPLE_TEXT)
print(f"agreement with the sample's text: {score:.0%} (need {MIN_AGREEMENT:.0%})")
sys.exit(0 if score >= MIN_AGREEMENT else 1)
PY
# The tests collect in the clone and read the clone's corpus (tests/audio).
if "$CLONE/.venv/bin/python" -c "import pytest, jiwer" 2>/dev/null; then
  (cd "$CLONE" && env -u SOTTOVOCE_TEST_AUDIO -u PYTHONPATH .venv/bin/python -m pytest -q \
    -p no:cacheprovider tests/test_corpus.py) || fail "the corpus tests fail in the clone"
else
  echo "no pytest in the clone's venv (the [all] extra has no test tools): corpus tests skipped"
fi
echo "standalone check passed"
