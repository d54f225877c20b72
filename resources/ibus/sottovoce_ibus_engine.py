"""Sottovoce's IBus engine: a small process (the system python3 with PyGObject and the IBus
typelib, which the app's venv cannot host) that commits dictated text into the focused field.

It imports nothing from the app. It registers the component `org.sottovoce.IBus` with one
engine, `sottovoce`, with the running ibus-daemon, then reads one JSON request a line on stdin
and answers one JSON line on stdout:
  {"id": 1, "text": "Zürich\\n", "delete": 2, "restore": "xkb:de::ger"}  ->  {"id": 1, "ok": true}
                                             or  {"id": 1, "ok": false, "error": "..."}
("unfocused": true with the error: no field that uses IBus has the focus; nothing was sent.)
Its first line says whether it is usable: {"ready": true, "engine": "<the user's engine>"} or
{"ready": false, "error": "..."}.

The user's engine is never replaced for long: for each request the engine is switched to
`sottovoce` (IBus 1.5 engines are global), the text is committed once our engine has the focused
input context, and the user's engine is switched back at once; so their layout, their input
method and its settings stay theirs, and a key typed meanwhile passes through ours untouched.
The whole text, line breaks and tabs included, goes as one commit_text (any character,
whatever the layout, and no key a held Ctrl could turn into a shortcut); a correction's
backspaces go as delete_surrounding_text where the field supports it. Both are signals the
client handles in order, whereas forwarded keys are not (GTK queues them behind later commits).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

import gi

gi.require_version("IBus", "1.0")
from gi.repository import GLib, IBus  # noqa: E402

COMPONENT, ENGINE = "org.sottovoce.IBus", "sottovoce"
FOCUS_TIMEOUT_MS = 3000  # our engine given the focused context, else the request fails
RESTORE_TIMEOUT_MS = 5000
# Where keys go while no field that uses IBus has the focus: the daemon's "fake" context, the
# first one it makes (bus_ibus_impl_init). A commit there would be lost while reported done.
FAKE_CONTEXT = "/org/freedesktop/IBus/InputContext_1"


class SottovoceEngine(IBus.Engine):  # type: ignore[misc]
    """Passes every key through; commits what the process is asked to."""

    __gtype_name__ = "SottovoceEngine"
    instances: list[SottovoceEngine] = []

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.focused = False
        self.caps = 0
        SottovoceEngine.instances.append(self)

    def do_process_key_event(self, keyval: int, keycode: int, state: int) -> bool:
        return False  # the user's keys are theirs

    def do_focus_in(self) -> None:
        self.focused = True

    def do_focus_out(self) -> None:
        self.focused = False

    def do_enable(self) -> None:
        self.focused = True

    def do_set_capabilities(self, caps: int) -> None:
        self.caps = caps

    def send(self, text: str, delete: int) -> None:
        """Delete ``delete`` characters before the cursor, then commit ``text`` whole."""
        if delete > 0 and self.caps & IBus.Capabilite.SURROUNDING_TEXT:
            # A signal like the commit, so the two stay in order (GTK handles forwarded keys
            # later, from its event queue: a BackSpace would land after the new text).
            self.delete_surrounding_text(-delete, delete)
        elif delete > 0:  # a client that cannot delete text: the keys
            for _ in range(delete):
                for state in (0, IBus.ModifierType.RELEASE_MASK):
                    self.forward_key_event(IBus.KEY_BackSpace, 0, state)
        if text:
            self.commit_text(IBus.Text.new_from_string(text.replace("\r\n", "\n")))


class Service:
    def __init__(self, bus: IBus.Bus, loop: GLib.MainLoop) -> None:
        self.bus, self.loop = bus, loop
        self.factory = IBus.Factory.new(bus.get_connection())
        self.factory.add_engine(ENGINE, SottovoceEngine.__gtype__)
        self.restore = ""  # the user's engine, kept for when a switch back failed

    def register(self) -> None:
        component = IBus.Component.new(COMPONENT, "Sottovoce dictation", "1.0", "GPL",
                                       "Sottovoce", "", "", "")
        component.add_engine(IBus.EngineDesc.new(
            ENGINE, "Sottovoce dictation", "Commits dictated text", "other", "GPL",
            "Sottovoce", "", "default"))
        if not self.bus.register_component(component):
            raise RuntimeError("ibus-daemon refused to register the Sottovoce engine")

    def user_engine(self) -> str:
        desc = self.bus.get_global_engine()
        return desc.get_name() if desc is not None else ""

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        text, delete = str(request.get("text", "")), int(request.get("delete", 0))
        if (self.bus.current_input_context() or FAKE_CONTEXT) == FAKE_CONTEXT:
            return {"ok": False, "unfocused": True,
                    "error": "the focused window does not use IBus (or no field has the focus)"}
        before = self.user_engine()
        if before in ("", ENGINE):  # a switch back failed, or an earlier engine process of
            # the app's died without restoring: the user's engine as known before that
            before = self.restore or str(request.get("restore") or "")
        self.restore = before
        del SottovoceEngine.instances[:]
        if not self._switch(ENGINE):
            return {"ok": False, "error": "ibus-daemon would not switch to the Sottovoce engine"}
        try:
            engine = self._until(lambda: next(
                (e for e in SottovoceEngine.instances if e.focused), None))
            if engine is None:
                return {"ok": False, "error": "no focused text field took the IBus engine"}
            engine.send(text, delete)
            self.bus.get_connection().flush_sync(None)
        finally:
            if before:
                self._switch(before)
        return {"ok": True, "engine": before}

    def _switch(self, name: str) -> bool:
        """Make ``name`` the global engine; the loop keeps running meanwhile, since the daemon
        calls back into this process (CreateEngine) before it answers."""
        done: list[bool] = []

        def finished(bus: IBus.Bus, result: Any) -> None:
            try:
                done.append(bool(bus.set_global_engine_async_finish(result)))
            except GLib.Error:
                done.append(False)

        self.bus.set_global_engine_async(name, FOCUS_TIMEOUT_MS, None, finished)
        return bool(self._until(lambda: done[0] if done else None, lambda: bool(done)))

    def _until(self, value: Any, ready: Any = None) -> Any:
        """Run the loop until ``value()`` is set (or ``ready()``), at most FOCUS_TIMEOUT_MS."""
        context = self.loop.get_context()
        deadline = GLib.get_monotonic_time() + FOCUS_TIMEOUT_MS * 1000
        while GLib.get_monotonic_time() < deadline:
            if (ready() if ready else value() is not None):
                return value()
            if not context.iteration(False):
                GLib.usleep(2000)
        return None


def reply(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def restore_after_exit(engine: str) -> None:
    """ibus-daemon drops the global engine when a component's process leaves, even one never
    switched to: a detached child of ours sets the user's engine again once we are gone."""
    if not engine:
        return
    subprocess.Popen([sys.executable, __file__, "--restore", engine, str(os.getpid())],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)


