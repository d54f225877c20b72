"""The settings dialog's dictation pages as a user sees them (screenshots to tests/artifacts/),
and a bad per-application profile refused in the dialog with the line named."""

from __future__ import annotations

from pathlib import Path

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
VOCABULARY = "Sottovoce\nConcord\n[work]\nKubernetes\nCTranslate2\n[home]\nMeringue\n"
PROFILES = ("# window class: key=value, ...\nslack: style=chat\n"
            "xterm: insert=type, commands=off\ncode: vocabulary=work\n")


def _dialog(qtbot):  # type: ignore[no-untyped-def]
    from app.dialogs import settings_dialog
    from app.settings import Settings

    settings = Settings(vocabulary=VOCABULARY, app_profiles=PROFILES, hotkey_mode="toggle",
                        auto_stop_s=2.5, sound_volume=35)
    dialog = settings_dialog(settings, "API keys are kept in the system keyring")
    qtbot.addWidget(dialog)
    dialog.resize(720, 620)
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def test_screenshots_of_the_dictation_pages(qtbot) -> None:  # type: ignore[no-untyped-def]
    dialog = _dialog(qtbot)
    ARTIFACTS.mkdir(exist_ok=True)
    names = {"Text": "settings_text.png", "Vocabulary": "settings_vocabulary.png",
             "Dictation": "settings_dictation.png"}
    saved = []
    for index in range(dialog.tabs.count()):
        tab = dialog.tabs.tabText(index)
        if tab in names:
            dialog.tabs.setCurrentIndex(index)
            qtbot.wait(50)
            assert dialog.grab().save(str(ARTIFACTS / names[tab]))
            saved.append(tab)
    assert saved == ["Text", "Vocabulary", "Dictation"]
    page = dialog.dictation_page
    assert page.app_profiles.text() == PROFILES.strip()
    assert (page.auto_stop_s.value(), page.sound_volume.value()) == (2.5, 35)
    assert page.paste_last_hotkey.text() == "Ctrl+Alt+V"  # shown the platform's way...
    assert page.paste_last_hotkey.hotkey() == "<ctrl>+<alt>+v"  # ...kept in pynput's


def test_a_bad_profile_line_is_refused_with_its_line_named(qtbot) -> None:  # type: ignore[no-untyped-def]
    dialog = _dialog(qtbot)
    dialog.dictation_page.app_profiles.edit.setPlainText(
        "slack: style=chat\ncode: vocabulary=play\n")
    dialog.accept()
    assert dialog.result_settings() is None
    assert dialog.error_label.text().endswith(
        "app profiles line 2: no vocabulary set named 'play' (sets: home, work)")
    dialog.dictation_page.app_profiles.edit.setPlainText("code: vocabulary=home\n")
    dialog.accept()
    result = dialog.result_settings()
    assert result is not None and result.app_profiles == "code: vocabulary=home"
