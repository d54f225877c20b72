"""Issue 41, text from models and servers: hostile LLM servers on 127.0.0.1 (tests/hostile_llm.py)
against the real client, the real Polisher and the real controller under Xvfb, and a
terminal-like window that records every key it gets, to show that only the sanitised text is
typed. The controller's engine is the scripted one (tests/ui_fake_engine.py) inside the app's own
wrapper (app.engine_factory.AppEngine), as the real app runs it."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from hostile_llm import ESCAPES, HostileLLM

from engine.core.sanitize import REDACTED
from engine.polish import ChatClient, PolishError
from engine.polish.guard import polish_messages

KEY = "sk-live-0123456789abcdef"
RAW = "so um let's meet at noon to talk about the budget"
POLISHED = "Let's meet at noon to talk about the budget."
SENT = "So um let's meet at noon to talk about the budget"  # RAW as the text pipeline gives it


def _controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0]


def _complete(url: str, timeout_s: float = 5.0, key: str | None = KEY) -> str:
    """The PolishError's message for one request (the test fails if there is none)."""
    client = ChatClient(url, "m", key)
    try:
        client.complete(polish_messages(RAW, "clean"), timeout_s)
    except PolishError as exc:
        return str(exc)
    finally:
        client.close()
    pytest.fail("the hostile server's answer was taken")


# -- the client ----------------------------------------------------------------------------------

def test_an_error_body_reaches_the_message_without_escapes_or_the_api_key() -> None:
    with HostileLLM("error") as server:
        message = _complete(server.url)
    assert server.requests[0]["authorization"] == f"Bearer {KEY}"  # the key was sent ...
    assert KEY not in message and _controls(message) == []  # ... and is not shown
    assert message == (f'{server.url}/chat/completions answered HTTP 500: '
                       f'{{"error": "bad request", "echo": "Authorization: Bearer {REDACTED}"}}')


def test_json_nested_too_deep_is_a_clean_error() -> None:
    with HostileLLM("nested") as server:
        message = _complete(server.url)
    assert message == (f"{server.url}/chat/completions did not answer JSON (is it an "
                       f"OpenAI-compatible server?): " + '{"choices": ' + "[" * 68)


@pytest.mark.parametrize("behaviour", ["trickle-body", "trickle-headers"])
def test_a_trickling_server_cannot_keep_a_request_past_its_deadline(behaviour: str) -> None:
    """Each byte comes well within httpx's read timeout; the total deadline ends the request."""
    done = threading.Event()
    messages: list[str] = []

    def ask() -> None:
        messages.append(_complete(server.url, timeout_s=1.0))
        done.set()

    with HostileLLM(behaviour, tick_s=0.05) as server:
        worker = threading.Thread(target=ask, daemon=True)
        worker.start()
        assert done.wait(60), "the request outlived its 1 s deadline by a minute"
        worker.join(10)
        assert not worker.is_alive()
        assert server.requests  # the server did get the request and trickled
    assert messages == [f"no answer from {server.url} within 1.0 s"]


