"""Settings (TOML, versioned, migrated), API keys in the keyring, hotkey logic, and the
no-display behaviour of the app entry point. None of these need a display."""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.hotkeys import PRESS, RELEASE, HotkeyMachine
from app.settings import (
    SETTINGS_VERSION,
    Settings,
    SettingsFileError,
    from_mapping,
    from_mapping_report,
    load_settings,
    migrate,
    read_settings,
    save_settings,
    settings_path,
    with_changes,
)
from app.settings_file import _toml_loads
from engine.atomic import OutputWriteError  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def test_first_run_uses_defaults_and_writes_nothing():
    settings = load_settings()
    assert settings == Settings()
    assert settings.model == "tiny.en" and settings.device == "auto"
    assert settings.first_run_hint
    assert not settings_path().exists()  # created on first save only


def test_save_and_load_round_trip(tmp_path):
    settings = with_changes(Settings(), backend="remote", remote_url="wss://example.org/asr",
                            language="de", hotkey_mode="toggle", caption_lines=3,
                            first_run_hint=False)
    path = save_settings(settings)
    assert path == settings_path() and path.is_file()
    text = path.read_text()
    assert f"version = {SETTINGS_VERSION}" in text and "api" not in text.lower()
    assert load_settings() == settings
    assert list(path.parent.glob(".settings-*")) == []  # no temp file left behind


def test_version_1_file_is_migrated():
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text('ptt_hotkey = "<ctrl>+<shift>+d"\npaste = false\nmodel = "base"\n')
    settings = load_settings()
    assert settings.hotkey == "<ctrl>+<shift>+d"
    assert settings.inject_mode == "type"
    assert settings.model == "base" and settings.version == SETTINGS_VERSION
    assert migrate({"version": 3, "model": "x"}) == {"version": 4, "model": "x"}
    assert migrate({"version": 4, "model": "x"}) == {"version": 4, "model": "x"}


def test_version_2_file_gets_the_dictation_defaults():
    """Version 3 added the dictation settings: a version 2 file keeps every value it had and
    each new setting takes its default."""
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text('version = 2\nhotkey = "<ctrl>+<shift>+d"\ninject_mode = "type"\n'
                    'caption_lines = 3\n')
    loaded = read_settings()
    assert loaded.problems == ()
    s = loaded.settings
    assert (s.version, s.hotkey, s.inject_mode, s.caption_lines) == (
        SETTINGS_VERSION, "<ctrl>+<shift>+d", "type", 3)
    defaults = Settings()
    for name in ("text_style", "vocabulary", "replacements", "spoken_commands",
                 "paste_last_hotkey", "sounds", "sound_volume", "auto_stop_s", "app_profiles"):
        assert getattr(s, name) == getattr(defaults, name)
    assert (s.text_style, s.spoken_commands, s.auto_stop_s) == ("sentence", True, 2.0)
    save_settings(s)
    assert read_settings().settings == s  # and it round-trips as version 3


def test_version_3_file_gets_the_device_model_and_language_defaults():
    """Version 4 added the microphone by name, local model folders, the languages spoken and
    their hotkey: a version 3 file keeps what it had, records from the system default and
    detects any language."""
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text('version = 3\nmodel = "base"\nlanguage = "de"\nhotkey = "<ctrl>+<alt>+d"\n'
                    'text_style = "chat"\n')
    loaded = read_settings()
    assert loaded.problems == ()
    s = loaded.settings
    assert (s.version, s.model, s.language, s.hotkey, s.text_style) == (
        4, "base", "de", "<ctrl>+<alt>+d", "chat")
    assert (s.input_device, s.model_dirs, s.languages, s.language_hotkey) == ("", "", "", "")
    save_settings(with_changes(s, input_device="VirtualMic2", languages="en, fr",
                               language_hotkey="<ctrl>+<alt>+j"))
    again = read_settings()
    assert again.problems == ()
    assert (again.settings.input_device, again.settings.languages) == ("VirtualMic2", "en, fr")


