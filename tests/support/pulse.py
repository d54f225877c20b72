"""The sound server for tests: a private null sink as the microphone (``virtual_mic``), named
microphones (``two_mics``), and playing a file into a sink. Skipped, with the reason, where no
PulseAudio server is reachable (.ci/desktop.sh starts one)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def pulse_reason() -> str | None:
    if shutil.which("pactl") is None or shutil.which("paplay") is None:
        return "pulseaudio-utils (pactl, paplay) not installed"
    probe = subprocess.run(["pactl", "info"], capture_output=True, text=True, timeout=10)
    if probe.returncode != 0:
        return f"no PulseAudio server reachable ({probe.stderr.strip() or 'pactl info failed'})"
    return None


@pytest.fixture
def virtual_mic(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A private null sink; what is played into it is what the "pulse" input records."""
    reason = pulse_reason()
    if reason is not None:
        print(f"SKIP microphone test: {reason}")
        pytest.skip(reason)
    sink = f"sottovoce_test_{os.getpid()}_{time.monotonic_ns() % 100000}"
    module = subprocess.run(
        ["pactl", "load-module", "module-null-sink", f"sink_name={sink}", "rate=16000",
         "channels=1"], capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    monkeypatch.setenv("PULSE_SOURCE", f"{sink}.monitor")
    try:
        yield sink
    finally:
        subprocess.run(["pactl", "unload-module", module], timeout=10, check=False)


def play(sink: str, wav: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["paplay", f"--device={sink}", str(wav)])


@dataclass
class Mic:
    name: str  # the description the user sees
    source: str
    sink: str
    modules: list[str]

    def unplug(self) -> None:
        for module in reversed(self.modules):
            subprocess.run(["pactl", "unload-module", module], timeout=10, check=False)
        self.modules = []


def _pactl(*args: str) -> str:
    return subprocess.run(["pactl", *args], capture_output=True, text=True, check=True,
                          timeout=10).stdout.strip()


def _mic(label: str) -> Mic:
    tag = f"{label}{os.getpid()}"
    sink = f"sv_{tag}_spk"
    modules = [_pactl("load-module", "module-null-sink", f"sink_name={sink}", "rate=16000",
                      "channels=1", f"sink_properties=device.description=Speaker{tag}")]
    modules.append(_pactl("load-module", "module-remap-source", f"master={sink}.monitor",
                          f"source_name=sv_{tag}_mic",
                          f"source_properties=device.description=TestMic{tag}"))
    return Mic(f"TestMic{tag}", f"sv_{tag}_mic", sink, modules)


@dataclass
class Mics:
    first: Mic
    second: Mic
    default: Mic  # made the system default for the test


@pytest.fixture
def two_mics(monkeypatch: pytest.MonkeyPatch) -> Iterator[Mics]:
    """Two named microphones and a third one as the system default (restored after)."""
    reason = pulse_reason()
    if reason is not None:
        pytest.skip(reason)
    monkeypatch.delenv("PULSE_SOURCE", raising=False)
    before = _pactl("get-default-source")
    mics = Mics(_mic("A"), _mic("B"), _mic("D"))
    _pactl("set-default-source", mics.default.source)
    try:
        yield mics
    finally:
        subprocess.run(["pactl", "set-default-source", before], timeout=10, check=False)
        for mic in (mics.first, mics.second, mics.default):
            mic.unplug()


def pulse_missing() -> str | None:
    try:
        ok = subprocess.run(["pactl", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return None if ok else "needs a PulseAudio server: source .ci/desktop.sh"


class Sinks:
    """Null sinks made for one test, unloaded after it; the default output is put back."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}  # sink name -> module index
        self.default = subprocess.run(["pactl", "get-default-sink"], capture_output=True,
                                      text=True, timeout=10).stdout.strip()

    def add(self, role: str) -> str:
        name = f"sv_{role}_{os.getpid()}_{time.monotonic_ns() % 100000}"
        module = subprocess.run(
            ["pactl", "load-module", "module-null-sink", f"sink_name={name}", "rate=16000",
             "channels=1", f"sink_properties=device.description={role}"],
            capture_output=True, text=True, check=True, timeout=10).stdout.strip()
        self.modules[name] = module
        return name

    def remove(self, sink: str) -> None:
        subprocess.run(["pactl", "unload-module", self.modules.pop(sink)], check=True, timeout=10)

    def close(self) -> None:
        if self.default:
            subprocess.run(["pactl", "set-default-sink", self.default], timeout=10, check=False)
        for module in self.modules.values():
            subprocess.run(["pactl", "unload-module", module], timeout=10, check=False)


@pytest.fixture
def sinks() -> Iterator[Sinks]:
    reason = pulse_missing()
    if reason:
        pytest.skip(reason)
    made = Sinks()
    try:
        yield made
    finally:
        made.close()
