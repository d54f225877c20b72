"""The user's settings as one frozen dataclass, every value checked when it is made (a bad one
raises ValueError with a message to show); `app.settings_file` reads and writes it. Import
both through `app.settings`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from app.profiles import check_profiles
from engine.dictation.rules import parse_rules
from engine.languages import LANGUAGES, parse_languages
from engine.polish.guard import PRESET_NAMES
from engine.vocabulary import parse as parse_vocabulary

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
ENGINE_FIELDS = ("backend", "remote_url", "model", "device", "compute_type",
                 "listen_mode",
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


def with_changes(settings: Settings, **changes: Any) -> Settings:
    """A validated copy with some fields changed."""
    return replace(settings, **changes)
