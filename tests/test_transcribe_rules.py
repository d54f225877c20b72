"""`sottovoce transcribe --replacements FILE`: the app's replacement rules on file transcripts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["transcribe", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_bad_rules_file_is_a_usage_error_naming_the_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rules = tmp_path / "rules.txt"
    rules.write_text("ok => fine\nno arrow here\n")
    rc, out, err = run_cli(capsys, "--replacements", str(rules), "x.wav")
    assert rc == 2 and out == ""
    assert f"--replacements {rules}: replacement rules, line 2: no '=>'" in err
    rc, out, err = run_cli(capsys, "--replacements", str(tmp_path / "missing.txt"), "x.wav")
    assert rc == 2 and "missing.txt" in err


@pytest.mark.model
def test_rules_apply_to_the_transcript(capsys: pytest.CaptureFixture[str], jfk_wav: Path,
                                       tmp_path: Path) -> None:
    """The rules are written for the words this run's plain transcript holds (the model may
    spell them otherwise on another processor): a case-insensitive regular expression on a
    capitalised word and a plain rule with two spellings on a lower-case one."""
    rc, plain, _ = run_cli(capsys, str(jfk_wav))
    words = re.findall(r"[A-Za-z]+", plain)
    assert rc == 0 and words, plain
    capital = next((w for w in words[1:] if w[0].isupper()), words[0])
    lower = max((w for w in words if w.islower() and len(w) > 3), key=words.count)
    rules = tmp_path / "rules.txt"
    rules.write_text(f"# test\n/{capital.lower()}/i => friends\n{lower} | {lower}zz => nation\n")
    rc, replaced, _ = run_cli(capsys, "--replacements", str(rules), str(jfk_wav))
    assert rc == 0  # a case-insensitive rule keeps the capital it replaced
    expected = plain
    for word, by in ((capital, "friends"), (lower, "nation")):  # whole words, case followed
        expected = re.sub(rf"(?<!\w){word}(?!\w)",
                          lambda m, by=by: by.capitalize() if m[0][0].isupper() else by,
                          expected, flags=re.IGNORECASE)
    assert replaced == expected and "Friends" in replaced and "nation" in replaced
