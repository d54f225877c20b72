"""Dictation text through the real controller (scripted engine, tests/support/ui_fake_engine.py) into a
real focused text field under Xvfb: consecutive utterances join cleanly, spoken commands act,
"scratch that" takes the last utterance back out of the field and the transcript, replacement
rules apply; in paste and type modes. Each check is the field's exact text."""

from __future__ import annotations

import os

import pytest
from support.controller import focused_field

pytestmark = pytest.mark.skipif(
    not os.environ.get("DISPLAY"),
    reason="needs an X display: run under Xvfb (source .ci/desktop.sh)")

# What Whisper writes for each utterance, and the field's text after it.
SCRIPT = (
    ("Hello there.", "Hello there."),
    ("How are you?", "Hello there. How are you?"),
    ("New line.", "Hello there. How are you?\n"),
    ("I'm gonna be fine comma thanks.", "Hello there. How are you?\nI'm going to be fine, thanks."),
    ("Scratch that.", "Hello there. How are you?\n"),
    ("Great, period.", "Hello there. How are you?\nGreat."),
    ("And you?", "Hello there. How are you?\nGreat. And you?"),
    ("Exclamation mark.", "Hello there. How are you?\nGreat. And you!"),
)


@pytest.mark.parametrize("inject_mode", ["paste", "type"])
def test_utterances_in_a_row_land_as_one_clean_text(qtbot, make_controller,  # noqa: F811
                                                    inject_mode):
    from PySide6.QtWidgets import QApplication, QPlainTextEdit

    from app.settings import Settings, with_changes

    settings = with_changes(Settings(), inject_mode=inject_mode,
                            replacements="gonna => going to")
    controller, _ = make_controller(settings, script=tuple(said for said, _ in SCRIPT))
    target = focused_field(qtbot, QPlainTextEdit)
    results: list[bool] = []
    controller.injector.finished.connect(lambda ok, _message: results.append(ok))
    controller.start_engine()
    for step, (said, expected) in enumerate(SCRIPT, start=1):
        controller.on_ptt("press")
        controller.on_ptt("release")
        qtbot.waitUntil(lambda step=step: len(results) == step, timeout=10000)
        qtbot.waitUntil(lambda expected=expected: target.toPlainText() == expected,
                        timeout=10000)
        assert results[-1], said
    assert QApplication.focusWidget() is target
    lines = ["Hello there.", "How are you?", "Great.", "And you?"]
    assert [f.text for f in controller.session.finals] == lines
    assert controller.window.transcript.plain_text() == "\n".join(lines)
    assert controller.session.text() == "\n".join(lines)


def test_chat_style_in_a_single_line_field(qtbot, make_controller):  # noqa: F811
    from PySide6.QtWidgets import QLineEdit

    from app.settings import Settings, with_changes

    settings = with_changes(Settings(), text_style="chat")
    controller, _ = make_controller(
        settings, script=("Sounds good.", "See you at eight.", "OK?"))
    target = focused_field(qtbot, QLineEdit)
    controller.start_engine()
    for expected in ("sounds good", "sounds good see you at eight",
                     "sounds good see you at eight OK?"):
        controller.on_ptt("press")
        controller.on_ptt("release")
        qtbot.waitUntil(lambda expected=expected: target.text() == expected, timeout=10000)


def test_captions_show_replacements_and_insert_nothing(qtbot, make_controller):  # noqa: F811
    from app.settings import Settings, with_changes

    settings = with_changes(Settings(), listen_mode="captions",
                            replacements="kates => Kubernetes")
    controller, engines = make_controller(settings, script=("Kates comma new line.",))
    controller.start_engine()
    assert engines[0].config.mode == "vad"
    engines[0].begin_utterance()
    engines[0].end_utterance()
    qtbot.waitUntil(lambda: len(controller.session.finals) == 1)
    assert controller.session.finals[0].text == "Kubernetes comma new line."
    assert controller.captions.visible_lines() == ["Kubernetes comma new line."]
    assert controller.last_injection is None  # nothing was inserted anywhere


