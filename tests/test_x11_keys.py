"""X11 keys with real X events under Xvfb: typing any character on any layout (app.x11_typing)
and the hotkey grab (app.x11_hotkey), seen by a real focused Qt text field."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading

import pytest
from pytestqt.exceptions import TimeoutError
from support.x11_layout import focused_field, layout, xkb_query  # noqa: F401 - fixture

pytestmark = pytest.mark.skipif(shutil.which("xdotool") is None
                                or shutil.which("setxkbmap") is None,
                                reason="needs xdotool and setxkbmap")

TEXT = "Zürich yz ß é € Ж 東"


def keyboard_mapping() -> list[tuple[int, ...]]:
    from Xlib import display

    d = display.Display()
    try:
        first, last = d.display.info.min_keycode, d.display.info.max_keycode
        return [tuple(row) for row in d.get_keyboard_mapping(first, last - first + 1)]
    finally:
        d.close()


def caps_lock_on() -> bool:
    from Xlib import X, display

    d = display.Display()
    try:
        return bool(d.screen().root.query_pointer().mask & X.LockMask)
    finally:
        d.close()


def tap_keysym(keysym_name: str) -> None:
    """Press and release the key of a keysym through XTEST (xdotool would pick the group)."""
    from Xlib import XK, X, display
    from Xlib.ext import xtest

    XK.load_keysym_group("xkb")
    d = display.Display()
    try:
        keycode = d.keysym_to_keycode(XK.string_to_keysym(keysym_name))
        assert keycode, keysym_name
        xtest.fake_input(d, X.KeyPress, keycode)
        xtest.fake_input(d, X.KeyRelease, keycode)
        d.sync()
    finally:
        d.close()


@pytest.mark.parametrize("name", ["us", "de", "fr", "ru", "us,ru", "de+caps"])
def test_every_character_arrives_on_every_layout(qtbot, layout, lock_on, name):  # noqa: F811
    from app.x11_typing import X11Typer

    if name.endswith("+caps"):  # CapsLock on: letters still come out as written
        layout(name.removesuffix("+caps"))
        lock_on("Caps_Lock")
    elif "," in name:  # two layouts, the second one active (the group a Russian user types in)
        layout("-layout", name, "-option", "grp:caps_toggle")
        tap_keysym("ISO_Next_Group")
    else:
        layout(name)
    field = focused_field(qtbot)
    if "," in name:
        tap_keysym("q")  # the Q key types the active group's letter
        qtbot.waitUntil(lambda: field.toPlainText() == "й")
        field.clear()
    before = keyboard_mapping()
    typer = X11Typer()
    type_into_field(qtbot, field, typer, TEXT + "\n😀\tend")  # emoji, Return and Tab too
    typer.close()
    assert caps_lock_on() == name.endswith("+caps")  # as the user left it
    # The keycodes borrowed for characters the layout lacks are empty again.
    assert keyboard_mapping() == before


def type_into_field(qtbot, field, typer, text: str) -> None:
    """Types ``text`` from another thread (the GUI thread must stay free to take the keys)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            typer.type_text(text)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    with contextlib.suppress(TimeoutError):  # the assertion below shows what did arrive
        qtbot.waitUntil(lambda: field.toPlainText() == text or bool(errors), timeout=30000)
    worker.join(30)
    assert errors == [] and field.toPlainText() == text


def test_more_missing_characters_than_spare_keycodes(qtbot, layout):  # noqa: F811
    from Xlib import display

    from app.x11_typing import Keymap, X11Typer

    layout("us")
    field = focused_field(qtbot)
    probe = display.Display()
    spare = len(Keymap(probe, {}).spare)
    probe.close()
    typer = X11Typer()
    text = "".join(chr(0x6771 + i) for i in range(2 * spare + 3))  # 東 and the ones after it
    type_into_field(qtbot, field, typer, text)
    typer.close()


