"""Per-application behaviour: how dictated text is inserted into each application.

`Settings.app_profiles` holds one line per application, keyed by its X11 window class::

    # comments and blank lines are ignored
    slack: style=chat
    xterm: insert=type, commands=off
    code: vocabulary=work
    thunderbird: polish=email

keys: ``insert`` (paste | type | off), ``style`` (sentence | chat), ``vocabulary`` (a named set:
a ``[name]`` header in `Settings.vocabulary`), ``commands`` (on | off), ``polish`` (off | clean | message | email | list | custom: the AI
polish instruction, app.polish; it applies only while polish is on in the settings). A key left out keeps the
global setting. The class is matched case-insensitively against either half of WM_CLASS
(instance or class name: ``xterm`` and ``XTerm`` both match xterm).

`parse_profiles` raises `ProfileError` naming the line (Settings.__post_init__ calls it, so a bad
line is refused in the dialog and a bad file falls back to the default). `profile_for` is the
lookup: a small frozen `AppProfile`, all None when the application has no line (or when the
focused window's class can't be read: Wayland, no X display). Pure: no Qt, no X11 here
(app.focus reads the window class).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.polish.guard import PRESET_NAMES
from engine.vocabulary import Vocabulary, VocabularyError
from engine.vocabulary import parse as parse_vocabulary

INSERT_MODES = ("paste", "type", "off")
STYLES = ("sentence", "chat")
SWITCHES = {"on": True, "off": False}
KEYS = ("insert", "style", "vocabulary", "commands", "polish")
POLISH = ("off", *PRESET_NAMES)


class ProfileError(ValueError):
    """A profile line that can't be used; the message names the line."""


@dataclass(frozen=True)
class AppProfile:
    """What one application overrides; None keeps the global setting."""

    window_class: str | None = None
    insert: str | None = None  # "paste" | "type" | "off"
    style: str | None = None  # "sentence" | "chat"
    vocabulary: str | None = None  # a named vocabulary set
    commands: bool | None = None  # spoken commands on/off
    polish: str | None = None  # "off" or an AI polish preset


NO_PROFILE = AppProfile()


def _vocabulary(text: str) -> Vocabulary:
    try:
        return parse_vocabulary(text)
    except VocabularyError:  # Settings refuse these; a profile just finds no sets
        return Vocabulary()


def vocabulary_sets(vocabulary: str) -> tuple[str, ...]:
    """The names of the named sets in a vocabulary text (engine.vocabulary's format)."""
    return _vocabulary(vocabulary).names


def vocabulary_terms(vocabulary: str, named_set: str | None = None) -> tuple[str, ...]:
    """The words and phrases in force: the default set plus the named set, when one is given
    (matched case-insensitively); in order, without repeats."""
    parsed = _vocabulary(vocabulary)
    wanted = () if named_set is None else tuple(
        n for n in parsed.names if n.lower() == named_set.strip().lower())
    return parsed.terms(wanted)


def parse_profiles(text: str, vocabulary_names: Iterable[str] | None = None
                   ) -> dict[str, AppProfile]:
    """Profiles by lower-cased window class. ``vocabulary_names``: the named sets that exist
    (None: any name is accepted)."""
    known = None if vocabulary_names is None else {n.lower() for n in vocabulary_names}
    profiles: dict[str, AppProfile] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        profile = _parse_line(line, number, known)
        assert profile.window_class is not None
        key = profile.window_class.lower()
        if key in profiles:
            raise ProfileError(f"app profiles line {number}: {profile.window_class!r} already "
                               "has a line above")
        profiles[key] = profile
    return profiles


def _parse_line(line: str, number: int, known: set[str] | None) -> AppProfile:
    where = f"app profiles line {number}"
    name, colon, rest = line.partition(":")
    name = name.strip()
    if not colon or not name:
        raise ProfileError(f"{where}: expected '<window class>: key=value, ...' (got {line!r})")
    values: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, equals, value = (s.strip() for s in item.partition("="))
        key = key.lower()
        if not equals or not value:
            raise ProfileError(f"{where}: expected key=value (got {item!r})")
        if key not in KEYS:
            raise ProfileError(f"{where}: unknown key {key!r} (use {', '.join(KEYS)})")
        if key in values:
            raise ProfileError(f"{where}: {key} is given twice")
        values[key] = value
    if not values:
        raise ProfileError(f"{where}: {name!r} sets nothing (use {', '.join(KEYS)})")
    insert = _choice(where, "insert", values.get("insert"), INSERT_MODES)
    style = _choice(where, "style", values.get("style"), STYLES)
    commands = _choice(where, "commands", values.get("commands"), tuple(SWITCHES))
    polish = _choice(where, "polish", values.get("polish"), POLISH)
    vocabulary = values.get("vocabulary")
    if vocabulary is not None and known is not None and vocabulary.lower() not in known:
        sets = ", ".join(sorted(known)) or "none: add a [name] line to the vocabulary"
        raise ProfileError(f"{where}: no vocabulary set named {vocabulary!r} (sets: {sets})")
    return AppProfile(window_class=name, insert=insert, style=style, vocabulary=vocabulary,
                      commands=None if commands is None else SWITCHES[commands], polish=polish)


def _choice(where: str, key: str, value: str | None, allowed: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if value.lower() not in allowed:
        raise ProfileError(f"{where}: {key} must be one of {', '.join(allowed)} (got {value!r})")
    return value.lower()


def check_profiles(text: str, vocabulary: str) -> None:
    """Raise ProfileError unless every line is usable (for Settings.__post_init__)."""
    parse_profiles(text, vocabulary_sets(vocabulary))


def profile_for(window_class: tuple[str, ...] | str | None, profiles_text: str,
                vocabulary: str = "") -> AppProfile:
    """The profile for a window class (WM_CLASS: instance and class name, or one name); the
    empty NO_PROFILE when there is no line for it or the class is unknown (None)."""
    if not window_class or not profiles_text.strip():
        return NO_PROFILE
    names = (window_class,) if isinstance(window_class, str) else window_class
    profiles = parse_profiles(profiles_text, vocabulary_sets(vocabulary) if vocabulary else None)
    for name in names:
        found = profiles.get(name.lower())
        if found is not None:
            return found
    return NO_PROFILE


@dataclass(frozen=True)
class DictationTarget:
    """Where a final goes and how, with the profile applied over the global settings: what the
    text pipeline needs (style, commands) and what the injector needs (insert mode)."""

    window_class: str | None
    insert: str
    style: str
    commands: bool
    vocabulary: str | None
    polish: str = "off"  # "off" or the AI polish preset for this insertion


def dictation_target(profile: AppProfile, insert: str, style: str, commands: bool,
                     window_class: str | None = None, polish: str = "off") -> DictationTarget:
    """The profile's choices, each falling back to the global setting given (``polish``: the
    settings' preset when polish is on, else "off"; a profile cannot turn it on while the
    settings have it off)."""
    return DictationTarget(
        window_class=window_class or profile.window_class,
        insert=profile.insert or insert, style=profile.style or style,
        commands=commands if profile.commands is None else profile.commands,
        vocabulary=profile.vocabulary,
        polish="off" if polish == "off" else (profile.polish or polish))
