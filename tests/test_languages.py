"""The languages a user speaks: Whisper's languages by name, the settings' set, the cycle the
hotkey and tray step through, the core switching language without a reload, and auto-detection
restricted to the set on real speech with the multilingual model: 0.8 s of English, from which
Whisper alone may guess another language, is read in one of the user's languages, whichever the
processor's kernels make it hear."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.languages import LANGUAGES, language_name, next_language, parse_languages, restrict


def test_whisper_languages_by_name_match_faster_whisper() -> None:
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    assert set(LANGUAGES) == set(_LANGUAGE_CODES)
    assert (language_name("de"), language_name("yue"), language_name("")) == (
        "German", "Cantonese", "Auto-detect")


def test_the_settings_set_is_parsed_and_checked() -> None:
    assert parse_languages(" en, FR ;de, fr") == ("en", "fr", "de")
    assert parse_languages("") == ()
    with pytest.raises(ValueError, match="unknown language code 'xx'"):
        parse_languages("en, xx")


def test_detection_is_restricted_to_the_set() -> None:
    ranked = [("hi", 0.5), ("en", 0.3), ("fr", 0.2)]
    assert restrict(ranked, ()) == "hi"
    assert restrict(ranked, ("fr", "en")) == "en"
    assert restrict(ranked, ("ja",)) is None


def test_the_cycle_goes_through_auto_detect_and_each_language() -> None:
    assert [next_language(c, ("en", "fr")) for c in ("", "en", "fr", "de")] == [
        "en", "fr", "", "en"]
    assert next_language("", ()) == ""


def test_the_core_switches_language_for_the_next_decodes() -> None:
    from engine.core.policy import PolicyOptions, StreamingPolicy

    policy = StreamingPolicy(PolicyOptions(language=None, languages=("en", "fr")))
    policy.prompt.add("Bonjour à tous.", at=0.0, language="fr")
    policy.set_language("de")
    assert (policy.options.language, policy.options.languages) == ("de", ())
    assert policy.prompt.language == "de"
    assert not policy.prompt.prompt(1.0, anchor=False)  # the French history is gone
    policy.set_language(None, ("en", "fr"))
    assert (policy.options.language, policy.options.languages) == (None, ("en", "fr"))


# 0.8 s of "God bless ..." (an arctic prompt): too little for base to be sure of the language.
SHORT_CLIP = "arctic-axb-a0006.wav"


def _short(shared_audio: Path):  # type: ignore[no-untyped-def]
    from engine.audio.decode import load_audio

    return load_audio(shared_audio / SHORT_CLIP)[:12800]


@pytest.fixture(scope="module")
def base_runner():  # type: ignore[no-untyped-def]
    from engine.asr import local_runner

    runner = local_runner("base", streams=1, cpu_threads=2)
    runner.load()
    return runner


@pytest.mark.model
def test_short_english_is_not_taken_for_a_language_never_spoken(
        base_runner, shared_audio: Path) -> None:  # type: ignore[no-untyped-def]
    """Whatever Whisper alone detects, a decode restricted to the user's languages is in one
    of them (for a set with English and one without), and reads as the same clip decoded with
    that language pinned, in the same run."""
    from engine.types import DecodeOptions, DecodeRequest

    audio = _short(shared_audio)
    for languages in (("en", "fr"), ("fr", "de")):
        among = base_runner.decode_batch([DecodeRequest(
            audio, DecodeOptions(beam_size=1, languages=languages))])[0]
        assert among.language in languages, (languages, among.language)
        pinned = base_runner.decode_batch([DecodeRequest(
            audio, DecodeOptions(beam_size=1, language=among.language))])[0]
        assert among.text == pinned.text, (among.text, pinned.text)


@pytest.mark.model
def test_faster_whisper_loop_restricts_detection_too(shared_audio: Path) -> None:
    """faster-whisper's own loop keeps the detected language within the user's languages."""
    from engine.asr.sequential import SequentialRunner
    from engine.types import DecodeOptions, DecodeRequest

    runner = SequentialRunner("base", streams=1, cpu_threads=2)
    runner.load()
    audio = _short(shared_audio)
    for languages in (("en", "fr"), ("fr", "de")):
        result = runner.decode_batch([DecodeRequest(
            audio, DecodeOptions(beam_size=1, languages=languages))])[0]
        assert result.language in languages, (languages, result.language)
