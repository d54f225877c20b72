"""Every bench runs: each one as `python bench/NAME.py --smoke` (or with a two-clip manifest and
its own size flags where it has no --smoke) on the tests' corpus, as a subprocess, and writes
JSON with the keys its readers use. Nothing here times anything: the benches measure, this only
keeps them working (bench/app_import.py once imported a name that no longer existed, and
nothing noticed). Benches that load Whisper are `model`; the desktop ones `e2e`; the AI-polish
one `llm`; the bundle's needs a built bundle (scripts/test builds it after the tests)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "tests" / "audio" / "manifest.jsonl"
TINY = "TINY_MANIFEST"  # placeholder in an argument list: two short English clips
Check = Callable[[dict[str, Any]], None]


def _keys(*names: str) -> Check:
    def check(doc: dict[str, Any]) -> None:
        assert set(names) <= set(doc), f"missing {set(names) - set(doc)}"
    return check


def _app_import(doc: dict[str, Any]) -> None:
    row = doc["english-short-mix.wav"]
    assert row["audio_s"] > 5
    for system in ("app_import", "whole_file"):
        assert row[system]["wer"] < 50 and row[system]["rtf_median"] > 0


def _transcribe(doc: dict[str, Any]) -> None:
    assert doc["files"] == 1 and doc["repeat"] == 1
    assert doc["ours"]["wer"] < 0.5 and doc["faster_whisper_default"]["wer"] < 0.5


def _server(doc: dict[str, Any]) -> None:
    run = doc["1"]["ours_batched"]
    assert run["finals"] >= 1 and run["wer"] < 0.5 and run["p50_ms"] > 0
    assert run["mean_batch"] >= 1  # read from the server's /metrics.json


def _server_files(doc: dict[str, Any]) -> None:
    results = doc["results"]
    assert results["ours_files"]["files_per_min"] > 0 and results["fw_batched"]["wer"] < 0.5
    assert results["ours_live_files"]["files_done"] >= 2 and doc["ratio_files_per_min"] > 0


def _soak(doc: dict[str, Any]) -> None:
    assert doc["sessions"] >= 1 and doc["server_tracebacks"] == 0
    assert doc["rss_mb"]["max"] > 0


def _streaming(doc: dict[str, Any]) -> None:
    assert len(doc["per_file"]) == 2 and doc["wer_streaming"] < 0.5
    assert doc["final_after_speech_end_ms"]["n"] >= 2


def _layouts(doc: dict[str, Any]) -> None:
    assert set(doc["layouts"]) == {"2x1", "1x2", "2x2"}
    assert all(r["alone_ms"]["n"] == 1 for r in doc["layouts"].values())


model = pytest.mark.model
CASES: list[Any] = [
    pytest.param("transcribe", ["--smoke"], _transcribe, marks=model),
    pytest.param("vocabulary", ["--smoke"], _keys("paths", "files", "terms_in_clips"),
                 marks=model),
    pytest.param("chunk_decode", ["--smoke"], _keys("rows", "scores", "batch_audio_s_per_s"),
                 marks=model),
    pytest.param("decode_layouts", ["--smoke"], _layouts, marks=model),
    pytest.param("batch_profile", ["--smoke"], _keys("partials_similar"), marks=model),
    pytest.param("app_import", ["--smoke"], _app_import, marks=model),
    pytest.param("streaming", ["--manifest", TINY, "--limit", "2", "--no-continuous"],
                 _streaming, marks=model),
    pytest.param("dictation_form", ["--manifest", TINY, "--rounds", "1"],
                 _keys("ptt", "vad", "offline", "texts"), marks=model),
    pytest.param("longform", ["--manifest", TINY, "--eval-min-speech-s", "0", "--concat-minutes", "0.1",
                              "--repeats", "1"],
                 _keys("ours", "faster_whisper_default", "faster_whisper_batched", "ratios"),
                 marks=model),
    pytest.param("memory", ["--minutes", "0.1"], _keys("env", "runs"), marks=model),
    pytest.param("server", ["--smoke"], _server, marks=model),
    pytest.param("server_files", ["--smoke", "--manifest", TINY], _server_files, marks=model),
    pytest.param("soak", ["--smoke"], _soak, marks=model),
    pytest.param("model_download", ["--smoke"], _keys("size_mb", "runs"), marks=model),
    pytest.param("cluster", ["--smoke"],
                 _keys("runs", "scaling_efficiency", "ray_outputs_identical"), marks=model),
    pytest.param("captions", ["--smoke"], _keys("model", "results"),
                 marks=[model, pytest.mark.e2e]),
    pytest.param("app_latency", ["--smoke"], _keys("clips", "runs", "modes"),
                 marks=[model, pytest.mark.e2e]),
    pytest.param("polish", ["--smoke"], _keys("presets", "corpus"), marks=pytest.mark.llm),
    pytest.param("bundle", ["--smoke"], _keys("commands", "build", "repeat")),
]


def _tiny_manifest(folder: Path) -> Path:
    """The first two short English clips of the tests' corpus, with absolute paths."""
    rows = [json.loads(line) for line in MANIFEST.read_text(encoding="utf-8").splitlines()]
    short = [r for r in rows if r.get("language") == "en" and r.get("kind") == "short"][:2]
    path = folder / "manifest.jsonl"
    path.write_text("".join(json.dumps({**r, "file": str(MANIFEST.parent / r["file"])}) + "\n"
                            for r in short), encoding="utf-8")
    return path


def _needs(name: str) -> str | None:
    """Why this bench cannot run here, or None."""
    if name == "bundle" and not (REPO / "dist" / "sottovoce" / "sottovoce").is_file():
        return "no bundle in dist/sottovoce (packaging/build_bundle.sh)"
    if name in ("captions", "app_latency") and not os.environ.get("DISPLAY"):
        return "needs the desktop session (source .ci/desktop.sh)"
    if name == "polish":
        venv = Path(os.environ.get("SOTTOVOCE_LLM_VENV", REPO / ".venv-llm"))
        if not (venv / "bin" / "python").exists():
            return f"no llm venv at {venv} (.ci/llm-venv.sh)"
    if name == "cluster" and shutil.which("unshare") is None:
        return "no unshare (util-linux) for Ray's private network namespace"
    if name == "memory" and not Path("/usr/bin/time").exists():
        return "no /usr/bin/time (GNU time) to read the peak RSS"
    return None


@pytest.mark.parametrize(("name", "args", "check"), CASES)
def test_bench_runs_and_writes_its_json(name: str, args: list[str], check: Check,
                                        tmp_path: Path) -> None:
    reason = _needs(name)
    if reason:
        pytest.skip(reason)
    out = tmp_path / f"{name}.json"
    argv = [str(_tiny_manifest(tmp_path)) if a == TINY else a for a in args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's code, whatever is installed
    done = subprocess.run([sys.executable, str(REPO / "bench" / f"{name}.py"), *argv,
                           "--out", str(out)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads(out.read_text(encoding="utf-8"))
    check(doc)
    # Every result says which processor measured it: speed ratios differ between them.
    assert doc["host"]["cpu"] and doc["host"]["cores"] == os.cpu_count()
