"""The model download path (engine.model_download) against a local server that serves the
Hugging Face hub's file API (tests/hub_server.py) for a repository holding the bundled tiny.en
files; huggingface_hub is pointed at it with HF_ENDPOINT, as a user would point it at a mirror.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest
from support.hub import MODEL_FILES, REPO

from engine.model_download import (
    DownloadCancelled,
    ModelDownloadError,
    Progress,
    download,
    partial_dir,
    remove,
)
from engine.models import downloaded_path, models_dir, resolve_model
from tests.hub_server import COMMIT, LocalHub


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def gets(hub: LocalHub, name: str) -> list[str]:
    """The Range header of each GET of ``name`` (``""``: the whole file)."""
    return [r for method, path, r in hub.state.requests
            if method == "GET" and path.endswith("/" + name)]


def test_full_download_is_verified_complete_and_loadable(hub: LocalHub, tiny_files: Path) -> None:
    seen: list[Progress] = []
    path = download("tiny.en", progress=seen.append)
    assert path == models_dir() / "tiny.en"
    for name in MODEL_FILES:
        assert sha256(path / name) == sha256(tiny_files / name)
    assert not (path / "README.md").exists()  # only what faster-whisper loads is fetched
    assert not partial_dir("tiny.en").exists()
    total = sum((tiny_files / n).stat().st_size for n in MODEL_FILES)
    assert seen[-1].done == seen[-1].total == total
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert "MB" in seen[-1].describe()
    # huggingface_hub's calls: the file list at the revision, then a HEAD per file at the
    # commit it named (its recorded hash and size), then the GETs.
    assert ("GET", f"/api/models/{REPO}/revision/main", "") in hub.state.requests
    heads = {p for m, p, _ in hub.state.requests if m == "HEAD"}
    assert heads == {f"/{REPO}/resolve/{COMMIT}/{n}" for n in MODEL_FILES}
    assert downloaded_path("tiny.en") == path
    # A second download is a no-op: the verified model is there.
    requests = len(hub.state.requests)
    assert download("tiny.en") == path
    assert len(hub.state.requests) == requests


def test_interrupted_download_resumes_where_it_stopped(hub: LocalHub, tiny_files: Path) -> None:
    size = (tiny_files / "model.bin").stat().st_size
    cut = size // 2
    hub.state.break_after["model.bin"] = cut
    hub.state.go_down_after_break = True  # the network stays down: this run fails
    with pytest.raises(ModelDownloadError, match="next try resumes"):
        download("tiny.en")
    part = partial_dir("tiny.en") / "model.bin.part"
    kept = part.stat().st_size  # what arrived is kept (whole chunks of huggingface_hub's)...
    assert 0 < kept <= cut
    assert downloaded_path("tiny.en") is None  # ...but nothing is offered
    hub.state.down = False
    served_before = hub.state.served
    resumed: list[Progress] = []
    path = download("tiny.en", progress=resumed.append)
    assert sha256(path / "model.bin") == sha256(tiny_files / "model.bin")
    assert gets(hub, "model.bin")[-1] == f"bytes={kept}-"  # a Range request, not a restart
    assert resumed[0].resumed_from >= kept
    others = sum((tiny_files / n).stat().st_size for n in MODEL_FILES if n != "model.bin")
    assert hub.state.served - served_before <= size - kept + others


def test_connection_cut_once_is_resumed_within_the_same_download(hub: LocalHub,
                                                                 tiny_files: Path) -> None:
    hub.state.break_after["model.bin"] = 25_000_000
    path = download("tiny.en")
    assert sha256(path / "model.bin") == sha256(tiny_files / "model.bin")
    first, again = gets(hub, "model.bin")
    assert first == "" and again.startswith("bytes=") and again != "bytes=0-"


def test_corrupted_file_is_refused_and_never_offered(hub: LocalHub) -> None:
    hub.state.corrupt.add("model.bin")
    with pytest.raises(ModelDownloadError, match="does not match the hash the hub records"):
        download("tiny.en")
    assert downloaded_path("tiny.en") is None
    assert not (models_dir() / "tiny.en").exists()
    assert not (partial_dir("tiny.en") / "model.bin.part").exists()  # the bad bytes are gone
    # The bundled model is still what the name resolves to.
    assert resolve_model("tiny.en").path != models_dir() / "tiny.en"


def test_cancelled_download_leaves_no_half_model(hub: LocalHub) -> None:
    hub.state.throttle_bps = 20_000_000
    cancel = threading.Event()

    def on_progress(p: Progress) -> None:
        if p.file == "model.bin" and p.done > 5_000_000:
            cancel.set()

    with pytest.raises(DownloadCancelled):
        download("tiny.en", progress=on_progress, cancel=cancel)
    assert not partial_dir("tiny.en").exists()
    assert not (models_dir() / "tiny.en").exists()
    assert downloaded_path("tiny.en") is None


def test_offline_and_unreachable_hub_say_so(hub: LocalHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelDownloadError, match="offline mode is on"):
        download("tiny.en")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(ModelDownloadError, match="cannot be reached"):
        download("tiny.en")
    assert not (models_dir() / "tiny.en").exists()


def test_not_enough_disk_space_is_checked_first(hub: LocalHub,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: usage(10**9, 10**9 - 1000, 1000))
    with pytest.raises(ModelDownloadError, match="not enough disk space"):
        download("tiny.en")
    assert not any(r[0] == "GET" and "/resolve/" in r[1] for r in hub.state.requests)


def test_remove_frees_the_space_and_bundled_models_stay(hub: LocalHub, tiny_files: Path) -> None:
    download("tiny.en")
    freed = remove("tiny.en")
    assert freed >= (tiny_files / "model.bin").stat().st_size
    assert downloaded_path("tiny.en") is None
    with pytest.raises(ModelDownloadError, match="bundled"):
        remove("base")
    with pytest.raises(ModelDownloadError, match="not downloaded"):
        remove("small.en")
    with pytest.raises(ModelDownloadError, match="unknown model"):
        download("huge-v9")


def test_models_command_lists_downloads_and_removes(hub: LocalHub,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    assert main(["models", "download", "small.en"]) == 1  # not on this hub
    assert "could not download small.en" in capsys.readouterr().err
    assert main(["models", "download", "tiny.en"]) == 0
    assert "tiny.en downloaded and verified" in capsys.readouterr().out
    assert main(["models", "list"]) == 0
    listing = capsys.readouterr().out
    row = next(line for line in listing.splitlines() if line.startswith("large-v3-turbo "))
    assert "1.6 GB" in row and "99 languages" in row
    assert "bundled" in next(line for line in listing.splitlines() if line.startswith("base "))
    assert "recommended:" in listing and "this machine:" in listing
    assert main(["models", "remove", "tiny.en"]) == 0
    assert "MB freed" in capsys.readouterr().out


@pytest.mark.parametrize(("machine", "english", "other"), [
    ((1, 143_771, 16, 131_072), "large-v3-turbo", "large-v3-turbo"),  # an H200
    ((1, 0, 8, 16_384), "large-v3-turbo", "large-v3-turbo"),  # CUDA, memory unknown
    ((1, 4096, 6, 16_384), "distil-large-v3", "small"),  # a 4 GB GPU
    ((0, 0, 8, 16_384), "small.en", "small"),  # 8 cores, no GPU
    ((0, 0, 4, 8192), "base.en", "base"),  # a laptop
    ((0, 0, 2, 24_576), "tiny.en", "tiny"),  # this test machine
])
def test_recommendation_per_machine(machine: tuple[int, int, int, int], english: str,
                                    other: str) -> None:
    from engine.model_catalog import Machine, catalogue_entry, recommend

    profile = Machine(*machine)
    picked = recommend(profile, english_only=True), recommend(profile, english_only=False)
    assert (picked[0].model, picked[1].model) == (english, other)
    assert {p.compute_type for p in picked} == {"float16" if profile.cuda_devices else "int8"}
    assert all(catalogue_entry(p.model) is not None for p in picked)
