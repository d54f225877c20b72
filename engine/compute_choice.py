"""The CPU compute type, chosen at start from what was measured on each kernel set.

CTranslate2 picks its CPU kernels when it loads: Intel's MKL on an Intel processor, oneDNN
elsewhere (``CT2_USE_MKL``), at the widest instruction set the processor has (AVX-512 or AVX2;
``CT2_FORCE_CPU_ISA``). The compute types do not rank the same on every kernel set: which one is
faster, and how much accuracy the slower one buys, was measured per kernel set with
``bench/compute_types.py`` and is kept in `MEASURED`. `choose_compute_type` is a pure function
of that table and the kernel set (`kernel_set`, from the processor's vendor and flags and the
CT2_* environment): the most accurate compute type whose CPU time is within `COST_TOLERANCE` of
the fastest one's, when it reads clearly better (`WER_MARGIN`); else the fastest. A kernel set
that was never measured gets int8, the type every CPU build supports at the least memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

FALLBACK = "int8"
COST_TOLERANCE = 1.25  # a more accurate type may cost at most this much more CPU time
WER_MARGIN = 0.01  # ...and must read at least one point better (short and long sets together)


@dataclass(frozen=True)
class Measured:
    """One row of bench/compute_types.py: ``cpu_s`` the encoder and decoder CPU seconds over
    the short set plus the long reading's (comparable within a kernel set only), ``wer`` the
    mean of the short set's and the long reading's word error rates."""

    kernels: str  # `kernel_set`'s name
    compute_type: str
    cpu_s: float
    wer: float


# bench/compute_types.py, tiny.en, both kernel sets in one sitting on an Intel Xeon (AVX-512,
# VNNI, AMX); the AVX2 rows are oneDNN forced there, what an AVX2 AMD processor runs
# (docs/evidence.md has the full table). int16 is MKL's only.
MEASURED: tuple[Measured, ...] = (
    Measured("mkl/AVX512", "int8", cpu_s=17.2, wer=0.0575),
    Measured("mkl/AVX512", "int16", cpu_s=20.6, wer=0.0536),
    Measured("mkl/AVX512", "float32", cpu_s=24.3, wer=0.0536),
    Measured("dnnl/AVX2", "int8", cpu_s=19.7, wer=0.0560),
    Measured("dnnl/AVX2", "float32", cpu_s=25.1, wer=0.0536),
)


@dataclass(frozen=True)
class Processor:
    """What decides CTranslate2's CPU kernels: the vendor and the instruction-set flags."""

    vendor: str  # "GenuineIntel", "AuthenticAMD", ... ("" when unknown)
    flags: frozenset[str]


def this_processor(cpuinfo: Path = Path("/proc/cpuinfo")) -> Processor:
    """The processor this runs on (Linux's /proc/cpuinfo; elsewhere unknown: no flags)."""
    vendor, flags = "", frozenset[str]()
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "vendor_id" and not vendor:
                vendor = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = frozenset(value.split())
            if vendor and flags:
                break
    except OSError:
        pass
    return Processor(vendor, flags)


def kernel_set(cpu: Processor, env: Mapping[str, str] | None = None) -> str:
    """The kernels CTranslate2 will run, as ``LIBRARY/ISA`` (``mkl/AVX512``, ``dnnl/AVX2``...),
    following its own rules: MKL on Intel unless ``CT2_USE_MKL=0``, the ISA forced by
    ``CT2_FORCE_CPU_ISA`` or else the widest the flags show."""
    env = os.environ if env is None else env
    use_mkl = env.get("CT2_USE_MKL", "").strip()
    mkl = use_mkl not in ("0", "false") if use_mkl else cpu.vendor == "GenuineIntel"
    forced = env.get("CT2_FORCE_CPU_ISA", "").strip().upper()
    if forced:
        isa = forced
    elif {"avx512f", "avx512bw", "avx512vl"} <= cpu.flags:
        isa = "AVX512"
    elif {"avx2", "fma"} <= cpu.flags:
        isa = "AVX2"
    elif "avx" in cpu.flags:
        isa = "AVX"
    else:
        isa = "GENERIC"
    return f"{'mkl' if mkl else 'dnnl'}/{isa}"


def choose_compute_type(kernels: str, table: Sequence[Measured] = MEASURED,
                        supported: Iterable[str] | None = None) -> tuple[str, str]:
    """The compute type for ``kernels`` and why, from ``table`` (see the module notes);
    ``supported``: the types this CTranslate2 build offers (None: all in the table)."""
    allowed = None if supported is None else set(supported)
    rows = [r for r in table if r.kernels == kernels
            and (allowed is None or r.compute_type in allowed)]
    if not rows:
        return FALLBACK, f"{FALLBACK}: {kernels} not measured"
    fastest = min(rows, key=lambda r: (r.cpu_s, r.wer))
    affordable = [r for r in rows if r.cpu_s <= fastest.cpu_s * COST_TOLERANCE]
    best = min(affordable, key=lambda r: (r.wer, r.cpu_s))
    if best is not fastest and round(fastest.wer - best.wer, 6) >= WER_MARGIN:
        return best.compute_type, f"{best.compute_type}: on {kernels} {_against(best, fastest)}"
    most = min(rows, key=lambda r: (r.wer, r.cpu_s))
    why = f"{fastest.compute_type}: fastest on {kernels}"
    if most.wer < fastest.wer:
        why += f" ({most.compute_type} {_against(most, fastest)})"
    return fastest.compute_type, why


def _against(row: Measured, fastest: Measured) -> str:
    return (f"WER {100 * row.wer:.1f} % vs {100 * fastest.wer:.1f} % for "
            f"{row.cpu_s / fastest.cpu_s:.2f}x the CPU time")


def default_cpu_compute_type() -> tuple[str, str]:
    """`choose_compute_type` for this processor and environment, among the types the installed
    CTranslate2 supports on the CPU."""
    kernels = kernel_set(this_processor())
    try:
        import ctranslate2

        supported: set[str] | None = set(ctranslate2.get_supported_compute_types("cpu"))
    except (ImportError, RuntimeError):
        supported = None
    return choose_compute_type(kernels, MEASURED, supported)
