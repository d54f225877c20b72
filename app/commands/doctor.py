"""`sottovoce doctor`: one line per part of the setup (OK / WARN / FAIL) with a hint to fix it.

The checks of local transcription live in `app.commands.doctor_engine`, the result type and
the probe deadline in `app.commands.doctor_result`; both are re-exported here.

Every check is isolated: a missing optional library, a hung sound server or a broken D-Bus turns
into a WARN/FAIL line, never a traceback, because people run this exactly when something is
broken. Probes that can block (PortAudio, keyring over D-Bus, pactl) run with a deadline.
Exit status is 1 only when an *essential* check fails (the app could not transcribe at all);
optional parts (GPU, keyring, hotkeys, microphone on a server) only warn.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from app.commands.doctor_engine import (
    check_compute_type,
    check_ctranslate2,
    check_model,
    check_transcription,
    check_vad,
)
from app.commands.doctor_engine import missing_cuda_libraries as missing_cuda_libraries
from app.commands.doctor_result import (
    FAIL,
    OK,
    PROBE_TIMEOUT_S,
    WARN,
    CheckResult,
    with_deadline,
)
from app.commands.doctor_result import ProbeTimeout as ProbeTimeout
from engine import __version__

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Checks. Each returns one CheckResult and may raise; run_checks() turns a raise into a FAIL line.


def check_python() -> CheckResult:
    version = platform.python_version()
    where = "bundle" if getattr(sys, "frozen", False) else sys.executable
    detail = f"{version} ({platform.system()} {platform.machine()}, {where}); sottovoce {__version__}"
    return CheckResult("Python", OK, detail, essential=True)


def check_qt() -> CheckResult:
    try:
        import PySide6
        from PySide6 import QtCore
    except ImportError as exc:
        return CheckResult("Qt", WARN, f"PySide6 not importable ({exc})",
                           "the desktop app needs it: pip install 'sottovoce[gui]' "
                           "(the CLI and server work without it)")
    detail = f"PySide6 {PySide6.__version__}, Qt {QtCore.qVersion()}"
    if sys.platform.startswith("linux"):
        problem = _linux_qt_platform_problem()
        if problem:
            return CheckResult("Qt", WARN, f"{detail}; {problem[0]}", problem[1])
    return CheckResult("Qt", OK, detail)


def _linux_qt_platform_problem() -> tuple[str, str] | None:
    """Why Qt's window-system plugin would fail to load here, if we can tell without starting it
    (starting it is not an option: Qt aborts the process when no platform plugin loads)."""
    import ctypes.util

    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        return ("no DISPLAY or WAYLAND_DISPLAY", "run inside a desktop session (or Xvfb) to open "
                "windows; `sottovoce transcribe` works without one")
    # A PyInstaller bundle ships its own copy next to Qt, so only the system matters otherwise.
    bundled = Path(getattr(sys, "_MEIPASS", "/nonexistent")) / "libxcb-cursor.so.0"
    if (os.environ.get("DISPLAY") and not bundled.exists()
            and ctypes.util.find_library("xcb-cursor") is None):
        return ("libxcb-cursor0 missing (Qt's xcb plugin will not load)",
                "install it: sudo apt install libxcb-cursor0 (Fedora: xcb-util-cursor)")
    return None


def check_audio_devices() -> CheckResult:
    try:
        import sounddevice
    except ImportError as exc:
        return CheckResult("Audio devices", WARN, f"sounddevice not importable ({exc})",
                           "microphone capture needs it: pip install 'sottovoce[gui]'")
    except OSError as exc:  # sounddevice raises OSError when the PortAudio library is missing
        return CheckResult("Audio devices", WARN, f"PortAudio missing ({exc})",
                           "install PortAudio: sudo apt install libportaudio2")
    devices = with_deadline(lambda: list(sounddevice.query_devices()))
    inputs = [d for d in devices if int(d.get("max_input_channels", 0)) > 0]
    if not inputs:
        return CheckResult("Audio devices", WARN, f"{len(devices)} device(s), no microphone",
                           "plug in or enable a microphone (pavucontrol / system sound settings); "
                           "files and remote audio still work")
    default_name = _default_input_name(sounddevice, devices)
    return CheckResult("Audio devices", OK,
                       f"{len(inputs)} input(s); default: {default_name or 'none chosen'}")


def _default_input_name(sounddevice: Any, devices: list[dict[str, Any]]) -> str | None:
    index = sounddevice.default.device[0]
    if isinstance(index, int) and 0 <= index < len(devices):
        return str(devices[index]["name"])
    return None


def check_sound_server() -> CheckResult:
    if sys.platform == "win32":
        return CheckResult("Sound server", OK, "Windows audio (WASAPI/MME via PortAudio)")
    if sys.platform == "darwin":
        return CheckResult("Sound server", OK, "Core Audio")
    server = _pactl_server_name()
    if server:
        return CheckResult("Sound server", OK, server)
    runtime = Path(os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}")
    if (runtime / "pipewire-0").exists():
        return CheckResult("Sound server", OK, "PipeWire (socket found; pactl not installed)")
    return CheckResult("Sound server", WARN, "no PulseAudio or PipeWire server found",
                       "start your desktop's sound server (systemctl --user start pipewire "
                       "pipewire-pulse, or pulseaudio --start); plain ALSA may still work")


def _pactl_server_name() -> str | None:
    if shutil.which("pactl") is None:
        return None
    try:
        out = subprocess.run(["pactl", "info"], capture_output=True, text=True,
                             timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.stdout.splitlines():
        if line.startswith("Server Name:"):
            return line.split(":", 1)[1].strip()
    return None


def check_app_resources() -> CheckResult:
    import resources

    try:
        icons = [*resources.icon_files(), *resources.icon_files(tray=True),
                 *resources.icon_files(tray=True, recording=True)]
        resources.stylesheet()
    except (FileNotFoundError, OSError) as exc:
        return CheckResult("App resources", WARN, str(exc),
                           "the app will start without icons or styling: reinstall Sottovoce")
    return CheckResult("App resources", OK,
                       f"{len(icons)} icons and style.qss in {resources.RESOURCES_DIR}")


def check_keyring() -> CheckResult:
    try:
        import keyring
    except ImportError as exc:
        return CheckResult("Keyring", WARN, f"keyring not importable ({exc})",
                           "remote-server API keys need it: pip install 'sottovoce[client]'")
    backend = with_deadline(keyring.get_keyring)
    name = f"{type(backend).__module__}.{type(backend).__name__}"
    priority = getattr(backend, "priority", 0)
    if name.startswith("keyring.backends.fail") or priority <= 0:
        return CheckResult("Keyring", WARN, f"no usable backend ({name})",
                           "API keys for a remote server cannot be saved: start and unlock "
                           "GNOME Keyring or KWallet (Sottovoce never stores keys in plain text)")
    return CheckResult("Keyring", OK, name)


def check_hotkeys() -> CheckResult:
    if sys.platform == "darwin":
        return CheckResult("Hotkeys", OK, "macOS (pynput)",
                           "grant Accessibility and Input Monitoring in System Settings")
    if sys.platform == "win32":
        return CheckResult("Hotkeys", OK, "Windows (pynput)")
    desktop, routes = _desktop_routes()
    from app.routes import COMPOSITOR, command_name, compositor_lines, summary

    hotkey_line, _ = summary(routes, desktop)
    if desktop.kind == "none":
        return CheckResult("Hotkeys", WARN, "no graphical session",
                           "global hotkeys need X11, a desktop shortcut portal or a compositor "
                           "binding to `sottovoce toggle`")
    if routes.hotkey == COMPOSITOR:
        from app.settings import load_settings

        lines = compositor_lines(desktop.family, load_settings().hotkey, command_name())
        return CheckResult("Hotkeys", WARN, hotkey_line,
                           "add to your compositor's config:\n" + "\n".join(
                               f"          {line}" for line in lines))
    if desktop.wayland:
        return CheckResult("Hotkeys", OK, hotkey_line)
    try:
        with_deadline(lambda: __import__("pynput.keyboard"))
    except ImportError as exc:
        return CheckResult("Hotkeys", WARN, f"X11 session but pynput unusable ({exc})",
                           "pip install 'sottovoce[gui]', and check that DISPLAY is reachable")
    return CheckResult("Hotkeys", OK, hotkey_line)


def check_insertion() -> CheckResult:
    """How dictated text reaches the focused app here (app.routes), probed, not guessed."""
    if not sys.platform.startswith("linux"):
        return CheckResult("Text insertion", OK, "key events (pynput)")
    from app.ibus_route import probe, route_line
    from app.routes import summary

    desktop, routes = _desktop_routes()
    ibus_used, ibus_why = probe()
    line = route_line(summary(routes, desktop)[1], ibus_used, ibus_why)
    if ibus_used:
        return CheckResult("Text insertion", OK, line)
    if not routes.insert:
        hint = ("on wlroots/Hyprland: install wtype; on GNOME/KDE: install "
                "xdg-desktop-portal-gnome / -kde (RemoteDesktop); or allow ydotool in the "
                "settings (needs ydotoold); meanwhile press Ctrl+V after each dictation"
                if desktop.wayland else "dictation needs a graphical session")
        return CheckResult("Text insertion", WARN, line, hint)
    if desktop.wayland and not routes.clipboard:
        return CheckResult("Text insertion", WARN, line,
                           "install wl-clipboard for paste mode (type mode works meanwhile)")
    return CheckResult("Text insertion", OK, line)


def check_verification() -> CheckResult:
    """Whether inserted text can be read back (app.verify), so "verified" can be said."""
    if not sys.platform.startswith("linux"):
        return CheckResult("Insertion check", OK, "not available here: texts are sent, not verified")
    from app.verify import availability

    ok, line = with_deadline(availability)
    return CheckResult("Insertion check", OK if ok else WARN, line, "" if ok else (
        "install at-spi2-core (the accessibility bus); until then texts are sent, not verified"))


def check_captions() -> CheckResult:
    if not sys.platform.startswith("linux"):
        return CheckResult("Caption window", OK, "always on top, never focused")
    from app.routes import caption_note

    desktop, _ = _desktop_routes()
    ok, note = caption_note(desktop)
    return CheckResult("Caption window", OK if ok else WARN, note,
                       "" if ok else "captions still work; the window may be covered")


def _desktop_routes() -> tuple[Any, Any]:
    from app.desktop import detect
    from app.routes import choose
    from app.settings import load_settings

    desktop = with_deadline(detect, PROBE_TIMEOUT_S * 2)
    return desktop, choose(desktop, load_settings().allow_ydotool)


def check_config() -> CheckResult:
    from app.settings import read_settings, settings_path

    settings = settings_path()
    if not settings.is_file():
        return CheckResult("Config", OK, f"defaults ({settings} is created on first save)")
    loaded = read_settings(settings)
    if loaded.problems:
        hint = ("this file is from a newer Sottovoce; the app will not overwrite it"
                if loaded.newer else
                f"fix or delete {settings}; the app uses the defaults shown for these, and "
                f"keeps this file as {settings.name}.bad when it next saves")
        return CheckResult("Config", WARN, f"{settings}: " + "; ".join(loaded.problems), hint)
    return CheckResult("Config", OK, str(settings))


# (name shown if the check itself crashes, check), in report order.
CHECKS: tuple[tuple[str, Callable[[], CheckResult]], ...] = (
    ("Python", check_python),
    ("Qt", check_qt),
    ("Audio devices", check_audio_devices),
    ("Sound server", check_sound_server),
    ("CTranslate2/CUDA", check_ctranslate2),
    ("Compute type", check_compute_type),
    ("Voice detection", check_vad),
    ("App resources", check_app_resources),
    ("Keyring", check_keyring),
    ("Hotkeys", check_hotkeys),
    ("Text insertion", check_insertion),
    ("Insertion check", check_verification),
    ("Caption window", check_captions),
    ("Model", check_model),
    ("Transcription", check_transcription),
    ("Config", check_config),
)


def run_checks(
    checks: tuple[tuple[str, Callable[[], CheckResult]], ...] = CHECKS,
) -> list[CheckResult]:
    """Run every check; one that raises or hangs becomes a FAIL line instead of a crash."""
    results = []
    for name, check in checks:
        try:
            results.append(check())
        except Exception as exc:  # noqa: BLE001 - the doctor must report, never crash
            log.debug("check %s raised", name, exc_info=True)
            results.append(CheckResult(name, FAIL, f"check failed: {type(exc).__name__}: {exc}",
                                       "run `sottovoce -vv doctor` and include the output in a "
                                       "bug report"))
    return results


def format_report(results: list[CheckResult]) -> str:
    width = max(len(r.name) for r in results)
    lines = []
    for r in results:
        lines.append(f"{r.status:<4}  {r.name:<{width}}  {r.detail}")
        if r.hint and r.status != OK:
            lines.append(f"{'':<4}  {'':<{width}}  -> {r.hint}")
    return "\n".join(lines)


def exit_code(results: list[CheckResult]) -> int:
    return 1 if any(r.status == FAIL and r.essential for r in results) else 0


def run(args: argparse.Namespace) -> int:
    results = run_checks()
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        print(format_report(results))
    return exit_code(results)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "doctor", help="check this computer's setup and say how to fix problems",
        description="Report Python, Qt, audio, sound server, GPU, keyring, hotkey and model "
                    "status, one line each (OK/WARN/FAIL) with a hint. Exit 1 if something "
                    "essential fails.")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(handler=run)
