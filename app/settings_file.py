"""The settings file: TOML in the config dir, versioned and migrated (see `app.settings`)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from app.settings_model import (
    FILE_NAME,
    MAX_QUOTED_CHARS,
    MAX_SETTINGS_BYTES,
    SETTINGS_VERSION,
    Settings,
)
from engine.atomic import OutputWriteError, atomic_write_text, private_dir
from engine.core.hotwords import MAX_TERMS
from engine.paths import config_dir
from engine.vocabulary import keep_first as keep_first_terms

log = logging.getLogger(__name__)


def settings_path() -> Path:
    return config_dir() / FILE_NAME


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Bring a settings table of any earlier version up to SETTINGS_VERSION.

    Version 1 (no "version" key counts as 1) had `ptt_hotkey` and a boolean `paste`; version 2
    renamed them to `hotkey` and `inject_mode`. Version 3 added the dictation settings (text
    style, vocabulary, replacements, spoken commands, paste-last hotkey, sounds, auto-stop,
    per-application profiles); a version 2 file gets their defaults. Version 4 added the
    microphone by name, local model folders, the languages spoken and their hotkey (new keys
    only: a version 3 file keeps the system default microphone and every language).
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
    if version < 4:
        version = 4  # versions 3 and 4 only added keys: each takes its default
    data["version"] = version
    return data


class SettingsFileError(OutputWriteError):
    """The settings file is from a newer Sottovoce: saving would lose what it holds."""


@dataclass(frozen=True)
class SettingsLoad:
    """What loading found: the settings to use and each problem, in words.

    ``newer``: the file is from a newer version (defaults are used and saving refuses);
    ``damaged``: a file exists but was not fully usable (saving keeps a ``.bad`` copy first).
    """

    settings: Settings
    problems: tuple[str, ...] = ()
    newer: bool = False

    @property
    def damaged(self) -> bool:
        return bool(self.problems)


def from_mapping(data: dict[str, Any]) -> Settings:
    """Build Settings from a parsed TOML table: migrated, unknown keys dropped with a warning,
    each invalid value replaced by its default (see `from_mapping_report`)."""
    settings, problems = from_mapping_report(data)
    for problem in problems:
        log.warning("settings: %s", problem)
    return settings


def from_mapping_report(data: dict[str, Any]) -> tuple[Settings, list[str]]:
    """Settings from a parsed table and the problems found, one per bad key. Raises ValueError
    only for a file from a newer version (nothing in it can be trusted to mean the same)."""
    data = migrate(data)
    known = {f.name: f for f in fields(Settings)}
    problems = []
    unknown = sorted(set(data) - set(known))
    if unknown:
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        names = ", ".join(quoted(name, str, 40) for name in unknown[:10])
        problems.append(f"ignoring unknown settings: {names}{more}")
    settings = Settings()
    # remote_url before backend: "remote" is only valid once the URL is in.
    for name in sorted((k for k in data if k in known), key=lambda k: k != "remote_url"):
        value = data[name]
        default = known[name].default
        if name == "vocabulary" and isinstance(value, str):
            value, dropped = keep_first_terms(value)
            if dropped:
                problems.append(_dropped_terms(dropped))
        problem = _type_problem(value, default)
        if problem is None:
            try:
                settings = replace(settings, **{name: value})
                continue
            except (ValueError, TypeError, OverflowError, RecursionError) as exc:
                problem = str(exc) or type(exc).__name__  # a value the app cannot use
        problems.append(f"{name} = {quoted(value)} is invalid ({quoted(problem, str)}); "
                        f"using {default!r}")
    return settings, problems


def _dropped_terms(dropped: tuple[str, ...]) -> str:
    named = ", ".join(quoted(term) for term in dropped[:5])
    more = f" and {len(dropped) - 5} more" if len(dropped) > 5 else ""
    return (f"vocabulary: more than {MAX_TERMS} entries; kept the first {MAX_TERMS}, dropped "
            f"{named}{more}")


def quoted(value: object, show: Callable[[object], str] = repr,
           limit: int = MAX_QUOTED_CHARS) -> str:
    """``value`` as a message shows it, cut to about ``limit`` characters: a huge value in a
    settings file must not make a huge message."""
    text = show(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def _type_problem(value: object, default: object) -> str | None:
    # bool is an int to Python, so check it first, both ways.
    if isinstance(default, bool) or isinstance(value, bool):
        ok = isinstance(value, bool) and isinstance(default, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float))  # TOML writes 2.0, a person may write 2
    else:
        ok = isinstance(value, type(default))
    expected = {bool: "true or false", int: "a whole number", float: "a number",
                str: "text"}[type(default)]
    return None if ok else f"expected {expected}"


def read_settings(path: Path | None = None) -> SettingsLoad:
    """The saved settings with every problem found; defaults when there is no file yet."""
    path = path or settings_path()
    if not path.is_file():
        return SettingsLoad(Settings())
    try:
        data = _toml_loads(_read_capped(path))
    except (OSError, ValueError, RecursionError) as exc:  # a UnicodeDecodeError is a ValueError;
        # tomllib recurses into nested arrays and tables
        return SettingsLoad(Settings(), (f"could not read {path} ({quoted(exc, str)}); "
                                         "using defaults",))
    try:
        settings, problems = from_mapping_report(data)
    except (ValueError, TypeError, OverflowError) as exc:  # a newer version, or a version
        # that is not a number (``inf`` too)
        return SettingsLoad(Settings(), (f"{path}: {exc}; using defaults",),
                            newer=_is_newer(data))
    return SettingsLoad(settings, tuple(problems))


def _read_capped(path: Path) -> str:
    """The file's text; ValueError past MAX_SETTINGS_BYTES (no settings file is that big, and
    reading one whole would hold the app up and its messages would quote it)."""
    with path.open("rb") as file:
        data = file.read(MAX_SETTINGS_BYTES + 1)
    if len(data) > MAX_SETTINGS_BYTES:
        size = path.stat().st_size
        raise ValueError(f"the file is {size / 1e6:.1f} MB; a settings file is at most "
                         f"{MAX_SETTINGS_BYTES // 1_000_000} MB")
    return data.decode("utf-8")


def _is_newer(data: dict[str, Any]) -> bool:
    version = data.get("version")
    return isinstance(version, int) and version > SETTINGS_VERSION


def load_settings(path: Path | None = None) -> Settings:
    """The saved settings, or defaults when there is no file yet. Problems are logged; the file
    itself is left alone for the user to inspect."""
    loaded = read_settings(path)
    for problem in loaded.problems:
        log.error("settings: %s", problem)
    return loaded.settings


def save_settings(settings: Settings, path: Path | None = None) -> Path:
    """Write the settings atomically and durably (engine.atomic) and return the path.

    A file the app could not fully read is kept as ``<name>.bad`` first; a file from a newer
    version raises SettingsFileError and is left as it is.
    """
    import tomli_w

    path = path or settings_path()
    existing = read_settings(path)
    if existing.newer:
        raise SettingsFileError(f"{path} is from a newer Sottovoce; not overwriting it "
                                "(these settings last until the app quits)")
    private_dir(path.parent)
    if existing.damaged:
        backup = _keep_bad_copy(path)
        log.warning("settings: kept the file the app could not fully read as %s", backup)
    return atomic_write_text(path, tomli_w.dumps(asdict(settings)), private=True)


def set_aside(loaded: SettingsLoad, path: Path | None = None) -> Path | None:
    """At start: a file the app could not fully use (not one from a newer version) is kept as
    ``<name>.bad`` and the settings the app uses are saved in its place, so its problems are
    reported once and nothing in it is lost. Returns the kept copy (None: nothing to do);
    raises OutputWriteError when it cannot be done (the app still starts)."""
    path = path or settings_path()
    if not loaded.damaged or loaded.newer or not path.is_file():
        return None
    backup = _keep_bad_copy(path)
    save_settings(loaded.settings, path)
    return backup


def _keep_bad_copy(path: Path) -> Path:
    """Rename ``path`` to ``<name>.bad`` (``.bad.2``, ... when that exists): never lose one."""
    backup = path.with_name(path.name + ".bad")
    number = 1
    while backup.exists():
        number += 1
        backup = path.with_name(f"{path.name}.bad.{number}")
    try:
        os.replace(path, backup)
    except OSError as exc:
        raise OutputWriteError(f"{path}: could not keep the unreadable file as {backup} "
                               f"({exc.strerror or exc}); not overwriting it") from exc
    return backup


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