def test_the_injector_types_after_backspacing_and_reports(qtbot, layout):  # noqa: F811
    from app.inject import TextInjector

    layout("de")
    field = focused_field(qtbot)
    field.setPlainText("Preis: 5 $")
    field.moveCursor(field.textCursor().MoveOperation.End)
    injector = TextInjector(mode="type")
    results: list[tuple[bool, str]] = []
    injector.finished.connect(lambda ok, message: results.append((ok, message)))
    injector.insert("€ – 東", delete_chars=1)
    with contextlib.suppress(TimeoutError):  # the assertions below show what did arrive
        qtbot.waitUntil(lambda: bool(results) and field.toPlainText() == "Preis: 5 € – 東",
                        timeout=20000)
    injector.close()
    assert results == [(True, "Deleted 1 characters; typed 5 characters")]
    assert field.toPlainText() == "Preis: 5 € – 東"


class KeyPresses:
    """Records the key presses a widget gets."""

    def __init__(self, widget) -> None:
        from PySide6.QtCore import QObject

        self.keys: list[int] = []
        keys = self.keys

        class Filter(QObject):
            def eventFilter(self, _obj, event) -> bool:  # noqa: N802 - Qt's name
                from PySide6.QtCore import QEvent

                if event.type() == QEvent.Type.KeyPress:
                    keys.append(int(event.key()))
                return False

        self.filter = Filter()
        widget.installEventFilter(self.filter)


def xdotool(*args: str) -> None:
    subprocess.run(["xdotool", *args], check=True, timeout=10)


@pytest.fixture
def lock_on():
    """Turns a lock key (Num_Lock, Caps_Lock) on for the test and off again after."""
    pressed: list[str] = []

    def turn_on(key: str) -> None:
        xdotool("key", key)
        pressed.append(key)

    yield turn_on
    for key in pressed:
        xdotool("key", key)


@pytest.fixture
def quick_repeat():
    """The X server's auto-repeat starts after 200 ms at 40 a second for the test, not after
    660 ms at 25 (its default, put back after): the held-key tests wait for three repeats, and
    any delay and rate show the same thing. Left at the default without xset."""
    if shutil.which("xset") is None:
        yield
        return
    subprocess.run(["xset", "r", "rate", "200", "40"], check=True, timeout=10)
    yield
    subprocess.run(["xset", "r", "rate"], check=True, timeout=10)


@pytest.mark.parametrize("lock, xkb", [(None, True), ("Num_Lock", True), ("Caps_Lock", True),
                                       (None, False)])
@pytest.mark.parametrize("hotkey, key, mode, expected", [
    ("<ctrl>+<alt>+<space>", "space", "hold", ["press", "release"]),  # push-to-talk
    ("<ctrl>+<alt>+e", "e", "hold", ["press", "release"]),  # voice edit
    ("<ctrl>+<alt>+v", "v", "tap", ["tap"]),  # paste last
])
def test_a_held_hotkey_is_grabbed_and_fires_once(qtbot, monkeypatch, quick_repeat, lock_on, lock,
                                                 xkb, hotkey, key, mode, expected):
    from PySide6.QtCore import Qt

    from app import x11_hotkey
    from app.hotkeys import GlobalHotkey

    if not xkb:  # a server without XKB: repeats come as release/press pairs
        monkeypatch.setattr(x11_hotkey, "enable_detectable_autorepeat", lambda _display: False)
    field = focused_field(qtbot)
    presses = KeyPresses(field)
    if lock:
        lock_on(lock)
    actions: list[str] = []
    grab = GlobalHotkey(hotkey, mode, actions.append)
    grab.start()
    try:
        try:
            xdotool("keydown", f"ctrl+alt+{key}")
            # Held until the X server's own auto-repeat has sent the key again a few times.
            qtbot.waitUntil(lambda: grab._grab.repeats >= 3, timeout=10000)
        finally:  # never leave a key down on the display
            xdotool("keyup", key, "alt", "ctrl")
        qtbot.waitUntil(lambda: actions[-1:] == expected[-1:], timeout=10000)
    finally:
        grab.stop()
    # A key after the chord: once the field has it, it has had everything sent before it.
    xdotool("key", "1")
    qtbot.waitUntil(lambda: field.toPlainText() == "1", timeout=10000)
    assert actions == expected
    chord_key = Qt.Key.Key_Space if key == "space" else Qt.Key(ord(key.upper()))
    assert int(chord_key) not in presses.keys
    assert presses.keys[-1] == int(Qt.Key.Key_1)


