"""The caption overlay as people read it (pytest-qt on the X display): 1..N lines, scrollback by
wheel and by the control socket's keys without taking focus, labels of two sources, the
detected language and the translation line, amended lines, partial text styled apart, box or
outline, docks, click-through. Screenshots (over a busy background, as on a desktop) go to
tests/artifacts/caption_*.png."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.screens import busy_shot

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


@pytest.fixture
def overlay(qtbot):  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QApplication, QLineEdit

    from ui.caption_window import CaptionStyle, CaptionWindow

    editor = QLineEdit()
    qtbot.addWidget(editor)
    editor.show()
    editor.activateWindow()
    editor.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is editor)
    window = CaptionWindow()
    window.apply_style(CaptionStyle(lines=3, font_pt=20))
    qtbot.addWidget(window)
    window.resize(1400, window.height())
    window.show()
    qtbot.waitExposed(window)
    window.editor = editor  # type: ignore[attr-defined]
    return window


def focus_kept(window, qtbot) -> None:  # type: ignore[no-untyped-def]
    """Whatever happened to the overlay, typing still goes to the user's field."""
    from PySide6.QtWidgets import QApplication

    qtbot.wait(100)
    assert QApplication.focusWidget() is window.editor
    assert not window.isActiveWindow()


def caption(source: str, n: int, text: str, start: float, end: float, language: str = "en"):  # type: ignore[no-untyped-def]
    from engine.core.captions import CaptionLine

    return CaptionLine(source, f"{source}#{n}", text, start, end, language)


def test_two_sources_labelled_partials_styled_apart_and_amended(overlay, qtbot):
    overlay.add_final(caption("Them", 1, "And so my fellow Americans, ask not what your "
                              "country can do for you.", 0.0, 4.0))
    overlay.show_partial("I", "agree", "You")
    assert overlay.visible_lines() == [
        "Them: And so my fellow Americans, ask not what your country can do for you.",
        "You: I agree"]
    assert overlay.visible_rows() == [
        [("Them: ", "label0"),
         ("And so my fellow Americans, ask not what your country can do for you.", "final")],
        [("You: ", "label1"), ("I agree", "partial")]]
    overlay.add_final(caption("Them", 2, "ask what you can do for your country.", 4.3, 7.0))
    assert overlay.visible_lines() == [
        "Them: And so my fellow Americans, ask not what your country can do for you, ask what",
        "you can do for your country.", "You: I agree"]
    assert len(overlay._lines) == 1  # amended into one sentence, not a second line
    overlay.add_final(caption("You", 1, "I agree.", 7.1, 7.6))
    assert overlay.visible_lines()[-1] == "You: I agree."
    assert overlay.visible_rows()[-1] == [("You: ", "label1"), ("I agree.", "final")]
    busy_shot(overlay, "two_sources")
    focus_kept(overlay, qtbot)