def test_the_settings_dialog_refuses_a_bad_rule_naming_its_line(qtbot, tmp_path):
    from app.dialogs import settings_dialog
    from app.settings import Settings

    dialog = settings_dialog(Settings(), "keyring: test")
    qtbot.addWidget(dialog)
    rules = tmp_path / "rules.txt"
    rules.write_text("# mine\ngonna => going to\n/colo(u?r/i => colour\n")
    dialog.text_page.replacements.import_from(rules)
    dialog.accept()
    assert dialog.result_settings() is None
    assert dialog.error_label.text() == (
        "replacement rules, line 3: bad regular expression /colo(u?r/: "
        "missing ) at position 8")
    dialog.text_page.replacements.edit.setPlainText("gonna => going to\n/colou?r/i => colour")
    dialog.accept()
    result = dialog.result_settings()
    assert result is not None
    assert result.replacements == "gonna => going to\n/colou?r/i => colour"


def test_scratch_that_only_takes_back_its_own_transcript_line(qtbot, make_controller):  # noqa: F811
    """Text that arrived meanwhile (a reopened session, an import) is never what it removes."""
    from engine.events import FinalText

    controller, _ = make_controller(script=("Hello there.", "Scratch that."))
    handled = []  # connected after the controller's own slot: runs once that has run
    controller.text.done.connect(handled.append)
    controller.start_engine()
    controller.on_ptt("press")
    controller.on_ptt("release")
    qtbot.waitUntil(lambda: len(controller.session.finals) == 1)
    controller.session.add(FinalText(7, "Reopened line.", (), 0, 100, 0.0))
    controller.window.transcript.add_final(0, "Reopened line.")
    controller.on_ptt("press")
    controller.on_ptt("release")
    qtbot.waitUntil(lambda: len(handled) == 2)
    assert controller.session.text() == "Hello there.\nReopened line."
    assert controller.window.transcript.plain_text() == "Hello there.\nReopened line."


@pytest.mark.parametrize("inject_mode", ["paste", "type"])
def test_text_waits_for_the_keys_the_user_still_holds(qtbot, make_controller,  # noqa: F811
                                                      inject_mode):
    # Ctrl+Alt still down (the hotkey's, after its Space went up; or the next push-to-talk
    # press while a slow final lands) would turn Ctrl+V into Ctrl+Alt+V: not Paste, and the
    # paste-last hotkey. Two texts that wait land in order, once, when the keys are let go.
    import subprocess

    from PySide6.QtWidgets import QPlainTextEdit

    from app.settings import Settings, with_changes

    controller, _ = make_controller(with_changes(Settings(), inject_mode=inject_mode),
                                    script=("Hello there.", "How are you?"))
    target = focused_field(qtbot, QPlainTextEdit)
    results: list[bool] = []
    controller.injector.finished.connect(lambda ok, _message: results.append(ok))
    controller.start_engine()
    subprocess.run(["xdotool", "keydown", "ctrl+alt"], check=True, timeout=10)
    try:
        for said in range(1, 3):
            controller.on_ptt("press")
            controller.on_ptt("release")
            qtbot.waitUntil(lambda said=said: len(controller.session.finals) == said,
                            timeout=10000)
        qtbot.waitUntil(lambda: controller.injector.waiting == 2, timeout=10000)
        qtbot.wait(300)  # (what the field would get now, it would have got by then)
        assert target.toPlainText() == "" and results == []
    finally:
        subprocess.run(["xdotool", "keyup", "ctrl+alt"], check=True, timeout=10)
    qtbot.waitUntil(lambda: target.toPlainText() == "Hello there. How are you?", timeout=10000)
    # (The one result comes once the field was checked, a moment after the text landed.)
    qtbot.waitUntil(lambda: results == [True], timeout=10000)
    assert controller.injector.waiting == 0