def test_a_taken_hotkey_is_named_and_the_grab_is_let_go_on_stop(qtbot):
    from app.hotkeys import GlobalHotkey, HotkeyUnavailableError

    first = GlobalHotkey("<ctrl>+<alt>+<space>", "hold", lambda _action: None)
    first.start()
    try:
        second = GlobalHotkey("<ctrl>+<alt>+<space>", "hold", lambda _action: None)
        with pytest.raises(HotkeyUnavailableError, match=r"Ctrl\+Alt\+Space is already taken.*"
                                                          r"choose another one in Settings"):
            second.start()
    finally:
        first.stop()
    # Once let go, the focused app gets the chord again.
    field = focused_field(qtbot)
    presses = KeyPresses(field)
    xdotool("key", "ctrl+alt+space")
    xdotool("key", "1")
    qtbot.waitUntil(lambda: field.toPlainText().endswith("1"), timeout=10000)
    from PySide6.QtCore import Qt

    assert int(Qt.Key.Key_Space) in presses.keys


def test_the_app_says_which_hotkey_is_taken_and_the_others_work(
        qtbot, make_controller) -> None:  # noqa: F811
    from app.hotkeys import GlobalHotkey

    other_app = GlobalHotkey("<ctrl>+<alt>+v", "tap", lambda _action: None)
    other_app.start()  # another client holds the paste-last chord
    controller, _ = make_controller()
    controller.hotkeys.enabled = True
    talking: list[str] = []
    controller.hotkeys.action.connect(talking.append)
    try:
        controller.start_hotkey()
        assert controller.window.statusBar().currentMessage() == (
            "Paste-last hotkey off: Ctrl+Alt+V is already taken by another application "
            "(its global shortcut); choose another one in Settings")
        try:
            xdotool("keydown", "ctrl+alt+space")
        finally:
            xdotool("keyup", "space", "alt", "ctrl")
        qtbot.waitUntil(lambda: talking == ["press", "release"], timeout=10000)
    finally:
        controller.hotkeys.stop()
        controller.dictation.stop_hotkey()
        other_app.stop()


def keycode_of(keysym_name: str) -> int:
    from Xlib import XK, display

    d = display.Display()
    try:
        return int(d.keysym_to_keycode(XK.string_to_keysym(keysym_name)))
    finally:
        d.close()


def test_the_grab_follows_its_key_to_a_new_layout(qtbot, layout) -> None:  # noqa: F811
    from app.hotkeys import GlobalHotkey

    layout("us")
    field = focused_field(qtbot)
    actions: list[str] = []
    hotkey = GlobalHotkey("<ctrl>+<alt>+z", "hold", actions.append)
    hotkey.start()
    try:
        layout("de")  # Z moves to where Y was
        qtbot.waitUntil(lambda: hotkey._grab.keycode == keycode_of("z"), timeout=10000)
        try:
            xdotool("keydown", "ctrl+alt+z")
        finally:
            xdotool("keyup", "z", "alt", "ctrl")
        qtbot.waitUntil(lambda: actions == ["press", "release"], timeout=10000)
        xdotool("key", "ctrl+alt+y")  # the keycode grabbed before is the focused app's again
        xdotool("key", "1")
        qtbot.waitUntil(lambda: field.toPlainText().endswith("1"), timeout=10000)
    finally:
        hotkey.stop()
    assert actions == ["press", "release"]


def test_hotkey_names_become_keysyms() -> None:
    from Xlib import XK

    from app.x11_hotkey import GrabError, key_keysym, pretty

    names = {"<space>": "space", "<f9>": "F9", "<page_up>": "Prior", "<delete>": "Delete",
             "<enter>": "Return", "v": "v", "V": "v", "<65>": "A"}
    assert {name: key_keysym(name) for name in names} == {
        name: XK.string_to_keysym(keysym) for name, keysym in names.items()}
    with pytest.raises(GrabError, match="unknown key '<nonsense>'"):
        key_keysym("<nonsense>")
    assert pretty("<ctrl>+<alt>+<space>") == "Ctrl+Alt+Space"
