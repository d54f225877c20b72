"""The CPU compute type chosen from a measured table and the processor (engine.compute_choice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.compute_choice import (
    FALLBACK,
    MEASURED,
    Measured,
    Processor,
    choose_compute_type,
    default_cpu_compute_type,
    kernel_set,
    this_processor,
)

INTEL = Processor("GenuineIntel", frozenset({"avx", "avx2", "fma", "avx512f", "avx512bw",
                                             "avx512vl", "avx512_vnni"}))
AMD = Processor("AuthenticAMD", frozenset({"avx", "avx2", "fma"}))
OLD = Processor("GenuineIntel", frozenset({"sse4_2"}))

TABLE = (
    Measured("mkl/AVX512", "int8", cpu_s=10.0, wer=0.100),
    Measured("mkl/AVX512", "float32", cpu_s=14.0, wer=0.080),  # better, but 1.4x the CPU
    Measured("dnnl/AVX2", "int8", cpu_s=10.0, wer=0.104),
    Measured("dnnl/AVX2", "float32", cpu_s=12.0, wer=0.094),  # better by 1 point at 1.2x
    Measured("dnnl/AVX", "int8", cpu_s=10.0, wer=0.100),
    Measured("dnnl/AVX", "float32", cpu_s=11.0, wer=0.096),  # within cost, not clearly better
)


def test_kernel_set_follows_ctranslate2s_rules() -> None:
    assert kernel_set(INTEL, {}) == "mkl/AVX512"
    assert kernel_set(AMD, {}) == "dnnl/AVX2"
    assert kernel_set(OLD, {}) == "mkl/GENERIC"
    # What an AMD processor runs, forced on Intel (the benches' avx2 kernel set).
    assert kernel_set(INTEL, {"CT2_USE_MKL": "0", "CT2_FORCE_CPU_ISA": "AVX2"}) == "dnnl/AVX2"
    assert kernel_set(AMD, {"CT2_USE_MKL": "1"}) == "mkl/AVX2"
    assert kernel_set(INTEL, {"CT2_FORCE_CPU_ISA": "avx2"}) == "mkl/AVX2"


def test_the_fastest_type_unless_a_better_one_is_affordable() -> None:
    assert choose_compute_type("mkl/AVX512", TABLE) == (
        "int8", "int8: fastest on mkl/AVX512 (float32 WER 8.0 % vs 10.0 % for 1.40x the CPU time)")
    assert choose_compute_type("dnnl/AVX2", TABLE) == (
        "float32", "float32: on dnnl/AVX2 WER 9.4 % vs 10.4 % for 1.20x the CPU time")
    assert choose_compute_type("dnnl/AVX", TABLE)[0] == "int8"  # 0.4 points: within noise


def test_unmeasured_or_unsupported_falls_back_to_int8() -> None:
    assert choose_compute_type("dnnl/AVX512", TABLE) == (FALLBACK,
                                                         "int8: dnnl/AVX512 not measured")
    assert choose_compute_type("dnnl/AVX2", TABLE, supported={"int8", "int16"})[0] == "int8"
    assert choose_compute_type("mkl/AVX512", ()) [0] == FALLBACK


def test_the_shipped_table_gives_each_measured_kernel_set_a_supported_type() -> None:
    kernels = {row.kernels for row in MEASURED}
    assert {"mkl/AVX512", "dnnl/AVX2"} <= kernels
    for name in kernels:
        chosen, _ = choose_compute_type(name)
        assert chosen in {row.compute_type for row in MEASURED if row.kernels == name}


def test_this_processor_reads_vendor_and_flags(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu avx2 fma\n\n"
                       "processor\t: 1\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu avx2 fma\n")
    assert this_processor(cpuinfo) == Processor("AuthenticAMD", frozenset({"fpu", "avx2", "fma"}))
    assert this_processor(tmp_path / "missing") == Processor("", frozenset())


@pytest.mark.parametrize("env", [{}, {"CT2_USE_MKL": "0", "CT2_FORCE_CPU_ISA": "AVX2"}])
def test_default_is_the_tables_choice_for_this_processor(env: dict[str, str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CT2_USE_MKL", "CT2_FORCE_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    chosen, why = default_cpu_compute_type()
    assert (chosen, why) == choose_compute_type(kernel_set(this_processor()), MEASURED,
                                                _supported())


def _supported() -> set[str]:
    ctranslate2 = pytest.importorskip("ctranslate2")
    return set(ctranslate2.get_supported_compute_types("cpu"))
