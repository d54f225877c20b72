"""`sottovoce transcribe --replacements FILE`: the app's replacement rules on file transcripts."""

from __future__ import annotations

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
    rc, plain, _ = run_cli(capsys, str(jfk_wav))
    assert rc == 0 and "Americans" in plain and "country" in plain
    rules = tmp_path / "rules.txt"
    rules.write_text("# test\n/americans/i => friends\ncountry | countries => nation\n")
    rc, replaced, _ = run_cli(capsys, "--replacements", str(rules), str(jfk_wav))
    assert rc == 0  # a case-insensitive rule keeps the capital it replaced
    assert replaced == plain.replace("Americans", "Friends").replace("country", "nation")