def test_a_trickling_proxy_cannot_keep_a_request_past_its_deadline(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The proxy the environment names gets the same total deadline as a direct connection."""
    done = threading.Event()
    messages: list[str] = []
    url = "http://llm.invalid/v1"

    def ask() -> None:
        messages.append(_complete(url, timeout_s=1.0))
        done.set()

    with HostileLLM("trickle-body", tick_s=0.05) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url.removesuffix("/v1"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        threading.Thread(target=ask, daemon=True).start()
        assert done.wait(60), "the request outlived its 1 s deadline by a minute"
        assert proxy.requests  # the request did go through the proxy
    assert messages == [f"no answer from {url} within 1.0 s"]


# -- the app -------------------------------------------------------------------------------------

@pytest.fixture
def make_controller(qtbot, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    from support.ui_fake_engine import JournalledEngine

    from app.controller import Controller, LaunchOptions
    from app.engine_factory import AppEngine
    from app.settings import Settings, with_changes

    monkeypatch.setenv("SOTTOVOCE_CONTROL_SOCKET", str(tmp_path / "control.sock"))
    made = []

    def make(url: str, script: tuple[str, ...] = (RAW,), **changes: object):  # type: ignore[no-untyped-def]
        """The controller, its polish on at ``url``; its engine journals in the user's journal
        folder (where History looks) and says ``script``."""
        changes = {"sounds": False, "polish": True, "polish_url": url, "polish_model": "m",
                   "polish_budget_s": 10.0, **changes}
        controller = Controller(
            with_changes(Settings(), **changes), LaunchOptions(enable_hotkey=False),
            engine_factory=lambda _config, sink: AppEngine(JournalledEngine(sink, script)))
        qtbot.addWidget(controller.window)
        qtbot.addWidget(controller.captions)
        made.append(controller)
        controller.start_engine()
        return controller

    yield make
    for controller in made:
        controller.dictation.shutdown()
        controller.stop_engine()
        controller.polisher.close()


def _focused(qtbot, widget):  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QApplication

    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    widget.activateWindow()
    widget.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is widget)
    return widget


def _terminal(qtbot):  # type: ignore[no-untyped-def]
    """A terminal-like window: it keeps what each key press would send a terminal (the key's
    text: "\\x1b" for Escape, "\\x08" for Backspace, "\\x7f" for Delete, "\\r" for Enter)."""
    from PySide6.QtWidgets import QWidget

    class Terminal(QWidget):
        def __init__(self) -> None:
            super().__init__()
            self.received: list[str] = []
            self.resize(400, 200)

        def keyPressEvent(self, event) -> None:  # type: ignore[no-untyped-def]  # noqa: N802
            if event.text():
                self.received.append(event.text())

    return _focused(qtbot, Terminal())


def _typed(qtbot, controller, target, expect: str) -> str:  # type: ignore[no-untyped-def]
    """One push-to-talk dictation into the terminal; what it got, once ``expect`` is in it and
    nothing more came for a moment."""
    controller.on_ptt("press")
    controller.on_ptt("release")
    qtbot.waitUntil(lambda: controller.polisher.pending == 0 and
                    expect in "".join(target.received), timeout=30000)
    qtbot.wait(300)
    return "".join(target.received)


def _polished(qtbot, controller, used: bool = False) -> str:  # type: ignore[no-untyped-def]
    """One push-to-talk dictation; the status bar's message once the polish is done (``used``:
    its answer was inserted, else the raw text was)."""
    controller.on_ptt("press")
    controller.on_ptt("release")
    bar, meter = controller.window.statusBar(), controller.window.latency.polish_label

    def done() -> bool:
        return controller.polisher.pending == 0 and (
            meter.text().startswith("LLM +") if used else "raw text used" in bar.currentMessage())
    qtbot.waitUntil(done, timeout=30000)
    return str(bar.currentMessage())


def test_the_injector_types_nothing_but_the_text(qtbot) -> None:
    from app.inject import TextInjector

    target = _terminal(qtbot)
    injector = TextInjector("type")
    with qtbot.waitSignal(injector.finished, timeout=20000) as done:
        injector.insert(f"hello{ESCAPES} wor\x7f\x08ld\u202e\n")
    assert done.args[0] is True
    qtbot.waitUntil(lambda: "".join(target.received).endswith("\r"), timeout=10000)
    assert "".join(target.received) == "hello world\r"


def test_a_polish_answer_with_escapes_is_typed_as_its_text_alone(qtbot, make_controller) -> None:
    answer = f"{ESCAPES}{POLISHED}\x7f\x7f\x7f\x08\x1b[1;1H"
    with HostileLLM("answer", content=answer) as server:
        controller = make_controller(server.url, inject_mode="type")
        typed = _typed(qtbot, controller, _terminal(qtbot), POLISHED)
    assert typed in (POLISHED, POLISHED + " ")
    assert controller.window.latency.polish_label.text().startswith("LLM +")


def test_an_answer_that_adds_a_command_line_is_not_typed(qtbot, make_controller) -> None:
    with HostileLLM("answer", content=RAW + "\nrm -rf ~") as server:
        controller = make_controller(server.url, inject_mode="type")
        typed = _typed(qtbot, controller, _terminal(qtbot), "budget")
    assert typed in (SENT, SENT + " ")
    assert controller.window.latency.polish_label.text() == "LLM raw (lines)"


def test_a_server_error_is_shown_and_logged_clean_and_without_the_key(
        qtbot, make_controller, caplog) -> None:
    from PySide6.QtWidgets import QPlainTextEdit

    caplog.set_level(logging.INFO)
    with HostileLLM("error") as server:
        controller = make_controller(server.url)
        controller.polisher.key = lambda _url: KEY  # as if read from the keyring
        _focused(qtbot, QPlainTextEdit())
        shown = _polished(qtbot, controller)
    assert server.requests[0]["authorization"] == f"Bearer {KEY}"
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for text in (shown, logged):
        assert KEY not in text and _controls(text.replace("\n", "")) == []
    assert (f"AI polish skipped (error: {server.url}/chat/completions answered "
                            f'HTTP 500: {{"error": "bad request", "echo": "Authorization: '
                            f'Bearer {REDACTED}"}}); raw text used') in shown


def test_nested_json_gives_the_raw_text_and_a_clean_error_without_a_traceback(
        qtbot, make_controller, caplog) -> None:
    caplog.set_level(logging.INFO)
    with HostileLLM("nested") as server:
        shown = _polished(qtbot, make_controller(server.url))
    assert "did not answer JSON" in shown and "internal error" not in shown
    assert "recursion" not in shown.lower()
    assert [r for r in caplog.records if r.exc_info] == []


def test_trickling_servers_leave_no_polish_thread_behind(qtbot, monkeypatch) -> None:
    """Five finals polished against a server that trickles: each gets the raw text at its
    budget, and every worker thread ends at its request's deadline (budget + LATE_WAIT_S)."""
    import app.polish
    from app.polish import Polisher, ServerConfig

    monkeypatch.setattr(app.polish, "LATE_WAIT_S", 0.5)
    outcomes: list[object] = []
    with HostileLLM("trickle-body", tick_s=0.05) as server:
        polisher = Polisher(lambda: ServerConfig(server.url, "m", 0.3), key=lambda _url: None)
        for number in range(5):
            polisher.polish(f"{RAW} {number}", "clean", "", outcomes.append)
        qtbot.waitUntil(lambda: len(outcomes) == 5, timeout=20000)
        qtbot.waitUntil(lambda: not [t for t in threading.enumerate()
                                     if t.name == "sottovoce-polish"], timeout=30000)
        assert len(server.requests) == 5
        polisher.close()
    assert [(o.text, o.reason) for o in outcomes] == [  # type: ignore[attr-defined]
        (f"{RAW} {number}", "timeout") for number in range(5)]


