"""Settings a person can use without the docs, as real widgets under Xvfb: the press-the-keys
hotkey field (shown "Ctrl+Alt+Space", refused with the reason), the Models page downloading from
a local hub server (progress, cancel, use, remove), the Languages page (ticked languages, the
English-only model greying it out), the Microphone page on two virtual microphones (live level,
3 s test), the tray's microphone menu, and the controller switching language and microphone
without a reload and refusing dictation while a model loads. Screenshots of each page go to
tests/artifacts/.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from support.pulse import Mics, play
from support.ui_fake_engine import FakeLiveEngine

pytestmark = pytest.mark.skipif(
    not os.environ.get("DISPLAY"), reason="needs an X display: run under Xvfb (.ci/desktop.sh)")

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


def _dialog(qtbot, settings=None):  # type: ignore[no-untyped-def]
    from app.dialogs import settings_dialog
    from app.settings import Settings

    dialog = settings_dialog(settings or Settings(), "API keys are kept in the system keyring")
    qtbot.addWidget(dialog)
    dialog.resize(820, 640)
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def _tab(dialog, name: str):  # type: ignore[no-untyped-def]
    for index in range(dialog.tabs.count()):
        if dialog.tabs.tabText(index) == name:
            dialog.tabs.setCurrentIndex(index)
            return dialog.tabs.widget(index)
    raise AssertionError(f"no tab {name}")


def _shot(qtbot, dialog, name: str) -> None:  # type: ignore[no-untyped-def]
    ARTIFACTS.mkdir(exist_ok=True)
    qtbot.wait(80)
    assert dialog.grab().save(str(ARTIFACTS / name))


def test_hotkey_field_records_the_keys_and_refuses_with_the_reason(qtbot) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import Qt

    from app.settings import Settings

    dialog = _dialog(qtbot, Settings(hotkey="<ctrl>+<alt>+<space>"))
    field = dialog.hotkey
    assert field.text() == "Ctrl+Alt+Space"  # the platform's way, never pynput's
    qtbot.mouseClick(field, Qt.MouseButton.LeftButton)
    assert field.text() == "Press the keys…"
    ctrl_shift = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    qtbot.keyClick(field, Qt.Key.Key_F8, ctrl_shift)
    assert (field.hotkey(), field.text()) == ("<ctrl>+<shift>+<f8>", "Ctrl+Shift+F8")
    ctrl_alt = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier
    qtbot.mouseClick(field, Qt.MouseButton.LeftButton)
    qtbot.keyClick(field, Qt.Key.Key_V, ctrl_alt)  # the paste-last hotkey
    assert field.hotkey() == "<ctrl>+<shift>+<f8>"
    assert dialog.error_label.text() == "Ctrl+Alt+V: it is already the paste-last hotkey"
    qtbot.mouseClick(field, Qt.MouseButton.LeftButton)
    qtbot.keyClick(field, Qt.Key.Key_A)
    assert dialog.error_label.text() == "A: without Ctrl, Alt or Super it would fire while you type"
    qtbot.mouseClick(field, Qt.MouseButton.LeftButton)
    qtbot.keyClick(field, Qt.Key.Key_Delete, ctrl_alt)
    assert "the desktop keeps it (it opens the log-out dialog)" in dialog.error_label.text()
    assert field.hotkey() == "<ctrl>+<shift>+<f8>"
    _tab(dialog, "General")
    _shot(qtbot, dialog, "settings_general.png")
    # The paste-last field refuses the push-to-talk chord; Backspace turns it off.
    paste = dialog.dictation_page.paste_last_hotkey
    qtbot.mouseClick(paste, Qt.MouseButton.LeftButton)
    qtbot.keyClick(paste, Qt.Key.Key_F8, ctrl_shift)
    assert dialog.error_label.text().endswith("it is already the push-to-talk hotkey")
    qtbot.mouseClick(paste, Qt.MouseButton.LeftButton)
    qtbot.keyClick(paste, Qt.Key.Key_Backspace)
    assert (paste.hotkey(), paste.text()) == ("", "")
    dialog.accept()
    result = dialog.result_settings()
    assert result is not None
    assert (result.hotkey, result.paste_last_hotkey) == ("<ctrl>+<shift>+<f8>", "")


def test_languages_page_ticks_names_and_greys_out_for_english_only(qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.settings import Settings

    dialog = _dialog(qtbot, Settings(model="tiny.en"))
    page = _tab(dialog, "Languages")
    assert not page.list.isEnabled() and page.english_note.isVisible()
    assert "tiny.en is English-only" in page.english_note.text()
    _shot(qtbot, dialog, "settings_languages_english_only.png")
    models = dialog.models_page
    models.select("base")  # bundled, multilingual
    models.use("base")
    assert page.list.isEnabled() and not page.english_note.isVisible()
    page.filter.setText("fren")
    visible = [page.list.item(i).text() for i in range(page.list.count())
               if not page.list.item(i).isHidden()]
    assert visible == ["French (fr)"]
    page.filter.setText("")
    for code in ("fr", "de", "en"):
        page.tick(code)
    assert [page.current_box.itemText(i) for i in range(page.current_box.count())] == [
        "Auto-detect among 3", "English", "German", "French"]
    page.set_current("fr")
    _shot(qtbot, dialog, "settings_languages.png")
    dialog.accept()
    result = dialog.result_settings()
    assert result is not None
    assert (result.model, result.languages, result.language) == ("base", "en, de, fr", "fr")


def test_models_page_downloads_with_progress_uses_and_removes(
        qtbot, hub, tiny_files) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    from app.settings import Settings

    hub.state.add_repo("Systran/faster-whisper-tiny", tiny_files)  # served as "tiny"
    hub.state.throttle_bps = 40_000_000
    dialog = _dialog(qtbot, Settings(model="tiny.en"))
    page = _tab(dialog, "Models")
    assert page.row("tiny.en").status == "bundled" and page.row("base").status == "bundled"
    assert page.row("large-v3-turbo").size == "1.6 GB"
    assert "This machine:" in page.recommendation.text()
    assert any(page.row(m).recommended for m in ("tiny.en", "base.en", "small.en"))
    page.select("tiny")
    assert page.download_button.isEnabled() and not page.use_button.isEnabled()
    seen: list[int] = []
    page.progress.valueChanged.connect(seen.append)
    page.download_button.click()
    qtbot.waitUntil(lambda: "MB of" in page.progress_text.text(), timeout=30000)
    _shot(qtbot, dialog, "settings_models_downloading.png")
    qtbot.waitUntil(lambda: "downloaded and verified" in page.progress_text.text(), timeout=60000)
    assert 0 < min(v for v in seen if v) < 1000 and page.progress.value() == 1000
    assert page.row("tiny").status == "downloaded"
    page.select("tiny")
    page.use_button.click()
    assert page.values()["model"] == "tiny"
    assert dialog.languages_page.list.isEnabled()  # tiny is multilingual
    _shot(qtbot, dialog, "settings_models.png")
    page.remove("tiny")
    assert page.status.text().startswith("Removed tiny: ") and "MB freed" in page.status.text()
    assert page.values()["model"] == "tiny.en"  # the removed model is no longer in use


def test_models_page_cancel_leaves_nothing_and_folders_are_checked(
        qtbot, hub, tiny_files, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    from app.settings import Settings
    from engine.models import models_dir

    hub.state.add_repo("Systran/faster-whisper-tiny", tiny_files)
    hub.state.throttle_bps = 5_000_000
    dialog = _dialog(qtbot, Settings())
    page = _tab(dialog, "Models")
    page.download("tiny")
    qtbot.waitUntil(lambda: page.progress.value() > 0, timeout=30000)
    assert page.cancel_button.isVisible()
    page.cancel_button.click()
    qtbot.waitUntil(lambda: "cancelled" in page.progress_text.text(), timeout=30000)
    assert page.progress_text.text() == "download of tiny cancelled; nothing of it was kept"
    assert page.row("tiny").status == "not downloaded"
    assert not any(models_dir().glob("*tiny*"))
    # A local CTranslate2 folder: refused when it is not one, listed when it is.
    assert not page.add_folder(str(tmp_path))
    assert "is not a CTranslate2 Whisper model" in page.status.text()
    assert page.add_folder(str(tiny_files))
    row = page.row(str(tiny_files))
    assert (row.status, row.languages, row.usable) == ("local folder", "English only", True)
    page.use(str(tiny_files))
    dialog.accept()
    result = dialog.result_settings()
    assert result is not None
    assert (result.model, result.model_dirs) == (str(tiny_files), str(tiny_files))


def test_microphone_page_meters_tests_and_remembers_by_name(
        qtbot, two_mics: Mics, shared_audio: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    from app.settings import Settings

    dialog = _dialog(qtbot, Settings(input_device="Gone Headset"))
    page = _tab(dialog, "Microphone")
    labels = [page.devices.item(i).text() for i in range(page.devices.count())]
    assert labels[0] == "System default"
    assert f"{two_mics.default.name}  (current default)" in labels
    assert two_mics.first.name in labels and two_mics.second.name in labels
    assert labels[-1] == "Gone Headset  (not connected: the default is used)"
    page.select(two_mics.second.name)
    speech = shared_audio / "jfk-inaugural-1961-excerpt.wav"
    player = play(two_mics.second.sink, speech)
    qtbot.waitUntil(lambda: page.level.value() > 20, timeout=20000)  # louder than -40 dB
    _shot(qtbot, dialog, "settings_microphone.png")
    player.wait(timeout=60)
    qtbot.waitUntil(lambda: page.level.value() < 10, timeout=20000)  # silence again
    player = play(two_mics.second.sink, speech)
    page.test_button.click()
    assert not page.test_button.isEnabled()
    qtbot.waitUntil(lambda: page.status.text().startswith("Done:"), timeout=30000)
    player.wait(timeout=60)
    assert "3.0 s recorded" in page.status.text() and "very quiet" not in page.status.text()
    assert page.test_button.isEnabled()
    dialog.accept()
    result = dialog.result_settings()
    assert result is not None and result.input_device == two_mics.second.name


def test_tray_offers_the_microphones_by_name(qtbot) -> None:  # type: ignore[no-untyped-def]
    from ui.tray import Tray

    tray = Tray()
    chosen: list[str] = []
    tray.microphone_chosen.connect(chosen.append)
    tray.set_microphones(["VirtualMic", "USB Headset"], "Blue Yeti")
    actions = tray.microphone_menu.actions()
    assert [a.text() for a in actions] == ["System default", "VirtualMic", "USB Headset",
                                           "Blue Yeti (not connected)"]
    assert not any(a.isChecked() for a in actions)
    actions[2].trigger()
    assert chosen == ["USB Headset"]
    tray.set_language_text("French", True)
    assert tray.language_action.text() == "Language: French"


def test_controller_cycles_languages_and_switches_microphone_without_a_reload(
        qtbot, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from support.ui_fake_engine import FakeLiveEngine

    from app.controller import Controller, LaunchOptions
    from app.settings import Settings

    monkeypatch.setenv("SOTTOVOCE_CONTROL_SOCKET", str(tmp_path / "control.sock"))
    engines: list[FakeLiveEngine] = []

    def factory(config, sink):  # type: ignore[no-untyped-def]
        engines.append(FakeLiveEngine(sink))
        engines[-1].config = config  # type: ignore[attr-defined]
        return engines[-1]

    settings = Settings(model="base", languages="en, fr", inject_mode="off", sounds=False)
    controller = Controller(settings, LaunchOptions(enable_hotkey=False), engine_factory=factory)
    qtbot.addWidget(controller.window)
    qtbot.addWidget(controller.captions)
    controller.show()
    controller.start_engine()
    qtbot.waitUntil(lambda: controller.state == "listening")
    assert engines[0].config.languages == ("en", "fr")  # type: ignore[attr-defined]
    box = controller.window.language_box
    assert [box.itemText(i) for i in range(box.count())] == ["Auto-detect", "English", "French"]
    assert controller.captions.language_tag.text() == "AUTO"
    shown: list[str] = []
    controller.language_shown.connect(lambda text, _cycle: shown.append(text))
    controller.live.cycle_language()
    controller.live.cycle_language()
    assert controller.settings.language == "fr" and box.currentText() == "French"
    assert controller.captions.language_tag.text() == "FR"
    controller.live.cycle_language()
    assert controller.settings.language == ""
    assert shown == ["English", "French", "Auto-detect (English, French)"]
    assert [c for c in engines[0].calls if c.startswith("language")] == [
        "language en en,fr", "language fr en,fr", "language None en,fr"]
    assert len(engines) == 1  # no reload
    # An English-only model: the selector says so and is greyed out; cycling says why not.
    controller.apply_settings(controller.settings.__class__(
        **{**controller.settings.__dict__, "model": "tiny.en"}))
    qtbot.waitUntil(lambda: len(engines) == 2 and controller.state == "listening")
    assert not box.isEnabled() and box.currentText() == "English (English-only model)"
    assert controller.captions.language_tag.text() == "EN"


class SlowLoadingEngine(FakeLiveEngine):
    """Stays "loading" until `loaded` is set, as a big model does (the scripted engine's
    declared capabilities otherwise)."""

    def __init__(self, sink, loaded: threading.Event) -> None:  # type: ignore[no-untyped-def]
        from engine.events import StateChanged

        self.sink, self.loaded, self.calls = sink, loaded, []
        self._state = StateChanged

    def start(self) -> None:
        self.sink(self._state("loading"))

        def finish() -> None:
            self.loaded.wait(30)
            self.sink(self._state("ready", "large-v3-turbo"))
            self.sink(self._state("listening"))

        threading.Thread(target=finish, daemon=True).start()

    def begin_utterance(self) -> int:
        self.calls.append("begin")
        return 0

    def end_utterance(self) -> None:
        self.calls.append("end")

    def stop(self) -> None:
        self.calls.append("stop")

    def set_vocabulary(self, terms) -> None:  # type: ignore[no-untyped-def]
        return None


def test_dictation_while_the_model_loads_is_refused_with_a_message(qtbot, tmp_path,
                                                                   monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from app.controller import Controller, LaunchOptions
    from app.settings import Settings

    monkeypatch.setenv("SOTTOVOCE_CONTROL_SOCKET", str(tmp_path / "control.sock"))
    loaded = threading.Event()
    engines: list[SlowLoadingEngine] = []

    def factory(config, sink):  # type: ignore[no-untyped-def]
        engines.append(SlowLoadingEngine(sink, loaded))
        return engines[-1]

    controller = Controller(Settings(inject_mode="off", sounds=False),
                            LaunchOptions(enable_hotkey=False), engine_factory=factory)
    qtbot.addWidget(controller.window)
    qtbot.addWidget(controller.captions)
    controller.start_engine()
    qtbot.waitUntil(lambda: controller.state == "loading")
    controller.on_ptt("press")
    assert not controller.talking and engines[0].calls == []
    assert controller.window.statusBar().currentMessage() == (
        "Loading tiny.en: dictation is off until it is ready (a few seconds)")
    loaded.set()
    qtbot.waitUntil(lambda: controller.state == "listening")
    controller.on_ptt("press")
    assert controller.talking and engines[0].calls == ["begin"]
    controller.on_ptt("release")
    time.sleep(0)


def test_models_page_shows_the_measured_compute_type_and_saves_an_override(
        qtbot) -> None:  # type: ignore[no-untyped-def]
    """Settings > Models: "auto" names the compute type measured best for this processor's
    kernels; choosing another is what the edited settings carry (the engines load with it)."""
    from app.settings import Settings
    from engine.compute_choice import choose_compute_type, kernel_set, this_processor

    dialog = _dialog(qtbot, Settings(compute_type="float32"))
    box = _tab(dialog, "Models").compute_type
    assert box.currentData() == "float32"
    kernels = kernel_set(this_processor())
    assert box.itemText(0) == (f"Compute type: auto (measured best here: "
                               f"{choose_compute_type(kernels)[0]} on {kernels})")
    assert dialog.edited_settings().compute_type == "float32"
    box.setCurrentIndex(box.findData("int8"))
    assert dialog.edited_settings().compute_type == "int8"
    box.setCurrentIndex(0)
    assert dialog.edited_settings().compute_type == "auto"
