"""Per-application profiles (app.profiles): the parser, its line-numbered errors, the lookup by
window class, the settings check, and reading the focused window's class on the real X server."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from app.profiles import (
    NO_PROFILE,
    AppProfile,
    ProfileError,
    dictation_target,
    parse_profiles,
    profile_for,
    vocabulary_sets,
    vocabulary_terms,
)
from app.settings import Settings, from_mapping_report

PROFILES = """\
# chat apps: no trailing period
Slack: style=chat
xterm: insert=type, commands=off

code: vocabulary=work, insert=paste
"""
VOCABULARY = "Sottovoce\n[work]\nKubernetes\n[ home ]\nConcord\n"


def test_vocabulary_sets_are_the_header_lines() -> None:
    assert vocabulary_sets(VOCABULARY) == ("work", "home")
    assert vocabulary_sets("") == ()


def test_vocabulary_terms_are_the_default_set_plus_the_named_one() -> None:
    text = "Sottovoce\n\n[work]\nKubernetes\nSottovoce\n[ home ]\nConcord\n"
    assert vocabulary_terms(text) == ("Sottovoce",)
    assert vocabulary_terms(text, "WORK") == ("Sottovoce", "Kubernetes")
    assert vocabulary_terms(text, "home") == ("Sottovoce", "Concord")
    assert vocabulary_terms("", "work") == ()


def test_profiles_parse_by_window_class() -> None:
    profiles = parse_profiles(PROFILES, vocabulary_sets(VOCABULARY))
    assert profiles == {
        "slack": AppProfile("Slack", style="chat"),
        "xterm": AppProfile("xterm", insert="type", commands=False),
        "code": AppProfile("code", insert="paste", vocabulary="work"),
    }


@pytest.mark.parametrize(("text", "message"), [
    ("slack style=chat", "line 1: expected '<window class>: key=value, ...'"),
    ("# c\nslack: style=fancy", "line 2: style must be one of sentence, chat (got 'fancy')"),
    ("slack: insert=shout", "line 1: insert must be one of paste, type, off"),
    ("slack: commands=maybe", "line 1: commands must be one of on, off"),
    ("slack: colour=red", "line 1: unknown key 'colour' (use insert, style, vocabulary, commands, polish)"),
    ("slack: style", "line 1: expected key=value (got 'style')"),
    ("slack:", "line 1: 'slack' sets nothing"),
    ("slack: style=chat, style=sentence", "line 1: style is given twice"),
    ("slack: style=chat\n\nSLACK: insert=type", "line 3: 'SLACK' already has a line above"),
    ("code: vocabulary=play", "line 1: no vocabulary set named 'play' (sets: home, work)"),
])
def test_bad_lines_are_refused_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(ProfileError, match=re.escape("app profiles " + message)):
        parse_profiles(text, vocabulary_sets(VOCABULARY))


def test_settings_refuse_a_bad_profile_and_a_bad_file_falls_back() -> None:
    ok = Settings(app_profiles=PROFILES, vocabulary=VOCABULARY)
    assert ok.app_profiles == PROFILES
    with pytest.raises(ValueError, match="app profiles line 1: no vocabulary set named 'work'"):
        Settings(app_profiles="code: vocabulary=work")
    loaded, problems = from_mapping_report({"version": 3, "app_profiles": "slack: style=loud"})
    assert loaded.app_profiles == ""
    assert problems == ["app_profiles = 'slack: style=loud' is invalid (app profiles line 1: "
                        "style must be one of sentence, chat (got 'loud')); using ''"]


def test_lookup_matches_either_half_of_wm_class_case_insensitively() -> None:
    assert profile_for(("xterm", "XTerm"), PROFILES).insert == "type"
    assert profile_for(("slack", "Slack"), PROFILES).style == "chat"
    assert profile_for(("Navigator", "firefox"), PROFILES) is NO_PROFILE
    assert profile_for(None, PROFILES) is NO_PROFILE  # Wayland, no X: global settings
    assert profile_for(("xterm", "XTerm"), "") is NO_PROFILE


def test_target_falls_back_to_the_global_settings_key_by_key() -> None:
    xterm = dictation_target(profile_for("xterm", PROFILES), "paste", "sentence", True)
    assert (xterm.insert, xterm.style, xterm.commands, xterm.vocabulary) == (
        "type", "sentence", False, None)
    none = dictation_target(NO_PROFILE, "off", "chat", True, "gedit")
    assert (none.window_class, none.insert, none.style, none.commands) == (
        "gedit", "off", "chat", True)


@pytest.mark.skipif(not os.environ.get("DISPLAY") or shutil.which("xdotool") is None,
                    reason="needs an X display (xvfb-run) and xdotool")
def test_focused_window_class_is_read_from_the_x_server(qtbot) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QWidget

    from app.focus import focused_window_class

    window = QWidget()
    qtbot.addWidget(window)
    window.setWindowTitle("target")
    window.show()
    qtbot.waitExposed(window)
    wid = str(int(window.winId()))
    subprocess.run(["xdotool", "windowfocus", "--sync", wid], check=True, timeout=10)
    expected = subprocess.run(["xprop", "-id", wid, "WM_CLASS"], capture_output=True, text=True,
                              check=True, timeout=10).stdout  # WM_CLASS(STRING) = "a", "b"
    names = tuple(part.strip().strip('"') for part in expected.split("=", 1)[1].split(","))
    assert focused_window_class() == names
    assert names and all(names)


def test_no_display_reads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.focus import focused_window_class

    monkeypatch.delenv("DISPLAY", raising=False)
    assert focused_window_class() is None
    monkeypatch.setenv("DISPLAY", ":4242")  # no such server
    assert focused_window_class() is None