def restore(engine: str, parent: int) -> int:
    """Wait (bounded) for ``parent`` to end, then keep ``engine`` the global one until the
    daemon has stopped changing it."""
    deadline = GLib.get_monotonic_time() + RESTORE_TIMEOUT_MS * 1000
    while os.path.exists(f"/proc/{parent}") and GLib.get_monotonic_time() < deadline:
        GLib.usleep(20_000)
    bus = IBus.Bus()
    steady = 0
    while steady < 10 and bus.is_connected() and GLib.get_monotonic_time() < deadline:
        desc = bus.get_global_engine()
        if desc is None or desc.get_name() != engine:
            steady = 0
            bus.set_global_engine(engine)
        else:
            steady += 1
        GLib.usleep(50_000)
    return 0


def main() -> int:
    IBus.init()
    if sys.argv[1:2] == ["--restore"]:
        return restore(sys.argv[2], int(sys.argv[3]))
    bus = IBus.Bus()
    if not bus.is_connected():
        reply({"ready": False, "error": "ibus-daemon is not running (no IBus bus to connect to)"})
        return 1
    if sys.argv[1:2] == ["--check"]:  # doctor: registering (and leaving) would cost the engine
        desc = bus.get_global_engine()
        reply({"ready": True, "engine": desc.get_name() if desc is not None else ""})
        return 0
    loop = GLib.MainLoop()
    service = Service(bus, loop)
    try:
        service.register()
    except RuntimeError as exc:
        reply({"ready": False, "error": str(exc)})
        return 1
    bus.connect("disconnected", lambda _bus: loop.quit())

    def read_stdin() -> None:  # a thread: stdin blocks; the GLib loop must keep running
        for line in sys.stdin:
            try:
                request = json.loads(line)
            except ValueError:
                request = {"id": None, "bad": line[:80]}
            GLib.idle_add(serve, request)
        GLib.idle_add(loop.quit)

    def serve(request: dict[str, Any]) -> bool:
        if "bad" in request:
            reply({"id": None, "ok": False, "error": f"not a JSON request: {request['bad']!r}"})
            return False
        try:
            answer = service.handle(request)
        except Exception as exc:  # noqa: BLE001 - one bad request must not end the engine
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        reply({"id": request.get("id"), **answer})
        return False

    reply({"ready": True, "engine": service.user_engine()})
    threading.Thread(target=read_stdin, daemon=True).start()
    loop.run()
    current = service.user_engine()
    restore_after_exit(current if current not in ("", ENGINE) else service.restore)
    return 0


if __name__ == "__main__":
    sys.exit(main())