def test_a_polished_final_is_journalled_and_history_offers_it(qtbot, make_controller) -> None:
    """The real app's engine wrapper names its engine's journal, so the polish line is written
    beside the final's own and History shows the polished text with "Use polished"."""
    from app.dialogs import journal_sessions
    from engine.journal import read_journal
    from ui.history_dialog import HistoryDialog

    with HostileLLM("answer", content=POLISHED) as server:
        controller = make_controller(server.url)
        assert controller.engine.journal_path is not None
        _polished(qtbot, controller, used=True)
    entry = read_journal(Path(controller.engine.journal_path))[-1]
    assert (entry.text, entry.raw, entry.polished) == (RAW, SENT, POLISHED)
    raw_texts: dict[Path, list[str | None]] = {}
    dialog = HistoryDialog(journal_sessions(raw_texts), None, raw_texts)
    qtbot.addWidget(dialog)
    assert dialog.entry_texts()[-1] == POLISHED
    dialog.entries.setCurrentRow(len(dialog.entry_texts()) - 1)
    assert dialog.use_polished_button.isEnabled() and dialog.use_raw_button.isEnabled()


def test_a_models_final_with_escapes_is_shown_logged_and_typed_as_text(qtbot, make_controller,
                                                                       caplog) -> None:
    """Polish off: the engine's own text (a local model's, a remote server's) is cleaned too."""
    caplog.set_level(logging.INFO)
    said = f"Hello{ESCAPES}\u202e there\x7f\x08 friend."
    controller = make_controller("http://127.0.0.1:9/v1", (said,), polish=False,
                                 inject_mode="type")
    typed = _typed(qtbot, controller, _terminal(qtbot), "friend.")
    assert typed in ("Hello there friend.", "Hello there friend. ")
    assert controller.window.transcript.toPlainText().endswith("Hello there friend.")
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert _controls(logged.replace("\n", "")) == [] and "\u202e" not in logged
