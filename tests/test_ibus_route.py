"""The input-method route (app.ibus_route, resources/ibus/sottovoce_ibus_engine.py) against a
real ibus-daemon on the virtual X11 desktop, committing into a real text field in its own process that talks to
the daemon as a user's app does: Qt through its ibus plugin (QT_IM_MODULE=ibus) and, for the
text tests, GTK 3 through its IBus input module (GTK_IM_MODULE=ibus).

Exact field contents: non-ASCII on German, French and Russian layouts, line breaks and tabs,
backspaces of a correction, a held Ctrl; the user's own engine is theirs again after each text;
through the app's injector in paste mode the clipboard is left alone; with no daemon the route
says why and the caller goes on. Needs ibus, gir1.2-ibus-1.0 and python3-gi (GTK: ibus-gtk3,
gir1.2-gtk-3.0; scripts/test installs them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from support.text_field import start_text_field, wait_for_text
from support.x11_layout import layout  # noqa: F401 - the fixture

from app.ibus_route import FAKE_CONTEXT_HINT, SYSTEM_PYTHON, IBusRoute, probe, session_uses_ibus
from app.wayland_inject import RouteError

TEXT = "Zürich yz ß é € Ж"
USER_ENGINE = "xkb:fr::fra"
TIMEOUT_S = 30.0


def _missing() -> str | None:
    for tool in ("ibus-daemon", "ibus", "xdotool", "setxkbmap"):
        if shutil.which(tool) is None:
            return f"needs {tool} (apt: ibus xdotool x11-xkb-utils)"
    probe_gi = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import gi; gi.require_version('IBus', '1.0'); "
                              "from gi.repository import IBus"], capture_output=True, timeout=60)
    if probe_gi.returncode != 0:
        return "needs python3-gi and gir1.2-ibus-1.0 for the system python3"
    if not os.environ.get("DISPLAY"):
        return "needs an X display (.ci/desktop.sh)"
    return None


pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def ibus(*args: str) -> str:
    done = subprocess.run(["ibus", *args], capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A private ibus-daemon (its own socket and home, so it never meets a user's)."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    folder = Path(tempfile.mkdtemp(prefix="sottovoce-ibus-"))  # short: a socket path
    address = f"unix:path={folder / 'bus'}"
    monkeypatch.setenv("IBUS_ADDRESS", address)
    monkeypatch.setenv("HOME", str(folder))
    proc = subprocess.Popen(["ibus-daemon", "--panel=disable", "--emoji-extension=disable",
                             "--config=disable", f"--address={address}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while "xkb:" not in ibus("list-engine"):
            assert proc.poll() is None, "ibus-daemon exited"
            assert time.monotonic() < deadline, "ibus-daemon did not answer"
            time.sleep(0.1)  # the daemon makes its socket while it starts
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


def _gtk_missing() -> str | None:
    probe_gtk = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import gi; gi.require_version('Gtk', '3.0'); "
                              "from gi.repository import Gtk"], capture_output=True, timeout=60)
    if probe_gtk.returncode != 0:
        return "needs gir1.2-gtk-3.0 for the system python3"
    if not list(Path("/usr/lib").glob("*/gtk-3.0/3.0.0/immodules/im-ibus.so")):
        return "needs GTK's IBus input module (apt: ibus-gtk3)"
    return None


@pytest.fixture(params=["qt"])
def field(request, daemon):  # type: ignore[no-untyped-def]
    """A field with the focus (Qt through QT_IM_MODULE=ibus; or GTK through GTK_IM_MODULE=ibus,
    where a test asks for it) and the user's engine (French) on its input context."""
    toolkit = request.param
    if toolkit == "gtk" and _gtk_missing():
        pytest.skip(_gtk_missing() or "")
    env = {**os.environ, "QT_IM_MODULE": "ibus", "GTK_IM_MODULE": "ibus",
           "QT_QPA_PLATFORM": "xcb"}
    target = start_text_field(env, "Sottovoce IM target", toolkit)
    try:
        # --onlyvisible: a window found before it is mapped cannot take the focus (BadMatch).
        subprocess.run(["xdotool", "search", "--sync", "--onlyvisible", "--name",
                        "^Sottovoce IM target$",
                        "windowfocus", "--sync"], check=True, timeout=TIMEOUT_S)
        deadline = time.monotonic() + TIMEOUT_S
        # The field's input context must have the daemon's focus (its toolkit tells the daemon
        # asynchronously; until then the daemon's fake context has it).
        while focused_context() in ("", FAKE_CONTEXT_HINT):
            assert time.monotonic() < deadline, "the field's input context never got the focus"
            time.sleep(0.05)
        while ibus("engine") != USER_ENGINE:  # the field's context must exist first
            assert time.monotonic() < deadline, "the user's engine was never set"
            subprocess.run(["ibus", "engine", USER_ENGINE], capture_output=True, timeout=30)
        yield target
    finally:
        target.stop()


@pytest.fixture
def route():  # type: ignore[no-untyped-def]
    r = IBusRoute()
    yield r
    r.close()