def test_version_4_values_are_checked_one_by_one():
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text('version = 4\nlanguages = "en, xx"\nlanguage = "klingon"\n'
                    'input_device = "USB Headset"\n')
    loaded = read_settings()
    s = loaded.settings
    assert (s.languages, s.language, s.input_device) == ("", "", "USB Headset")
    assert any("languages" in p and "unknown language code 'xx'" in p for p in loaded.problems)
    assert any(p.startswith("language = 'klingon'") for p in loaded.problems)


def test_dictation_settings_round_trip_and_are_checked():
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text('version = 3\nvocabulary = """\nConcord\nKubernetes\n[medical]\n'
                    'tachycardia\n"""\nauto_stop_s = 3\nsound_volume = 140\n'
                    'text_style = "chat"\n')
    loaded = read_settings()
    s = loaded.settings
    assert s.vocabulary.split() == ["Concord", "Kubernetes", "[medical]", "tachycardia"]
    assert s.auto_stop_s == 3 and s.text_style == "chat"
    assert s.sound_volume == Settings().sound_volume  # 140 is refused, and said so
    assert any(p.startswith("sound_volume = 140") for p in loaded.problems)


def test_newer_or_broken_files_fall_back_to_defaults(caplog):
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text("version = 99\n")
    assert load_settings() == Settings()
    path.write_text("this is [not toml")
    assert load_settings() == Settings()
    assert "using defaults" in caplog.text
    assert path.read_text() == "this is [not toml"  # left for the user to inspect


def test_unknown_keys_are_dropped(caplog):
    settings = from_mapping({"version": 2, "model": "base", "colour": "red"})
    assert settings.model == "base"
    assert "colour" in caplog.text


@pytest.mark.parametrize("changes", [
    {"backend": "cloud"}, {"device": "tpu"}, {"hotkey_mode": "tap"}, {"inject_mode": "x"},
    {"paste_keys": "ctrl+p"}, {"listen_mode": "x"}, {"model": " "}, {"language": "e1"},
    {"backend": "remote", "remote_url": "http://x"}, {"caption_lines": 11}, {"caption_source": "radio"}, {"caption_opacity": 101},
    {"caption_font_pt": 2}, {"hotkey": ""}, {"version": 1}, {"compute_type": "int4"},
])
def test_invalid_settings_are_rejected(changes):
    with pytest.raises(ValueError):
        with_changes(Settings(), **changes)


def test_hold_mode_talks_while_the_chord_is_held():
    machine = HotkeyMachine(["ctrl", "alt", "space"], "hold")
    assert machine.key_down("ctrl") is None
    assert machine.key_down("alt") is None
    assert machine.key_down("space") == PRESS
    assert machine.key_down("space") is None  # auto-repeat
    assert machine.key_down("x") is None
    assert machine.key_up("x") is None
    assert machine.key_up("space") == RELEASE
    assert machine.key_up("alt") is None
    assert machine.key_up("ctrl") is None
    assert not machine.talking


def test_toggle_mode_flips_on_each_full_press():
    machine = HotkeyMachine(["ctrl", "space"], "toggle")
    machine.key_down("ctrl")
    assert machine.key_down("space") == PRESS
    assert machine.key_up("space") is None
    assert machine.key_down("space") == RELEASE
    assert machine.key_up("space") is None
    assert machine.key_up("ctrl") is None
    assert machine.key_down("space") is None  # ctrl no longer held
    assert machine.reset() is None


def test_hotkey_reset_ends_talking_in_hold_mode():
    machine = HotkeyMachine(["f9"], "hold")
    assert machine.key_down("f9") == PRESS
    assert machine.reset() == RELEASE
    with pytest.raises(ValueError):
        HotkeyMachine([], "hold")
    with pytest.raises(ValueError):
        HotkeyMachine(["a"], "double")


def test_api_key_lives_in_the_keyring_only():
    from engine.remote import secrets

    try:
        secrets.load_api_key("ws://probe")
    except secrets.KeyringUnavailableError:
        pytest.skip("no keyring backend in this session (CI unlocks gnome-keyring)")
    url = f"ws://test-{os.getpid()}:8765"
    secrets.store_api_key(url, "s3cret-key")
    try:
        assert secrets.load_api_key(url) == "s3cret-key"
        assert "keyring" in secrets.keyring_status()
    finally:
        assert secrets.delete_api_key(url)
    assert secrets.load_api_key(url) is None
    assert not secrets.delete_api_key(url)
    assert not settings_path().exists()


