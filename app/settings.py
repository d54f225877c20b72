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

Two modules, one import path: `app.settings_model` holds the dataclass and its checks,
`app.settings_file` the file; everything is imported from here.
"""

from app.settings_file import (
    SettingsFileError,
    SettingsLoad,
    from_mapping,
    from_mapping_report,
    load_settings,
    migrate,
    quoted,
    read_settings,
    save_settings,
    set_aside,
    settings_path,
)
from app.settings_model import (
    BACKENDS,
    CAPTION_BACKGROUNDS,
    CAPTION_DOCKS,
    CAPTION_SOURCES,
    CAPTION_TRANSLATE,
    COMPUTE_TYPES,
    DEVICES,
    ENGINE_FIELDS,
    FILE_NAME,
    HOTKEY_MODES,
    INJECT_MODES,
    LISTEN_MODES,
    MAX_CAPTION_LINES,
    MAX_QUOTED_CHARS,
    MAX_SETTINGS_BYTES,
    PASTE_KEYS,
    REMOTE_SCHEMES,
    SETTINGS_VERSION,
    TEXT_STYLES,
    Settings,
    with_changes,
)

__all__ = [
    "BACKENDS", "CAPTION_BACKGROUNDS", "CAPTION_DOCKS", "CAPTION_SOURCES", "CAPTION_TRANSLATE",
    "COMPUTE_TYPES", "DEVICES", "ENGINE_FIELDS", "FILE_NAME", "HOTKEY_MODES", "INJECT_MODES",
    "LISTEN_MODES",
    "MAX_CAPTION_LINES", "MAX_QUOTED_CHARS", "MAX_SETTINGS_BYTES", "PASTE_KEYS",
    "REMOTE_SCHEMES", "SETTINGS_VERSION", "TEXT_STYLES", "Settings", "SettingsFileError",
    "SettingsLoad", "from_mapping", "from_mapping_report", "load_settings", "migrate", "quoted",
    "read_settings", "save_settings", "set_aside", "settings_path", "with_changes",
]
