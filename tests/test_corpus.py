"""The speech the project carries: the test corpus in tests/audio (FLAC, manifest, README with
licences) and the sample in resources/samples that `sottovoce transcribe --sample` and the doctor
use. Nothing outside the repository is read (issue 17: a clone must stand alone)."""

from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

import resources
from app.selftest import MIN_AGREEMENT, agreement
from engine.audio.decode import load_audio

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "audio"
ROWS = [json.loads(line) for line in (CORPUS / "manifest.jsonl").read_text("utf-8").splitlines()
        if line.strip()]
REQUIRED = ("file", "duration_s", "text", "language", "source", "license", "kind")


def int16_samples(path: Path) -> tuple[np.ndarray, int, int]:
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        rate, channels = stream.rate, stream.channels
        samples = np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(stream)])
    return samples, rate, channels


def test_every_manifest_row_is_a_16k_mono_16bit_flac_of_the_stated_length() -> None:
    assert len(ROWS) == 36
    assert len({row["file"] for row in ROWS}) == len(ROWS)
    for row in ROWS:
        assert all(row.get(key) not in (None, "") for key in REQUIRED), row["file"]
        assert not Path(row["file"]).is_absolute() and row["file"].endswith(".flac")
        samples, rate, channels = int16_samples(CORPUS / row["file"])
        assert (rate, channels, samples.dtype) == (16000, 1, np.int16), row["file"]
        assert abs(len(samples) / rate - row["duration_s"]) < 0.002, row["file"]


def test_the_folder_holds_exactly_the_manifest_and_its_notices() -> None:
    names = {p.name for p in CORPUS.iterdir()}
    assert names == {row["file"] for row in ROWS} | {"manifest.jsonl", "README.md"}


def test_the_readme_gives_each_file_its_source_and_licence() -> None:
    readme = (CORPUS / "README.md").read_text("utf-8")
    rows = {line.split("|")[1].strip(): line for line in readme.splitlines()
            if line.startswith("| ") and line.split("|")[1].strip().endswith(".flac")}
    assert set(rows) == {row["file"] for row in ROWS}
    for row in ROWS:
        assert row["source"] in rows[row["file"]] and row["license"] in rows[row["file"]]


def test_the_wav_view_the_tests_read_has_the_flac_samples(shared_audio: Path) -> None:
    """conftest decodes the FLAC corpus into WAVs named as before: the same samples, so no test
    result depends on the storage format."""
    for name in ("jfk-inaugural-1961-excerpt", "picovoice-ja", "mfa-whisper2"):
        wav, flac = shared_audio / f"{name}.wav", CORPUS / f"{name}.flac"
        assert np.array_equal(int16_samples(wav)[0], int16_samples(flac)[0]), name
        assert np.array_equal(load_audio(wav), load_audio(flac)), name


def test_the_manifest_fixture_reads_the_wav_view(manifest, shared_audio: Path) -> None:  # type: ignore[no-untyped-def]
    assert len(manifest) == len(ROWS)
    assert all(e.path.suffix == ".wav" and e.path.parent == shared_audio for e in manifest)


def test_the_bundled_sample_is_the_corpus_clip_and_says_the_manifest_text() -> None:
    sample = resources.sample_path()
    assert sample.read_bytes() == (CORPUS / "jfk-inaugural-1961-excerpt.flac").read_bytes()
    jfk = next(row for row in ROWS if row["file"] == "jfk-inaugural-1961-excerpt.flac")
    assert jfk["text"] == resources.SAMPLE_TEXT
    assert "public domain" in jfk["license"].lower()


def test_the_wheel_ships_the_sample() -> None:
    """package-data must match the sample's path, or `pip install sottovoce` has no --sample."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]
    name = resources.SAMPLE_NAME
    assert any(fnmatch.fnmatch(name, p) for key in ("*", "resources") for p in patterns.get(key, []))


def test_agreement_separates_the_sample_from_other_speech() -> None:
    text = resources.SAMPLE_TEXT
    assert agreement(text.upper().replace(",", ""), text) == 1.0
    assert agreement("And so my fellow Americans ask not what your country can do", text) < 0.9
    assert agreement("go forward ten meters", text) < 0.2
    assert agreement("", text) == 0.0


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(),
                    reason="not a git checkout")
def test_nothing_in_the_repository_reads_a_sibling_folder() -> None:
    found = subprocess.run(["git", "grep", "-n", "-I", r"\.\./shared", "--", ".",
                            ":!tests/test_corpus.py"],
                           cwd=REPO, capture_output=True, text=True, check=False)
    assert found.returncode == 1, found.stdout  # 1: no match


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.mark.model
def test_transcribe_sample_gives_the_samples_words() -> None:
    """The README's main command, minus the setup script: the bundled model on the sample."""
    out = run_cli("transcribe", "--sample", "--no-progress")
    assert out.returncode == 0, out.stderr
    assert agreement(out.stdout, resources.SAMPLE_TEXT) >= MIN_AGREEMENT, out.stdout


def test_transcribe_without_a_file_is_a_usage_error() -> None:
    out = run_cli("transcribe")
    assert out.returncode == 2
    assert "--sample" in out.stderr
