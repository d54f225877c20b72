"""Accuracy of `sottovoce transcribe`'s sequential decoder on the shared real-speech corpus.

Each limit sits at least 1.5 points above every figure measured (CPU int8, beam 5, the CLI's
TXT settings), so a regression fails while the processor's kernels (CTranslate2 picks MKL or
oneDNN, AVX-512 or AVX2; their int8 arithmetic changes a few words) do not:

  tiny.en, 26 English short clips (180 s)      corpus WER 9.16 % (MKL, AVX-512), 9.64 % (oneDNN,
                                               AVX2), 10.36 % (an AMD EPYC)      -> limit 12 %
  tiny.en, 231 s long-form reading             WER 2.65 % (both kernels; 4.69 % with earlier
                                               versions)                         -> limit 6.2 %
  base, 9 non-English short clips (50 s)       mean WER/CER 19.1 % (MKL), 18.2 % (oneDNN AVX2)
                                                                     -> limit 23 %, languages exact

The batched long-form engine (``--engine batched``) is judged against this decoder's reading of
the 231 s file by its own tests (tests/test_longform_context.py).
"""

from __future__ import annotations

import math
import statistics

import pytest
from support.long_reading import faster_whisper_decode, long_reading

from app.commands.transcribe import Decoders, decode_options, transcribe
from bench.evaluation import ManifestEntry, english, error_rate
from engine.audio.decode import load_audio

SHORT_WER_LIMIT = 0.12
LONG_WER_LIMIT = 0.062
BASE_MEAN_ERROR_LIMIT = 0.23


def sequential(transcriber) -> Decoders:  # type: ignore[no-untyped-def]
    """``--engine sequential`` over ``transcriber`` (the pipeline's runner is never used)."""
    return Decoders(runner=None, sequential=transcriber, sequential_below_s=math.inf)  # type: ignore[arg-type]


def transcribe_texts(transcriber, entries: list[ManifestEntry]) -> list[str]:  # type: ignore[no-untyped-def]
    decoders = sequential(transcriber)
    options = decode_options(None, 5, "txt")
    return [transcribe(load_audio(e.path), decoders, options).text for e in entries]


def test_tiny_en_short_english_set(tiny_transcriber, manifest: list[ManifestEntry]) -> None:  # type: ignore[no-untyped-def]
    entries = english(manifest, ("short",))
    assert len(entries) == 26
    hypotheses = transcribe_texts(tiny_transcriber, entries)
    wer = error_rate([e.text for e in entries], hypotheses)
    print(f"tiny.en short-set WER {wer:.4f}")
    assert wer <= SHORT_WER_LIMIT


def test_tiny_en_long_file(tiny_transcriber, manifest: list[ManifestEntry]) -> None:  # type: ignore[no-untyped-def]
    """The 231 s reading, decoded once per run (tests/support/long_reading.py: the pipeline's
    tests judge themselves against this decode)."""
    entries = english(manifest, ("long",))
    assert [e.path.name for e in entries] == ["long-ljspeech-LJ001-0001-0032.wav"]
    _, reference = long_reading()
    assert reference == entries[0].text
    wer = error_rate([reference], [faster_whisper_decode(tiny_transcriber).text])
    print(f"tiny.en long-file WER {wer:.4f}")
    assert wer <= LONG_WER_LIMIT


@pytest.fixture(scope="module")
def base_transcriber():  # type: ignore[no-untyped-def]
    from engine.asr.sequential import SequentialRunner

    transcriber = SequentialRunner("base")
    transcriber.load()
    return transcriber


def test_base_detects_language_and_transcribes_non_english(
        base_transcriber, manifest: list[ManifestEntry]) -> None:  # type: ignore[no-untyped-def]
    """Language detection (no --language given) and WER, or CER for zh/ja/ko."""
    entries = [e for e in manifest if e.language != "en" and e.kind == "short"]
    assert len(entries) == 9
    decoders = sequential(base_transcriber)
    options = decode_options(None, 5, "txt")
    errors = {}
    for entry in entries:
        transcript = transcribe(load_audio(entry.path), decoders, options)
        assert transcript.language == entry.language, entry.path.name
        errors[entry.language] = error_rate([entry.text], [transcript.text], entry.language)
    print("base error rates:", {k: round(v, 3) for k, v in errors.items()})
    assert statistics.fmean(errors.values()) <= BASE_MEAN_ERROR_LIMIT