def test_scrollback_by_wheel_and_by_keys_without_focus(overlay, qtbot):
    from PySide6.QtCore import QPoint, QPointF, Qt
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication

    for n in range(1, 13):
        overlay.add_final(caption("", n, f"Line number {n}.", n, n + 0.5))
    assert overlay.visible_lines() == ["Line number 10.", "Line number 11.", "Line number 12."]

    def wheel(notches: int) -> None:
        centre = QPointF(overlay.width() / 2, overlay.height() / 2)
        event = QWheelEvent(centre, overlay.mapToGlobal(centre), QPoint(),
                            QPoint(0, 120 * notches), Qt.MouseButton.NoButton,
                            Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
        QApplication.sendEvent(overlay, event)

    wheel(2)  # up: older
    assert overlay.visible_lines() == ["Line number 8.", "Line number 9.", "Line number 10."]
    overlay.add_final(caption("", 13, "Line number 13.", 13, 13.5))  # the view stays put
    assert overlay.visible_lines() == ["Line number 8.", "Line number 9.", "Line number 10."]
    busy_shot(overlay, "scrollback")
    wheel(-1)
    assert overlay.visible_lines() == ["Line number 9.", "Line number 10.", "Line number 11."]
    overlay.scroll_older(100)  # as `sottovoce captions older` does, from a desktop shortcut
    assert overlay.visible_lines() == ["Line number 1.", "Line number 2.", "Line number 3."]
    overlay.scroll_to_live()
    assert overlay.visible_lines()[-1] == "Line number 13." and overlay.scrolled_back == 0
    focus_kept(overlay, qtbot)


def test_language_and_translation_line_box_outline_docks_and_click_through(overlay, qtbot):
    from dataclasses import replace

    from PySide6.QtCore import Qt

    style = replace(overlay.style_, languages=True, lines=4)
    overlay.apply_style(style)
    overlay.add_final(caption("", 1, "Sous le consulat il devient conservateur des eaux et "
                              "forêts.", 0, 4, "fr"))
    overlay.add_translation("#1", "Under the consulate he became curator of waters and forests.")
    assert overlay.visible_lines() == [
        "[fr] Sous le consulat il devient conservateur des eaux et forêts.",
        "[en] Under the consulate he became curator of waters and forests."]
    assert [kind for _, kind in overlay.visible_rows()[1]] == ["tag", "translation"]
    busy_shot(overlay, "translation")
    overlay.apply_style(replace(style, translated=True))  # translation alone: English only
    overlay.add_final(caption("", 2, "The council met at noon.", 5, 6, "fr"))
    assert overlay.visible_lines()[-1] == "[fr → en] The council met at noon."
    overlay.apply_style(style)
    overlay.apply_style(replace(style, background="outline"))
    busy_shot(overlay, "outline")
    overlay.apply_style(replace(style, opacity=25))
    busy_shot(overlay, "box_25")
    screen = overlay.screen().availableGeometry()
    overlay.apply_style(replace(style, dock="top"))
    assert overlay.y() < screen.top() + screen.height() // 10
    overlay.apply_style(replace(style, dock="bottom"))
    assert overlay.y() + overlay.height() > screen.bottom() - screen.height() // 5
    assert abs(overlay.x() + overlay.width() // 2 - screen.center().x()) <= 1
    overlay.apply_style(replace(style, dock="floating"))
    overlay.move(123, 234)
    overlay.apply_style(replace(style, dock="floating", font_pt=24))
    assert (overlay.x(), overlay.y()) == (123, 234)  # a floating overlay stays where it is
    overlay.apply_style(replace(style, click_through=True))
    qtbot.waitExposed(overlay)
    assert overlay.windowFlags() & Qt.WindowType.WindowTransparentForInput
    assert overlay.windowFlags() & Qt.WindowType.WindowDoesNotAcceptFocus
    overlay.apply_style(replace(style, click_through=False))
    assert not overlay.windowFlags() & Qt.WindowType.WindowTransparentForInput
    focus_kept(overlay, qtbot)


def test_each_dock_screenshot(overlay, qtbot):
    """The whole screen with the overlay docked top, bottom and floating (X screenshots)."""
    import shutil
    import subprocess
    from dataclasses import replace

    if shutil.which("import") is None:
        pytest.skip("needs ImageMagick import")
    overlay.add_final(caption("Them", 1, "Docked where subtitles are read.", 0, 2))
    overlay.add_final(caption("You", 1, "And it never takes the focus.", 2.5, 4))
    for dock in ("top", "bottom", "floating"):
        overlay.apply_style(replace(overlay.style_, dock=dock))
        if dock == "floating":
            overlay.move(200, 300)
        qtbot.wait(150)
        ARTIFACTS.mkdir(exist_ok=True)
        subprocess.run(["import", "-window", "root", str(ARTIFACTS / f"caption_dock_{dock}.png")],
                       check=True, timeout=30)
    focus_kept(overlay, qtbot)


def test_painting_for_long_does_not_run_none_out_of_references(qtbot):
    """PySide6 6.12's void calls drop a reference to None each (ui.qt_compat): an overlay
    painting for an hour makes far more of them than the ~5000 None starts with."""
    import sys

    from ui.caption_window import CaptionWindow

    window = CaptionWindow(lines=3)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    for n in range(400):  # about 40 void calls a paint
        window.show_partial(f"word {n}", "maybe", "")
        window.repaint()
    assert sys.getrefcount(None) > 1_000_000 or sys.version_info >= (3, 12)
