"""Dictation on a real Wayland compositor: headless sway (wlroots), no X display at all.

The insertion routes first, on their own (app.wayland_inject against sway and a native Wayland
Qt text field): typed text keeps its first character (the virtual keyboard's keymap trap) and
its accents, CJK and emoji, also while another keyboard holds Ctrl; a paste lands and the
user's clipboard comes back; a route that fails hands over to the next at once; with no route
the text waits on the clipboard.

Then the real app as a native Wayland client (QT_QPA_PLATFORM=wayland), as sway users run it:
the control commands a sway binding would run (`sottovoce ptt press` / `ptt release`) around a
real speech clip played into the virtual microphone; the exact text, with a replacement rule
that writes a non-ASCII word, is read back from the focused native Wayland field, in paste mode
and in type mode, and the caption window (floating, sticky) never takes the focus.

Needs sway, wtype, wl-clipboard (scripts/test installs them), PulseAudio's virtual mic
(.ci/desktop.sh). Runs as root in CI: sway itself runs as an unprivileged user (tests/support/
wayland_driver.py).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import asdict, replace

import pytest
import tomli_w
from support.desktop_driver import (
    REPO,
    TARGET_TITLE,
    start_app,
    start_monitor_reader,
)
from support.wayland_fields import client_env, field, insert, sway, wait_for_length  # noqa: F401

from app.commands import doctor
from app.desktop import DATA_CONTROL, VIRTUAL_KEYBOARD, WLROOTS, detect
from app.portal import RemoteKeyboard
from app.settings import Settings
from app.wayland_inject import (
    PortalKeys,
    WaylandInserter,
    WlClipboard,
    Wtype,
)
from bench.evaluation import error_rate
from engine.dictation.rules import apply_rules, parse_rules

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]

SPEECH = "jfk-inaugural-1961-excerpt.wav"
# A replacement rule that writes a non-ASCII character after every capitalised word: a final
# starts with a capital whatever words this processor's model writes, so the rule always acts.
RULES = "/([A-Z]\\w*)/ => \\1\u00b7"
WER_BOUND = 0.25
STARTUP_TIMEOUT_S = 120
CAPTIONS = "Sottovoce captions"


def test_the_probe_and_the_doctor_on_sway(sway, client_env) -> None:  # noqa: F811
    desktop = detect()
    assert (desktop.kind, desktop.family) == ("wayland", WLROOTS)
    assert {VIRTUAL_KEYBOARD, DATA_CONTROL} <= desktop.globals  # asked of sway itself
    hotkey, insertion = doctor.check_hotkeys(), doctor.check_insertion()
    captions = doctor.check_captions()
    print(doctor.format_report([hotkey, insertion, captions]))
    assert captions.status == doctor.OK and "never focused" in captions.detail
    assert hotkey.status == doctor.WARN and "bindsym --release Ctrl+Mod1+space exec" in hotkey.hint
    assert insertion.status == doctor.OK
    assert insertion.detail.startswith("virtual keyboard (wtype): keys via wtype")


def test_typed_text_keeps_its_first_character_and_its_non_ascii(sway, field) -> None:  # noqa: F811
    target, out = field
    text = "Héllo, Wayland: 東京 🎉 ça va."
    inserter = WaylandInserter([Wtype()], WlClipboard())
    inserter.start()
    # The hotkey's Ctrl still held on another keyboard must not turn the text into shortcuts.
    holder = subprocess.Popen(["wtype", "-M", "ctrl", "-s", "60000"])
    try:
        ok, message = insert(inserter, text, "type")
        wait_for_length(target, len(text))
    finally:
        holder.kill()
        holder.wait(10)
        inserter.stop()
    assert ok, message
    assert out.read_text(encoding="utf-8") == text
    assert message == f"Typed {len(text)} characters (Wayland, wtype)"
    assert sway.focused_title() == TARGET_TITLE


def test_paste_lands_and_the_users_clipboard_comes_back(sway, field) -> None:  # noqa: F811
    target, out = field
    clipboard = WlClipboard()
    clipboard.write_text("the user's own clip ✓")
    text = "Café au lait, 東京 🎉."
    inserter = WaylandInserter([Wtype()], clipboard, restore_delay_s=0.6)
    inserter.start()
    try:
        ok, message = insert(inserter, text, "paste")
        wait_for_length(target, len(text))
    finally:
        inserter.stop()  # a pending restore is done before the thread ends
    assert ok, message
    assert out.read_text(encoding="utf-8") == text
    assert clipboard.text() == "the user's own clip ✓"


def test_a_failing_route_hands_over_and_no_route_leaves_the_clipboard(sway, field,  # noqa: F811
                                                                      tmp_path) -> None:
    target, out = field
    # No portal on this session bus: the RemoteDesktop route fails to start and is dropped.
    portal = PortalKeys(RemoteKeyboard(tmp_path / "token"))
    inserter = WaylandInserter([portal, Wtype()], WlClipboard())
    inserter.start()
    try:
        ok, message = insert(inserter, "Fallback works.", "type")
        wait_for_length(target, len("Fallback works."))
    finally:
        inserter.stop()
    assert ok and message.endswith("(Wayland, wtype)"), message
    assert inserter.route_names == ["wtype"] and "portal" in inserter.failures
    assert out.read_text(encoding="utf-8") == "Fallback works."

    nothing = WaylandInserter([], WlClipboard())
    nothing.start()
    try:
        ok, message = insert(nothing, "Kept for you.", "type")
    finally:
        nothing.stop()
    assert not ok and "press Ctrl+V" in message
    assert WlClipboard().text() == "Kept for you."
    assert out.read_text(encoding="utf-8") == "Fallback works."  # nothing typed


def control(env: dict[str, str], command: str) -> None:
    """What the sway binding runs: `sottovoce ptt press` / `sottovoce ptt release`."""
    done = subprocess.run([sys.executable, "-m", "app.cli", *command.split()], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("mode", ["paste", "type"])
def test_dictation_lands_in_a_native_wayland_field(sway, client_env, field, shared_audio,  # noqa: F811
                                                   manifest, tmp_path, mode) -> None:
    target, out = field
    config = tmp_path / "config"
    config.mkdir()
    settings = replace(Settings(), inject_mode=mode, captions_visible=True,
                       replacements=RULES, first_run_hint=False)
    (config / "settings.toml").write_text(tomli_w.dumps(asdict(settings)), encoding="utf-8")
    env = dict(client_env, SOTTOVOCE_CONFIG_DIR=str(config), PYTHONUNBUFFERED="1",
               SOTTOVOCE_CONTROL_SOCKET=str(tmp_path / "control.sock"))
    reference = next(e.text for e in manifest if e.path.name == SPEECH)
    reader = start_monitor_reader()
    app = start_app(env)
    try:
        app.wait_for("engine state listening", STARTUP_TIMEOUT_S)
        assert "insertion route: virtual keyboard (wtype)" in "\n".join(app.log)
        captions = sway.window(CAPTIONS)
        assert captions["type"] == "floating_con" and captions["sticky"], captions
        sway.focus(TARGET_TITLE)
        control(env, "ptt press")
        app.wait_for("talking=True", 30, fresh=True)
        # Played in the background: the words show while the key is held, whenever a busy
        # machine gets to them (during the clip or after it).
        player = subprocess.Popen(["paplay", "--device=vspk", str(shared_audio / SPEECH)])
        app.wait_for("partial text", 60, fresh=True)
        assert player.wait(120) == 0, "paplay failed"
        control(env, "ptt release")
        final = ""
        while not final:  # an empty final (silence before the clip) inserts nothing
            final = app.wait_for("final ", 60, fresh=True).split("): ", 1)[1].strip()
        done = app.wait_for("(Wayland, wtype)", 60, fresh=True)
        expected = apply_rules(final, parse_rules(RULES))
        wait_for_length(target, len(expected))
        typed = out.read_text(encoding="utf-8")
        print(f"{mode} mode: the Wayland field received {typed!r} ({done.split('INFO ')[-1]})")
        log = "\n".join(app.log)
        assert typed.rstrip(" ") == expected, f"{typed!r} != {expected!r}\n{log}"
        assert "\u00b7" in typed, log  # the non-ASCII character arrived intact
        assert error_rate([reference], [final]) <= WER_BOUND, log
        assert sway.focused_title() == TARGET_TITLE, log  # the captions never took the focus
    finally:
        app.stop()
        reader.terminate()
        reader.wait(10)
    assert app.proc.returncode == 0, "\n".join(app.log)