@pytest.mark.parametrize("field", ["qt", "gtk"], indirect=True)
@pytest.mark.parametrize("name", ["us", "de", "fr", "ru"])
def test_any_character_arrives_on_any_layout(field, route, layout, name: str) -> None:  # noqa: F811
    layout(name)
    text = f"{TEXT}\nzweite Zeile\tTab 東 😀"
    route.insert(text)
    assert wait_for_text(field, text) == text
    assert ibus("engine") == USER_ENGINE  # the user's engine is theirs again


@pytest.mark.parametrize("field", ["qt", "gtk"], indirect=True)
def test_a_correction_backspaces_then_commits(field, route) -> None:
    route.insert("Zürich abc")
    assert wait_for_text(field, "Zürich abc") == "Zürich abc"
    route.insert("€ Ж", delete_chars=3)
    assert wait_for_text(field, "Zürich € Ж") == "Zürich € Ж"
    assert ibus("engine") == USER_ENGINE


@pytest.mark.parametrize("field", ["qt", "gtk"], indirect=True)
def test_a_held_ctrl_does_not_make_shortcuts(field, route) -> None:
    # Ctrl still down (the hotkey's): the line break, the tab and the letters must not become
    # Ctrl+Return, Ctrl+Tab or Ctrl+letter shortcuts.
    subprocess.run(["xdotool", "keydown", "ctrl"], check=True, timeout=10)
    try:
        route.insert(f"a{TEXT}\nb\tc")
    finally:
        subprocess.run(["xdotool", "keyup", "ctrl"], check=True, timeout=10)
    assert wait_for_text(field, f"a{TEXT}\nb\tc") == f"a{TEXT}\nb\tc"


def test_the_injector_uses_it_first_and_leaves_the_clipboard(field, qtbot) -> None:
    from PySide6.QtGui import QGuiApplication

    from app.inject import TextInjector

    QGuiApplication.clipboard().setText("the user's clipboard")
    injector = TextInjector("paste")
    ibus_route = IBusRoute()
    injector.use_ibus(ibus_route)
    try:
        with qtbot.waitSignal(injector.finished, timeout=TIMEOUT_S * 1000) as done:
            injector.insert(TEXT + "\n")
        assert done.args == [True, f"Committed {len(TEXT)} characters (IBus)"]
        assert wait_for_text(field, TEXT + "\n") == TEXT + "\n"
        assert QGuiApplication.clipboard().text() == "the user's clipboard"
    finally:
        injector.close()


def test_no_daemon_is_a_clear_reason(monkeypatch, tmp_path) -> None:
    if _missing():
        pytest.skip(_missing() or "")
    monkeypatch.setenv("IBUS_ADDRESS", f"unix:path={tmp_path / 'nobody'}")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("QT_IM_MODULE", "ibus")
    with pytest.raises(RouteError, match="ibus-daemon is not running"):
        IBusRoute().insert("x")
    usable, why = probe()
    assert not usable and why.startswith("QT_IM_MODULE=ibus, but IBus: ibus-daemon is not")


def test_a_python_without_the_typelib_is_a_clear_reason(tmp_path) -> None:
    broken = tmp_path / "python3"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(RouteError, match="needs python3-gi and gir1.2-ibus-1.0"):
        IBusRoute(python=str(broken)).prepare()


def test_which_sessions_use_ibus() -> None:
    assert session_uses_ibus({"GTK_IM_MODULE": "ibus"}) == "GTK_IM_MODULE=ibus"
    assert session_uses_ibus({"XMODIFIERS": "@im=ibus"}) == "XMODIFIERS=@im=ibus"
    assert session_uses_ibus({"XDG_CURRENT_DESKTOP": "ubuntu:GNOME"}) is not None
    assert session_uses_ibus({"GTK_IM_MODULE": "fcitx", "XDG_CURRENT_DESKTOP": "KDE"}) is None
    assert session_uses_ibus({"GTK_IM_MODULE": "ibus", "SOTTOVOCE_IBUS": "0"}) is None


def test_the_doctor_says_ibus_goes_first_and_why(field, monkeypatch) -> None:
    from app.commands import doctor

    monkeypatch.setenv("QT_IM_MODULE", "ibus")
    result = doctor.check_insertion()
    assert result.status == doctor.OK
    assert result.detail.startswith("input method (IBus) first: commits text through IBus "
                                    f"(QT_IM_MODULE=ibus); your engine {USER_ENGINE} is "
                                    "switched back after each text; then ")
    assert ibus("engine") == USER_ENGINE


def test_the_wayland_inserter_commits_through_it_in_paste_mode(field) -> None:
    # The same inserter runs on Wayland sessions that use IBus (GNOME): IBus goes first and
    # paste mode needs no clipboard, since the text is committed.
    import queue

    from app.wayland_inject import Insertion, WaylandInserter

    inserter = WaylandInserter([IBusRoute()], None)
    inserter.start()
    answers: queue.Queue[tuple[bool, str]] = queue.Queue()
    try:
        inserter.submit(Insertion(TEXT + "\tx", 0, "paste", "ctrl+v",
                                  lambda ok, msg: answers.put((ok, msg))))
        ok, message = answers.get(timeout=TIMEOUT_S)
    finally:
        inserter.stop()
    assert (ok, message) == (True, f"Typed {len(TEXT) + 2} characters (Wayland, ibus)")
    assert wait_for_text(field, TEXT + "\tx") == TEXT + "\tx"


