"""User settings: one frozen dataclass, stored as TOML in the config dir, versioned and migrated.

Loading never writes: a first run works on defaults and the file appears on the first save.
Secrets (the remote API key) are never stored here; see engine.remote.secrets.

A bad value (wrong type, out of range) falls back to its default alone, and the problem is
reported (`read_settings().problems`: the app shows it, `sottovoce doctor` lists it). Saving never
destroys a file the app could not fully read: a damaged one is kept as ``settings.toml.bad``
first, and one from a newer Sottovoce is not overwritten at all (`SettingsFileError`). The app
does that at start (`set_aside`), so a file it cannot use is reported once and never stops it:
any value that fails to validate (a ValueError, or an OverflowError or RecursionError from a
replacement rule's expression) only costs that value.
The file is private to the user (0600 in a 0700 folder).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from app.profiles import check_profiles
from engine.atomic import OutputWriteError, atomic_write_text, private_dir
from engine.core.hotwords import MAX_TERMS
from engine.dictation.rules import parse_rules
from engine.languages import LANGUAGES, parse_languages
from engine.paths import config_dir
from engine.polish.guard import PRESET_NAMES
from engine.vocabulary import keep_first as keep_first_terms
from engine.vocabulary import parse as parse_vocabulary

log = logging.getLogger(__name__)

SETTINGS_VERSION = 4
FILE_NAME = "settings.toml"
BACKENDS = ("local", "remote")
DEVICES = ("auto", "cpu", "cuda")
# CTranslate2's compute types; "auto" is the one measured best for this processor's kernels
# (engine.compute_choice) on the CPU, float16 on CUDA.
COMPUTE_TYPES = ("auto", "int8", "int8_float32", "int16", "float32", "float16", "int8_float16",
                 "bfloat16", "int8_bfloat16")
HOTKEY_MODES = ("hold", "toggle")
INJECT_MODES = ("paste", "type", "off")
PASTE_KEYS = ("ctrl+v", "shift+insert")
LISTEN_MODES = ("dictation", "captions")
TEXT_STYLES = ("sentence", "chat")
# Native protocol over ws/wss; whisperlive:// talks to a WhisperLive server (engine.remote).
REMOTE_SCHEMES = ("ws://", "wss://", "whisperlive://")
# Changing one of these rebuilds the live engine (the model reloads); the others apply at once.
ENGINE_FIELDS = ("backend", "remote_url", "model", "device", "compute_type", "listen_mode",
                 "caption_source", "caption_app", "caption_you", "caption_them",
                 "caption_translate", "caption_mask_profanity")
CAPTION_SOURCES = ("mic", "system", "app", "both")
CAPTION_TRANSLATE = ("off", "below", "alone")
CAPTION_BACKGROUNDS = ("box", "outline")
CAPTION_DOCKS = ("bottom", "top", "floating")
MAX_CAPTION_LINES = 10
MAX_SETTINGS_BYTES = 1_000_000  # the largest vocabulary, rules and profiles fit many times over
MAX_QUOTED_CHARS = 120  # of a value quoted in a message


@dataclass(frozen=True)
class Settings:
    """Everything the user can change in the settings dialog.

    Attributes:
      backend: "local" (faster-whisper here) or "remote" (a WebSocket server at remote_url).
      model: model name or directory for the local backend ("tiny.en" is bundled).
      device: "auto" picks CUDA when present, else CPU.
      compute_type: CTranslate2's ("auto": measured best for this processor; see COMPUTE_TYPES).
      language: ISO code, or "" to detect (English-only models ignore it).
      listen_mode: "dictation" (push-to-talk, text typed into the focused app) or "captions"
        (continuous, voice activity decides).
      hotkey: pynput hotkey syntax; hotkey_mode "hold" (talk while held) or "toggle".
      inject_mode: "paste" (clipboard + paste keys, clipboard restored), "type", or "off".
      caption_lines: how many lines the caption window shows (1-10).
      first_run_hint: show the first-run hint; cleared once the user has seen it and saved.

    Dictation (version 3):
      text_style: "sentence" (Whisper's case and punctuation, sentence case across utterances)
        or "chat" (starts lowercase, no trailing period: chat-style fields).
      vocabulary: words and phrases that bias decoding, one per line; a ``[name]`` line starts a
        named set (lines before any header are the default set, always used).
      replacements: replacement rules, one per line (plain text, the import/export format).
      spoken_commands: "new line", "comma", "scratch that", ... are acted on, not typed.
      paste_last_hotkey: re-inserts the last final text ("" turns it off).
      sounds, sound_volume: start/stop cues on the output device (volume 0-100).
      auto_stop_s: hands-free (toggle mode) recording stops after this much silence (0: never).
      app_profiles: per-application behaviour, one line per window class (see app.profiles).
      allow_ydotool: on Wayland, let ydotool (uinput, needs its root daemon) send keys when no
        other route works; off unless the user turns it on.

    Devices, models and languages (version 4):
      input_device: the microphone, remembered by its name ("" : the system default); when it
        is not there the default is used, and it is followed again when it comes back.
      model_dirs: local CTranslate2 model folders the user added, one per line.
      languages: the languages the user speaks, comma-separated codes ("en, fr"); auto-detect
        (``language`` "") chooses among these only. "" : any language.
      language_hotkey: cycles the current language through auto-detect and ``languages``
        ("" : off; the tray menu does the same).

    Captions (new keys, defaults for older files):
      caption_source: "mic", "system" (what the computer plays), "app" (caption_app's sound)
        or "both" (the mic labelled caption_you, the system caption_them).
      caption_translate: "off", "below" (English under each line) or "alone" (English only).
      caption_font_family ("" default sans), caption_background "box" or "outline",
      caption_opacity (the box's, 0-100), caption_dock "bottom", "top" or "floating",
      caption_click_through, caption_mask_profanity (off by default).

    AI polish (optional, off by default; engine.polish, app.polish). No new version: a file
    without these keys gets their defaults.
      polish: pass each dictated final through the LLM server before it is inserted.
      polish_url, polish_model: an OpenAI-compatible API root (".../v1") and model name; the
        API key, when the server needs one, is in the OS keyring (engine.remote.secrets).
      polish_preset: the instruction (engine.polish.guard.PRESETS); a profile may pick another
        ("polish=email") or turn it off for one application; polish_custom: the "custom" one.
      polish_budget_s: the longest the LLM may take; past it the raw text is inserted.
      command_hotkey: hold it and say how to change the selected text ("" turns it off; it
        works only while polish is on).
    """

    version: int = SETTINGS_VERSION
    backend: str = "local"
    remote_url: str = ""
    model: str = "tiny.en"
    device: str = "auto"
    compute_type: str = "auto"
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
    # -- dictation (version 3) --
    text_style: str = "sentence"
    vocabulary: str = ""
    replacements: str = ""
    spoken_commands: bool = True
    paste_last_hotkey: str = "<ctrl>+<alt>+v"
    sounds: bool = True
    sound_volume: int = 40
    auto_stop_s: float = 2.0
    app_profiles: str = ""
    allow_ydotool: bool = False
    # -- devices, models, languages (version 4) --
    input_device: str = ""
    model_dirs: str = ""
    languages: str = ""
    language_hotkey: str = ""
    # -- captions --
    caption_source: str = "mic"
    caption_app: str = ""
    caption_you: str = "You"
    caption_them: str = "Them"
    caption_translate: str = "off"
    caption_font_family: str = ""
    caption_background: str = "box"
    caption_opacity: int = 67
    caption_dock: str = "bottom"
    caption_click_through: bool = False
    caption_mask_profanity: bool = False
    # -- AI polish --
    polish: bool = False
    polish_url: str = "http://127.0.0.1:11434/v1"
    polish_model: str = ""
    polish_preset: str = "clean"
    polish_custom: str = ""
    polish_budget_s: float = 2.0
    command_hotkey: str = "<ctrl>+<alt>+e"

    def __post_init__(self) -> None:
        _one_of("backend", self.backend, BACKENDS)
        _one_of("device", self.device, DEVICES)
        _one_of("compute_type", self.compute_type, COMPUTE_TYPES)
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
        _check_captions(self)
        if not self.hotkey.strip():
            raise ValueError("hotkey must not be empty")
        _one_of("text_style", self.text_style, TEXT_STYLES)
        if not 0 <= self.sound_volume <= 100:
            raise ValueError("sound_volume must be between 0 and 100")
        if not 0 <= self.auto_stop_s <= 60:
            raise ValueError("auto_stop_s must be between 0 and 60 seconds (0: never)")
        parse_rules(self.replacements)  # RuleError (a ValueError) names the bad line
        check_profiles(self.app_profiles, self.vocabulary)  # ProfileError names the bad line
        parse_vocabulary(self.vocabulary)  # VocabularyError (a ValueError) names the line
        parse_languages(self.languages)  # names an unknown code
        if self.language and self.language not in LANGUAGES:
            raise ValueError(f"unknown language code {self.language!r}")
        if "\n" in self.input_device:
            raise ValueError("input_device is one device name")

        _one_of("polish_preset", self.polish_preset, PRESET_NAMES)
        if not 0.2 <= self.polish_budget_s <= 30:
            raise ValueError("polish_budget_s must be between 0.2 and 30 seconds")
        if self.polish and not self.polish_url.startswith(("http://", "https://")):
            raise ValueError("the LLM server URL must start with http:// or https://")
        if self.polish_preset == "custom" and not self.polish_custom.strip():
            raise ValueError("the custom polish instruction is empty")


def _check_captions(s: Settings) -> None:
    if not 1 <= s.caption_lines <= MAX_CAPTION_LINES:
        raise ValueError(f"caption_lines must be between 1 and {MAX_CAPTION_LINES}")
    if not 8 <= s.caption_font_pt <= 96:
        raise ValueError("caption_font_pt must be between 8 and 96")
    _one_of("caption_source", s.caption_source, CAPTION_SOURCES)
    _one_of("caption_translate", s.caption_translate, CAPTION_TRANSLATE)
    _one_of("caption_background", s.caption_background, CAPTION_BACKGROUNDS)
    _one_of("caption_dock", s.caption_dock, CAPTION_DOCKS)
    if not 0 <= s.caption_opacity <= 100:
        raise ValueError("caption_opacity must be between 0 and 100")
    if s.caption_source == "app" and not s.caption_app.strip():
        raise ValueError("caption_app must name the app to caption")
    if not s.caption_you.strip() or not s.caption_them.strip() or (
            s.caption_you.strip() == s.caption_them.strip()):
        raise ValueError("caption_you and caption_them must be two different names")


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)} (got {value!r})")


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
