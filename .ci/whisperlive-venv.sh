#!/usr/bin/env bash
# Builds .venv-whisperlive: the real `whisper-live` server from PyPI, kept out of the app's venv.
#
# whisper-live declares heavy dependencies (CUDA torch, torchaudio, openvino, openai-whisper...)
# that its WebSocket server with the faster-whisper backend never imports. We install it with
# --no-deps plus exactly what `whisper_live.server` and its faster-whisper backend import:
# torch (the CPU wheel; the pip constraints on this machine serve torch==2.13.0+cpu from local
# disk — nothing here may pull a CUDA build), fastapi, uvicorn, faster-whisper (brings
# ctranslate2, tokenizers, huggingface_hub, onnxruntime, av, tqdm), websockets; and for its
# client, websocket-client and scipy.
#
# Usage: bash .ci/whisperlive-venv.sh [VENV_DIR]   (default: .venv-whisperlive in the repo root)
# Exit status 0 when `import whisper_live.server` works in the venv; the tests skip otherwise.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv-whisperlive}"
PY="${PYTHON:-python3}"

# A fresh clone reuses the venv that another clone on this machine built with the same script
# and Python: it is kept under the cache, keyed by both, and .venv-whisperlive becomes a link to it
# (SOTTOVOCE_VENV_CACHE=off builds it in place instead).
if [ "$VENV" = "$ROOT/.venv-whisperlive" ] && [ ! -e "$VENV" ] && [ "${SOTTOVOCE_VENV_CACHE:-}" != off ]; then
  CACHE="${SOTTOVOCE_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sottovoce/venvs}"
  KEY="$({ cat "${BASH_SOURCE[0]}"; "$PY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-16)"
  KEPT="$CACHE/whisperlive-$KEY"
  mkdir -p "$CACHE"
  exec 9>"$KEPT.lock" && flock 9  # one build at a time; the next run finds it ready
  bash "${BASH_SOURCE[0]}" "$KEPT" || { rm -rf "$KEPT"; exit 1; }
  ln -sfn "$KEPT" "$VENV"
  echo ".venv-whisperlive -> $KEPT"
  exit 0
fi

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import whisper_live.server, websocket, scipy" 2>/dev/null; then
  echo "whisperlive venv ready: $VENV"
  exit 0
fi

"$PY" -m venv "$VENV"
PIP=("$VENV/bin/pip" install --quiet --disable-pip-version-check)
# CPU-only torch first: on these machines pip's find-links serve torch==2.13.0+cpu from local
# disk, and the check below refuses a CUDA build rather than letting it pull GPU libraries.
"${PIP[@]}" "torch==2.13.0"
"$VENV/bin/python" - <<'PYEOF'
import torch
assert torch.version.cuda is None, f"a CUDA torch was installed ({torch.version.cuda}); want CPU"
print("torch", torch.__version__, "(CPU)")
PYEOF
"${PIP[@]}" whisper-live==0.10.0 --no-deps
"${PIP[@]}" "faster-whisper==1.2.1" fastapi uvicorn "websockets>=13" numpy onnxruntime
# WhisperLive's own client (tests/test_whisperlive_server.py runs it against our server):
# websocket-client and scipy are what whisper_live.client imports; PyAudio is stood in for.
"${PIP[@]}" websocket-client scipy
"$VENV/bin/python" -c "import whisper_live.server, whisper_live.backend.faster_whisper_backend; print('whisper_live server imports OK')"
echo "whisperlive venv ready: $VENV"