@pytest.mark.model
def test_bench_runs_on_any_manifest_of_that_format(tmp_path, jfk_wav, shared_audio) -> None:  # type: ignore[no-untyped-def]
    """bench/transcribe.py on a small foreign manifest (relative and absolute paths, a
    non-English row it must skip, only the required fields): one pass, JSON in the agreed shape."""
    import json
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    shutil.copy(jfk_wav, tmp_path / "speech.wav")
    rows = [
        {"file": "speech.wav", "text": "And so my fellow Americans ask not what your country can "
         "do for you ask what you can do for your country", "language": "en"},
        {"file": str(shared_audio / "cmusphinx-goforward.wav"), "language": "en",
         "text": "go forward ten meters", "kind": "short"},
        {"file": str(shared_audio / "picovoice-de.wav"), "text": "egal", "language": "de"},
    ]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "result" / "bench.json"
    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "bench/transcribe.py", "--manifest", str(manifest),
                           "--out", str(out), "--repeat", "1"], capture_output=True, text=True,
                          cwd=repo, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "faster_whisper_default" in proc.stdout and "RTF" in proc.stdout
    result = json.loads(out.read_text())
    assert result["files"] == 2 and 13.5 < result["audio_s"] < 14.5
    for name in ("ours", "faster_whisper_default"):
        assert result[name]["rtf"] > 0 and 0 <= result[name]["wer"] < 0.2


@pytest.mark.parametrize(("written", "spoken"), [
    ("1. Two. 3.", "one two three"),  # the streamed "one two three" clip, word by word
    ("1, 2, 3", "One, two, three."),
    ("Go forward 10 meters.", "go forward ten meters"),
])
def test_digits_and_number_words_score_the_same(written: str, spoken: str) -> None:
    """Whisper's normaliser joins spoken digits ("one two three" -> "123") but not written
    ones ("1, 2, 3" -> "one 2 3"); lone digits are spelled first, on both sides alike."""
    assert error_rate([spoken], [written]) == 0.0
    assert error_rate([written], [spoken]) == 0.0


def test_spelling_leaves_longer_numbers_alone() -> None:
    from bench.evaluation import spell_lone_digits

    text = "At 3:30 pay $5 or 5% of 1.5 kg, 12 items, the 7th, class-1 and 1."
    assert spell_lone_digits(text) == (
        "At 3:30 pay $5 or 5% of 1.5 kg, 12 items, the 7th, class-1 and one.")


def test_words_in_parentheses_are_spoken_words() -> None:
    """A reference's parentheses hold words the reader says (the long LJ reading has one of 13
    words); Whisper's normaliser deleted them, so every transcript scored them as insertions.
    Bracketed tags are still not words."""
    reference = "the first Bible (which was printed at Maintz in the year fourteen sixty-two) imitates"
    said = "The first Bible, which was printed at Maintz in the year 1462, imitates."
    assert error_rate([reference], [said]) == 0.0
    assert error_rate([reference], ["The first Bible imitates."]) == 9 / 13  # (1462 is a word)
    assert error_rate(["go forward"], ["[BLANK_AUDIO] Go forward."]) == 0.0


def test_an_ellipsis_is_not_a_word() -> None:
    """Whisper's normaliser turns "..." into a "." word; the short-context decoder ends
    utterances with "..." more often than the offline one, so it scored an insertion."""
    assert error_rate(["in this regard"], ["In this regard..."]) == 0.0


def test_formatted_wer_counts_lost_case_and_punctuation() -> None:
    from bench.evaluation import formatted, formatted_error_rate

    ref = "And so, my fellow Americans: ask not."
    assert formatted(ref) and not formatted("AND SO MY FELLOW AMERICANS")
    assert formatted_error_rate([ref], [ref]) == 0.0
    # The normalised WER can't see the loss; the formatted one counts "so" "Americans" "not"
    # (punctuation) and "and" (case): 4 of 7 words.
    lost = "and so my fellow Americans ask not"
    assert error_rate([ref], [lost]) == 0.0
    assert formatted_error_rate([ref], [lost]) == pytest.approx(4 / 7)
    # Typographic quotes are the same character to a reader; unformatted references are skipped.
    assert formatted_error_rate(["It\u2019s here."], ["It's here."]) == 0.0
    assert math.isnan(formatted_error_rate(["NO FORMAT HERE"], ["No format here."]))