def test_the_route_line_says_why() -> None:
    from app.ibus_route import NOT_IBUS, route_line

    assert route_line("keys via wtype", False, NOT_IBUS) == "keys via wtype"
    assert route_line("key events (X11)", True, "commits text through IBus (GNOME)") == \
        "input method (IBus) first: commits text through IBus (GNOME); then key events (X11)"
    assert route_line("keys", False, "XMODIFIERS=@im=ibus, but IBus: no daemon") == \
        "keys; IBus not used: XMODIFIERS=@im=ibus, but IBus: no daemon"


def test_the_users_engine_is_back_when_the_app_quits(field) -> None:
    # ibus-daemon drops the global engine when the component's process leaves: the engine
    # process leaves a restorer behind.
    route = IBusRoute()
    route.insert("x")
    assert wait_for_text(field, "x") == "x"
    route.close()
    deadline = time.monotonic() + TIMEOUT_S
    while ibus("engine") != USER_ENGINE and time.monotonic() < deadline:
        time.sleep(0.05)  # the restorer sets it once the daemon has let the component go
    assert ibus("engine") == USER_ENGINE


def focused_context() -> str:
    code = ("import gi; gi.require_version('IBus', '1.0'); from gi.repository import IBus; "
            "print(IBus.Bus().current_input_context() or '')")
    return subprocess.run([SYSTEM_PYTHON, "-c", code], capture_output=True, text=True,
                          timeout=30).stdout.strip()


def test_a_window_without_ibus_gets_the_text_the_usual_way(field, qtbot) -> None:
    # A field of this process (its Qt does not use IBus) takes the focus from the IBus field:
    # nothing may be committed into the void, the text is typed instead (XTEST), and the
    # route stays for the next window that uses IBus.
    from PySide6.QtWidgets import QPlainTextEdit
    from support.controller import focused_field

    from app.ibus_route import FAKE_CONTEXT_HINT, NotAnIBusField
    from app.inject import TextInjector

    own = focused_field(qtbot, QPlainTextEdit)
    deadline = time.monotonic() + TIMEOUT_S
    while focused_context() != FAKE_CONTEXT_HINT and time.monotonic() < deadline:
        time.sleep(0.05)  # the daemon hears of the focus change from the other app
    route = IBusRoute()
    with pytest.raises(NotAnIBusField, match="does not use IBus"):
        route.insert("lost?")
    injector = TextInjector("type")
    injector.use_ibus(route)
    try:
        with qtbot.waitSignal(injector.finished, timeout=TIMEOUT_S * 1000) as done:
            injector.insert(TEXT)
        assert done.args == [True, f"Typed {len(TEXT)} characters"]
        qtbot.waitUntil(lambda: own.toPlainText() == TEXT, timeout=int(TIMEOUT_S * 1000))
        assert injector.ibus is route
        assert wait_for_text(field, TEXT, timeout=0) == ""  # nothing went to the IBus field
    finally:
        injector.close()


def test_the_app_chooses_it_first_and_settings_say_so(field, qtbot, monkeypatch) -> None:
    from app.desktop_routes import DesktopRoutes
    from app.inject import TextInjector
    from app.settings import Settings

    monkeypatch.setenv("QT_IM_MODULE", "ibus")

    settings = Settings()
    injector = TextInjector("type")

    def on_ptt(action: str) -> None:
        raise AssertionError(action)

    routes = DesktopRoutes(lambda: settings, None, injector, on_ptt)  # type: ignore[arg-type]
    routes.start()
    try:
        assert routes.ibus is not None and injector.ibus is routes.ibus
        assert routes.status_lines()[1].startswith(
            "input method (IBus) first: commits text through IBus (QT_IM_MODULE=ibus); "
            "then key events")
        with qtbot.waitSignal(injector.finished, timeout=TIMEOUT_S * 1000) as done:
            injector.insert(TEXT)
        assert done.args == [True, f"Committed {len(TEXT)} characters (IBus)"]
        assert wait_for_text(field, TEXT) == TEXT
    finally:
        routes.stop()
        injector.close()
    assert injector.ibus is None


def test_an_engine_process_that_ended_is_started_again(field, route) -> None:
    route.insert("a")
    assert wait_for_text(field, "a") == "a"
    assert route.proc is not None
    route.proc.kill()  # as when ibus-daemon restarts and drops its components
    route.proc.wait(10)
    route.insert(TEXT)
    assert wait_for_text(field, "a" + TEXT) == "a" + TEXT
    assert ibus("engine") == USER_ENGINE  # switched back, though the dead one restored nothing
