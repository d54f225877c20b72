"""User settings: one frozen dataclass, stored as TOML in the config dir, versioned and migrated.

Loading never writes: a first run works on defaults and the file appears on the first save.
Secrets (the remote API key) are never stored here; see engine.remote.secrets.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from engine.atomic import atomic_write_text
from engine.paths import config_dir

log = logging.getLogger(__name__)

SETTINGS_VERSION = 2
FILE_NAME = "settings.toml"
BACKENDS = ("local", "remote")
DEVICES = ("auto", "cpu", "cuda")
HOTKEY_MODES = ("hold", "toggle")
INJECT_MODES = ("paste", "type", "off")
PASTE_KEYS = ("ctrl+v", "shift+insert")
LISTEN_MODES = ("dictation", "captions")
# Native protocol over ws/wss; whisperlive:// talks to a WhisperLive server (engine.remote).
REMOTE_SCHEMES = ("ws://", "wss://", "whisperlive://")
ENGINE_FIELDS = ("backend", "remote_url", "model", "device", "language", "listen_mode")


@dataclass(frozen=True)
class Settings:
    """Everything the user can change in the settings dialog.

    Attributes:
      backend: "local" (faster-whisper here) or "remote" (a WebSocket server at remote_url).
      model: model name or directory for the local backend ("tiny.en" is bundled).
      device: "auto" picks CUDA when present, else CPU.
      language: ISO code, or "" to detect (English-only models ignore it).
      listen_mode: "dictation" (push-to-talk, text typed into the focused app) or "captions"
        (continuous, voice activity decides).
      hotkey: pynput hotkey syntax; hotkey_mode "hold" (talk while held) or "toggle".
      inject_mode: "paste" (clipboard + paste keys, clipboard restored), "type", or "off".
      caption_lines: how many lines the caption window shows (1-3).
      first_run_hint: show the first-run hint; cleared once the user has seen it and saved.
    """

    version: int = SETTINGS_VERSION
    backend: str = "local"
    remote_url: str = ""
    model: str = "tiny.en"
    device: str = "auto"
    language: str = ""
    listen_mode: str = "dictation"
    hotkey: str = "<ctrl>+<alt>+<space>"
    hotkey_mode: str = "hold"
    inject_mode: str = "paste"
    paste_keys: str = "ctrl+v"
    captions_visible: bool = False
    caption_lines: int = 2
    caption_font_pt: int = 28
    first_run_hint: bool = True

    def __post_init__(self) -> None:
        _one_of("backend", self.backend, BACKENDS)
        _one_of("device", self.device, DEVICES)
        _one_of("hotkey_mode", self.hotkey_mode, HOTKEY_MODES)
        _one_of("inject_mode", self.inject_mode, INJECT_MODES)
        _one_of("paste_keys", self.paste_keys, PASTE_KEYS)
        _one_of("listen_mode", self.listen_mode, LISTEN_MODES)
        if self.version != SETTINGS_VERSION:
            raise ValueError(f"settings version {self.version} (expected {SETTINGS_VERSION})")
        if not self.model.strip():
            raise ValueError("model must not be empty")
        if self.language and not (self.language.isalpha() and len(self.language) <= 3):
            raise ValueError(f"invalid language code {self.language!r}")
        if self.backend == "remote" and not self.remote_url.startswith(REMOTE_SCHEMES):
            raise ValueError("remote_url must start with ws://, wss:// or whisperlive://")
        if not 1 <= self.caption_lines <= 3:
            raise ValueError("caption_lines must be 1, 2 or 3")
        if not 8 <= self.caption_font_pt <= 96:
            raise ValueError("caption_font_pt must be between 8 and 96")
        if not self.hotkey.strip():
            raise ValueError("hotkey must not be empty")


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)} (got {value!r})")


def settings_path() -> Path:
    return config_dir() / FILE_NAME


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Bring a settings table of any earlier version up to SETTINGS_VERSION.

    Version 1 (no "version" key counts as 1) had `ptt_hotkey` and a boolean `paste`; version 2
    renamed them to `hotkey` and `inject_mode`.
    """
    data = dict(data)
    version = int(data.get("version", 1))
    if version > SETTINGS_VERSION:
        raise ValueError(f"settings file is from a newer Sottovoce (version {version})")
    if version < 2:
        if "ptt_hotkey" in data:
            data["hotkey"] = data.pop("ptt_hotkey")
        if "paste" in data:
            data["inject_mode"] = "paste" if data.pop("paste") else "type"
        version = 2
    data["version"] = version
    return data


def from_mapping(data: dict[str, Any]) -> Settings:
    """Build Settings from a parsed TOML table: migrated, unknown keys dropped with a warning."""
    data = migrate(data)
    known = {f.name for f in fields(Settings)}
    unknown = sorted(set(data) - known)
    if unknown:
        log.warning("ignoring unknown settings: %s", ", ".join(unknown))
    return Settings(**{k: v for k, v in data.items() if k in known})


def load_settings(path: Path | None = None) -> Settings:
    """The saved settings, or defaults when there is no file yet. A broken file is reported and
    replaced by defaults in memory (the file itself is left alone for the user to inspect)."""
    path = path or settings_path()
    if not path.is_file():
        return Settings()
    try:
        data = _toml_loads(path.read_text(encoding="utf-8"))
        return from_mapping(data)
    except (OSError, ValueError, TypeError) as exc:
        log.error("could not read %s (%s); using defaults", path, exc)
        return Settings()


def save_settings(settings: Settings, path: Path | None = None) -> Path:
    """Write the settings atomically and durably (engine.atomic) and return the path."""
    import tomli_w

    path = path or settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(path, tomli_w.dumps(asdict(settings)))


def with_changes(settings: Settings, **changes: Any) -> Settings:
    """A validated copy with some fields changed."""
    return replace(settings, **changes)


def _toml_loads(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        data: dict[str, Any] = tomllib.loads(text)
        return data
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(str(exc)) from exc