def test_no_keyring_backend_gives_a_clear_message_and_stores_nothing():
    import keyring
    from keyring.backends import fail

    from engine.remote import secrets

    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        with pytest.raises(secrets.KeyringUnavailableError, match="No system keyring"):
            secrets.store_api_key("ws://x", "key")
        with pytest.raises(secrets.KeyringUnavailableError):
            secrets.load_api_key("ws://x")
        assert "No system keyring" in secrets.keyring_status()
    finally:
        keyring.set_keyring(previous)


def test_app_without_a_display_points_to_transcribe():
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    result = subprocess.run([sys.executable, "-m", "app.cli"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "no display" in result.stderr and "sottovoce transcribe" in result.stderr


def test_control_command_without_a_running_app_fails_cleanly(tmp_path, monkeypatch):
    monkeypatch.setenv("SOTTOVOCE_CONTROL_SOCKET", str(tmp_path / "none.sock"))
    env = dict(os.environ)
    result = subprocess.run([sys.executable, "-m", "app.cli", "ptt", "press"], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "not running" in result.stderr


def test_hotkey_support_by_session_type():
    from app.hotkeys import session_supports_global_hotkeys

    assert session_supports_global_hotkeys({"DISPLAY": ":0"}) == (True, "")
    ok, note = session_supports_global_hotkeys({"WAYLAND_DISPLAY": "wayland-0"})
    assert not ok and "sottovoce ptt press" in note
    ok, note = session_supports_global_hotkeys({"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"})
    assert ok and "X11 apps" in note
    if sys.platform.startswith("linux"):
        assert not session_supports_global_hotkeys({})[0]


def test_engine_factory_builds_real_engines_without_starting_them(jfk_wav):
    from app.engine_factory import AppEngine, EngineConfig, make_engine
    from engine.live import LocalLiveEngine
    from engine.remote.client import RemoteLiveEngine

    events: list[object] = []
    local = make_engine(EngineConfig(mode="vad", input_path=jfk_wav), events.append)
    assert isinstance(local, AppEngine) and isinstance(local.engine, LocalLiveEngine)
    remote = make_engine(EngineConfig(backend="remote", remote_url="ws://127.0.0.1:9",
                                      mode="ptt"), events.append)
    assert isinstance(remote, AppEngine) and isinstance(remote.engine, RemoteLiveEngine)
    assert remote.engine.options.mode == "ptt"
    assert events == []  # construction does no work and emits nothing
    with pytest.raises(ValueError):
        EngineConfig(mode="always")


@pytest.mark.model  # the runners load tiny.en to say what compute type they run
def test_the_compute_type_setting_reaches_dictation_captions_and_files(jfk_wav):
    """Settings > Models' compute type is what the live engine, the caption engine and a file
    import load the model with; "auto" is the one measured best for this processor."""
    from app.caption_wiring import caption_config
    from app.captions import caption_engine
    from app.engine_factory import EngineConfig, make_engine
    from app.import_flow import ImportFlow
    from engine.compute_choice import default_cpu_compute_type

    measured = default_cpu_compute_type()[0]
    override = "float32" if measured != "float32" else "int8"
    for setting, expected in (("auto", measured), (override, override)):
        s = with_changes(Settings(), device="cpu", compute_type=setting)
        live = make_engine(EngineConfig(mode="vad", input_path=jfk_wav, device="cpu",
                                        compute_type=s.compute_type), [].append)
        _, captions = caption_engine(caption_config(s, "tiny.en", None, ()), [].append)
        flow = SimpleNamespace(_settings=lambda s=s: s)
        files = ImportFlow._local_runner(flow, "tiny.en", "cpu")  # type: ignore[arg-type]
        assert captions is not None
        for runner in (live._runner, captions, files):
            runner.load()
            assert runner.info.compute_type == expected, (setting, runner)


# --- wrong-typed values and files the app could not read (issue 15, item 2) --------------------

def test_a_wrong_typed_value_falls_back_alone_with_a_problem():
    """The issue's repro: `model = 5` made the app exit with AttributeError."""
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text('model = 5\nversion = 2\nlanguage = "de"\ncaption_lines = "3"\n'
                    'first_run_hint = "no"\ncaption_font_pt = true\nbackend = "remote"\n'
                    'remote_url = "http://not-ws"\nhotkey = "<ctrl>+x"\n')
    loaded = read_settings()
    assert loaded.settings == with_changes(Settings(), language="de", hotkey="<ctrl>+x",
                                           remote_url="http://not-ws")  # valid while local
    assert not loaded.newer
    bad = sorted(problem.split(" ")[0] for problem in loaded.problems)
    assert bad == ["backend", "caption_font_pt", "caption_lines", "first_run_hint", "model"]
    assert any(p == "model = 5 is invalid (expected text); using 'tiny.en'"
               for p in loaded.problems)
    assert load_settings() == loaded.settings  # the old entry point no longer raises


def test_saving_over_a_damaged_file_keeps_it_as_bad():
    """Dismissing the first-run hint saves: it must not silently replace a broken file."""
    path = settings_path()
    path.parent.mkdir(parents=True)
    for broken in ("this is [not toml", 'model = 5\n', b"\xff\xfe".decode("latin-1")):
        path.write_text(broken)
        save_settings(with_changes(load_settings(), first_run_hint=False))
        assert load_settings() == with_changes(Settings(), first_run_hint=False)
    kept = sorted(p.name for p in path.parent.glob("settings.toml.bad*"))
    assert kept == ["settings.toml.bad", "settings.toml.bad.2", "settings.toml.bad.3"]
    assert (path.parent / "settings.toml.bad").read_text() == "this is [not toml"
    save_settings(Settings())  # a clean file is simply replaced, no new copy
    assert len(list(path.parent.glob("settings.toml.bad*"))) == 3


def test_saving_refuses_to_overwrite_a_newer_file():
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text('version = 99\nmodel = "large-v9"\n')
    loaded = read_settings()
    assert loaded.newer and loaded.settings == Settings()
    with pytest.raises(SettingsFileError, match="newer Sottovoce"):
        save_settings(with_changes(loaded.settings, first_run_hint=False))
    assert path.read_text() == 'version = 99\nmodel = "large-v9"\n'
    assert isinstance(SettingsFileError("x"), OutputWriteError)  # the controller shows these


@pytest.mark.skipif(os.name != "posix", reason="Unix permissions")
def test_settings_file_is_private():
    path = save_settings(Settings())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    os.chmod(path, 0o644)
    os.chmod(path.parent, 0o755)
    save_settings(Settings())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


_TOML_VALUES = st.one_of(
    st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False),
    st.text(max_size=12), st.sampled_from(["remote", "ws://h:1", "cuda", "toggle", "type", "de"]),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(),
                                                         max_size=2))


@hypothesis.settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([f.name for f in dataclasses.fields(Settings)]
                                       + ["ptt_hotkey", "paste", "colour"]),
                       _TOML_VALUES, max_size=8))
def test_any_table_loads_to_valid_settings_key_by_key(table):
    table = {k: v for k, v in table.items() if k != "version"}  # versions: tested above
    try:
        loaded_settings, problems = from_mapping_report(table)
    except ValueError:
        pytest.fail("only a newer version may refuse a table")
    defaults = Settings()
    migrated = migrate(table)
    for field in dataclasses.fields(Settings):
        value = getattr(loaded_settings, field.name)
        if field.name in migrated and value != migrated[field.name]:
            assert value == getattr(defaults, field.name)  # fell back, and said so
            assert any(p.startswith(f"{field.name} = ") for p in problems)
    import tomli_w
    text = tomli_w.dumps(dataclasses.asdict(loaded_settings))  # whatever loads, saves
    assert from_mapping_report(_toml_loads(text)) == (loaded_settings, [])
