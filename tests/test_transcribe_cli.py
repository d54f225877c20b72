"""`sottovoce transcribe` end to end with the real tiny.en model on real speech: every output
format parsed back, many containers/rates/channel counts, every bad-input case, atomic writes."""

from __future__ import annotations

import errno
import os
import pty
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.subtitles import parse_json, parse_srt, parse_txt, parse_vtt

from app.cli import main
from bench.evaluation import error_rate
from engine.asr.fake import ScriptedRunner
from engine.atomic import OutputWriteError, atomic_write_text
from engine.audio.decode import load_audio
from engine.core.form import has_form
from engine.types import SAMPLE_RATE, DecodeOptions

REPO = Path(__file__).resolve().parents[1]
JFK_TEXT = ("And so my fellow Americans, ask not what your country can do for you, "
            "ask what you can do for your country.")
SOX = "sox"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["transcribe", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def sox(*args: str | Path) -> None:
    subprocess.run([SOX, *map(str, args)], check=True, capture_output=True, timeout=60)


def transcode(src: Path, dst: Path, codec: str, with_video: bool = False) -> Path:
    """Re-encode ``src`` with PyAV (mp3/aac need fixed frame sizes), optionally muxing a small
    video stream so the input is a real video file."""
    import av

    frame_size = {"libmp3lame": 1152, "aac": 1024}[codec]
    with av.open(str(src)) as inp, av.open(str(dst), "w") as out:
        src_stream = inp.streams.audio[0]
        layout = "stereo" if src_stream.channels == 2 else "mono"
        stream = out.add_stream(codec, rate=src_stream.rate, layout=layout)
        # Every stream must exist before the first packet is muxed (that writes the header).
        video = out.add_stream("mpeg4", rate=1) if with_video else None
        if video is not None:
            video.width = video.height = 64
            video.pix_fmt = "yuv420p"
        resampler = av.AudioResampler(format=stream.codec_context.format.name, layout=layout,
                                      rate=src_stream.rate, frame_size=frame_size)
        for frame in [*inp.decode(src_stream), None]:
            for chunk in resampler.resample(frame):
                out.mux(stream.encode(chunk))
        out.mux(stream.encode(None))
        if video is not None:
            for i in range(11):
                picture = av.VideoFrame.from_ndarray(np.full((64, 64, 3), i * 20, np.uint8),
                                                     format="rgb24")
                picture.pts = i
                out.mux(video.encode(picture))
            out.mux(video.encode(None))
    return dst


def assert_jfk(text: str) -> None:
    """The JFK excerpt's 22 words, read as tiny.en reads them on any processor: it misreads at
    most one ("American") and two more still pass; a capital first. (With oneDNN's AVX2 kernels
    it sometimes writes the excerpt without any punctuation, so none is asked for.)"""
    assert error_rate([JFK_TEXT], [text]) <= 3 / 22, text
    assert text.strip()[0].isupper(), text


# ------------------------------------------------------------------ good input


@pytest.mark.model
def test_jfk_prints_transcript_to_stdout(capsys: pytest.CaptureFixture[str],
                                         jfk_wav: Path) -> None:
    rc, out, err = run_cli(capsys, str(jfk_wav))
    assert rc == 0 and err == ""
    assert_jfk(out)
    # A line for each sentence the decode wrote, however Whisper cut it into segments (after
    # "do for you" with AVX-512 kernels): no line ends mid-sentence.
    lines = out.splitlines()
    assert out.endswith("\n") and all(lines) and all(has_form(line) for line in lines[:-1]), out


@pytest.mark.model
def test_console_script_entry_point(jfk_wav: Path) -> None:
    """The real process boundary: argv parsing, exit status, stdout."""
    proc = subprocess.run([sys.executable, "-m", "app.cli", "transcribe", "--beam-size", "1",
                           str(jfk_wav)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert_jfk(proc.stdout)


@pytest.mark.model
def test_every_format_from_many_containers_parses_back(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, jfk_wav: Path) -> None:
    """One input per container/rate/layout, all four formats, read back and checked."""
    stereo44 = tmp_path / "in" / "jfk-44k-stereo.wav"
    stereo44.parent.mkdir()
    sox(jfk_wav, "-r", "44100", "-c", "2", stereo44)
    inputs = {
        # Same stem twice: the second output is named from its full name (jfk.wav.txt)
        # instead of overwriting.
        "txt": [tmp_path / "in" / "jfk.flac", tmp_path / "in" / "8k" / "jfk.wav"],
        "srt": [stereo44, transcode(stereo44, tmp_path / "in" / "jfk.mp4", "aac", True)],
        "vtt": [tmp_path / "in" / "jfk.ogg"],
        "json": [transcode(stereo44, tmp_path / "in" / "jfk.mp3", "libmp3lame")],
    }
    sox(jfk_wav, inputs["txt"][0])
    inputs["txt"][1].parent.mkdir()
    sox(jfk_wav, "-r", "8000", inputs["txt"][1])
    sox(stereo44, inputs["vtt"][0])
    out_dir = tmp_path / "out"
    for fmt, files in inputs.items():
        rc, out, err = run_cli(capsys, "--format", fmt, "-o", str(out_dir), *map(str, files))
        assert (rc, out, err) == (0, "", ""), err
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "jfk-44k-stereo.srt", "jfk.json", "jfk.srt", "jfk.txt", "jfk.vtt", "jfk.wav.txt"]
    duration = 11 * SAMPLE_RATE
    for name in ("jfk.txt", "jfk.wav.txt"):
        assert_jfk(parse_txt((out_dir / name).read_text()))
    for name in ("jfk.srt", "jfk-44k-stereo.srt"):
        cues = parse_srt((out_dir / name).read_text())
        assert_jfk(" ".join(c.text for c in cues))
        assert all(0 <= c.start <= c.end <= duration for c in cues)
    assert_jfk(" ".join(c.text for c in parse_vtt((out_dir / "jfk.vtt").read_text())))
    transcript = parse_json((out_dir / "jfk.json").read_text())
    assert_jfk(transcript.text)
    assert transcript.language == "en" and transcript.duration >= duration
    starts = [w.start for w in transcript.words]
    assert len(starts) >= 20 and starts == sorted(starts)
    assert not list(out_dir.glob(".*"))  # no temp files left behind


@pytest.mark.model
def test_several_files_to_stdout_get_headers(capsys: pytest.CaptureFixture[str],
                                             shared_audio: Path) -> None:
    """Each file's text under its header, in order: the text each gives alone, in this run."""
    names = [shared_audio / "cmusphinx-goforward.wav",
             shared_audio / "speechrecognition-english-one-two-three.wav"]
    alone = []
    for name in names:
        rc, out, err = run_cli(capsys, "--beam-size", "1", str(name))
        assert rc == 0 and err == "" and out.strip(), out
        alone.append(out)
    rc, out, err = run_cli(capsys, "--beam-size", "1", *map(str, names))
    assert rc == 0 and err == ""
    assert out == f"==> {names[0]} <==\n{alone[0]}\n==> {names[1]} <==\n{alone[1]}"


@pytest.mark.model
def test_silence_gives_no_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """tiny.en says "You" on 3 s of digital silence; that must not reach the output."""
    quiet = tmp_path / "silence.wav"
    sox("-n", "-r", "16000", "-c", "1", "-b", "16", quiet, "trim", "0", "3")
    rc, out, err = run_cli(capsys, str(quiet))
    assert (rc, out, err) == (0, "", "")


# ------------------------------------------------------------------ bad input


def make_bad_input(kind: str, folder: Path) -> Path:
    path = folder / f"{kind}.wav"
    if kind == "missing":
        return path
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "corrupt":
        path.write_bytes(np.random.default_rng(7).integers(0, 256, 40_000, np.uint8).tobytes())
    elif kind == "text-renamed":
        path.write_text("This is a shopping list, not audio.\n" * 50)
    elif kind == "directory":
        path.mkdir()
    elif kind == "header-only":
        sox("-n", "-r", "16000", "-c", "1", "-b", "16", path, "trim", "0", "0")
    return path


BAD_KINDS = ("missing", "empty", "corrupt", "text-renamed", "directory", "header-only")


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_input_is_one_line_error_naming_the_file(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str) -> None:
    bad = make_bad_input(kind, tmp_path)
    rc, out, err = run_cli(capsys, "-o", str(tmp_path / "out"), str(bad))
    assert rc == 1 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("sottovoce: error: ")
    assert str(bad) in err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


@pytest.mark.model
def test_mixed_good_and_bad_files(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                  jfk_wav: Path, shared_audio: Path) -> None:
    bad = [make_bad_input(kind, tmp_path) for kind in BAD_KINDS]
    good = [jfk_wav, shared_audio / "cmusphinx-goforward.wav"]
    order = [bad[0], good[0], *bad[1:3], good[1], *bad[3:]]
    rc, out, err = run_cli(capsys, "--format", "json", "-o", str(tmp_path / "out"),
                           *map(str, order))
    assert rc == 1 and out == ""
    lines = err.splitlines()
    assert len(lines) == len(bad)
    for path, line in zip(bad, lines, strict=True):  # reported in order, one line each
        assert str(path) in line
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["cmusphinx-goforward.json", "jfk-inaugural-1961-excerpt.json"]
    assert_jfk(parse_json((tmp_path / "out" / written[1]).read_text()).text)


@pytest.mark.parametrize("args", [
    ["--beam-size", "0", "x.wav"],
    ["--language", "e1", "x.wav"],
    ["-o", "{file}", "x.wav"],
])
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                             args: list[str]) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    rc, out, err = run_cli(capsys, *[a.format(file=a_file) for a in args])
    assert rc == 2 and out == "" and "sottovoce: error:" in err


@pytest.mark.parametrize("args", [[], ["--format", "doc", "x.wav"], ["--device", "tpu", "x.wav"]])
def test_argparse_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["transcribe", *args])
    assert stop.value.code == 2
    assert "usage:" in capsys.readouterr().err


@pytest.mark.parametrize("app_wide", [False, True])
def test_model_that_cannot_load_fails_once_clearly(capsys: pytest.CaptureFixture[str],
                                                   jfk_wav: Path, app_wide: bool) -> None:
    """Also as the app-wide option (`sottovoce --model X transcribe F`), which must not be
    silently replaced by the default model."""
    args = ["transcribe", "--model", "tiny-pirate", str(jfk_wav), str(jfk_wav)]
    if app_wide:
        args = ["--model", "tiny-pirate", "transcribe", str(jfk_wav), str(jfk_wav)]
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == 1 and out == ""
    assert err.count("\n") == 1 and "unknown model 'tiny-pirate'" in err


@pytest.mark.model
def test_progress_bar_on_a_terminal(jfk_wav: Path) -> None:
    """stderr on a pseudo-terminal: a bar with audio seconds done/total and the ETA."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "app.cli", "transcribe", "--beam-size", "1", str(jfk_wav)],
            stdout=subprocess.PIPE, stderr=follower, cwd=REPO, timeout=120,
            env={**os.environ, "COLUMNS": "100"})
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    bar = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0
    assert "jfk-inaugural-1961-excerpt.wav" in bar and "11.0/11.0 s audio" in bar, bar
    assert "100%" in bar and "<" in bar  # elapsed<remaining is tqdm's ETA field
    assert_jfk(proc.stdout.decode())


# ------------------------------------------------------------------ atomic writes


def test_atomic_write_replaces_whole_file_and_keeps_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    atomic_write_text(target, "first\n")
    target.chmod(0o640)
    atomic_write_text(target, "second\n")
    assert target.read_text() == "second\n" and target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    with pytest.raises(OutputWriteError, match="missing-dir"):
        atomic_write_text(tmp_path / "missing-dir" / "x.txt", "x")


def test_disk_full_leaves_old_file_untouched(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk can't be made safely on a shared machine: os.write is made to fail with
    ENOSPC (a fake, the one place here) after the first bytes."""
    target = tmp_path / "out.txt"
    target.write_text("old transcript\n")
    real_write = os.write

    def write_then_fail(fd: int, data: bytes | memoryview) -> int:
        real_write(fd, bytes(data[:3]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", write_then_fail)
    with pytest.raises(OutputWriteError, match="no space left.*not changed"):
        atomic_write_text(target, "new transcript, longer than three bytes\n")
    monkeypatch.undo()
    assert target.read_text() == "old transcript\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


@pytest.mark.model
def test_cli_write_failure_is_reported_and_leaves_nothing(tmp_path: Path, jfk_wav: Path) -> None:
    """A real kernel refusal mid-write (file size limit) while the CLI writes its JSON."""
    code = ("import resource, signal, sys\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (200, resource.RLIM_INFINITY))\n"
            "from app.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    out_dir = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", code, "transcribe", "--format", "json",
                           "--beam-size", "1", "-o", str(out_dir), str(jfk_wav)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "could not write" in proc.stderr and "jfk-inaugural-1961-excerpt.json" in proc.stderr
    assert list(out_dir.iterdir()) == []


# ------------------------------------------------------------------ the file entry point


class _ScriptedRunner:
    """The scripted fake as a `Runner` that must be loaded before it decodes."""

    streams, device = 1, "cpu"
    info = ScriptedRunner(["x"]).info

    def __init__(self, text: str) -> None:
        self.fake, self.loaded = ScriptedRunner([text]), False

    def load(self) -> None:
        self.loaded = True

    def decode_batch(self, requests):  # type: ignore[no-untyped-def]
        assert self.loaded
        return self.fake.decode_batch(requests)


class _ScriptedLoop(_ScriptedRunner):
    """A stand-in for faster-whisper's own loop: one segment over the whole recording."""

    def iter_segments(self, audio, options):  # type: ignore[no-untyped-def]
        assert self.loaded
        return iter(self.fake._decode(audio, options).segments), "en"  # any length


def test_the_cli_follows_the_file_generator_and_loads_the_runner_first(shared_audio) -> None:  # type: ignore[no-untyped-def]
    """`transcribe` loads the runner, then reports every `Progress` event of
    `engine.files.transcribe_file` (no engine probe)."""
    import app.commands.transcribe as command

    audio = load_audio(shared_audio / "mfa-acoustic-corpus.wav")
    seen: list[tuple[int, int]] = []
    decoders = command.Decoders(_ScriptedRunner("hello there."), None, 0.0)  # type: ignore[arg-type]
    transcript = command.transcribe(audio, decoders, DecodeOptions(),
                                    lambda done, total: seen.append((done, total)))
    assert seen[0] == (0, len(audio)) and seen[-1] == (len(audio), len(audio))
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert "hello there" in transcript.text and transcript.extra["engine"] == "longform"
    assert not hasattr(command, "long_form_entry")


def test_auto_engine_uses_the_sequential_loop_only_for_short_recordings() -> None:
    import app.commands.transcribe as command

    loop, runner = _ScriptedLoop("short one."), _ScriptedRunner("long one.")
    decoders = command.Decoders(runner, loop, command.AUTO_BATCHED_MIN_SECONDS)  # type: ignore[arg-type]
    speech = np.sin(np.arange(10 * SAMPLE_RATE) / 10).astype(np.float32) * 0.3
    short = command.transcribe(speech, decoders, DecodeOptions())
    assert short.text == "short one." and short.extra["engine"] == "sequential"
    assert loop.loaded and not runner.loaded  # only the model a file needs is loaded
    with pytest.raises(ValueError, match="unknown engine"):
        command.make_decoders("tiny.en", "cpu", "auto", "turbo")


class _BeamRecorder(_ScriptedLoop):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.beams: list[int] = []

    def decode_batch(self, requests):  # type: ignore[no-untyped-def]
        self.beams += [r.options.beam_size for r in requests]
        return super().decode_batch(requests)

    def iter_segments(self, audio, options):  # type: ignore[no-untyped-def]
        self.beams.append(options.beam_size)
        return super().iter_segments(audio, options)


@pytest.mark.parametrize(("asked", "short_beam", "long_beam"), [(None, 5, 1), (3, 3, 3), (1, 1, 1)])
def test_each_engine_gets_its_best_beam_unless_one_is_asked_for(
        shared_audio: Path, asked: int | None, short_beam: int, long_beam: int) -> None:
    """By default a short file takes faster-whisper's loop at beam 5 and a long one the
    pipeline's greedy first decodes (beam 5 there cost 1.85x the time for no gain); a
    ``--beam-size`` applies to both."""
    import app.commands.transcribe as command
    from engine.files import FileOptions

    loop, runner = _BeamRecorder("short one."), _BeamRecorder("long one.")
    decoders = command.Decoders(runner, loop, command.AUTO_BATCHED_MIN_SECONDS)  # type: ignore[arg-type]
    options = FileOptions.for_beam(command.decode_options(None, asked, "txt"), asked)
    speech = np.tile(load_audio(shared_audio / "jfk-inaugural-1961-excerpt.wav"), 12)  # 132 s
    assert command.transcribe(speech[:10 * SAMPLE_RATE], decoders, options).text == "short one."
    assert "long one." in command.transcribe(speech, decoders, options).text
    assert loop.beams == [short_beam]
    assert runner.beams and set(runner.beams) == {long_beam}  # (no chunk was unsure)


def test_short_and_long_files_get_the_model_laid_out_for_their_decoder() -> None:
    """faster-whisper's loop gets one replica on all cores, the pipeline two decode streams."""
    import app.commands.transcribe as command

    auto = command.make_decoders("tiny.en", "cpu", "auto", "auto")
    assert auto.sequential is not None and auto.sequential_below_s == 120.0
    if (os.cpu_count() or 1) >= 2:
        assert auto.sequential.streams == 1
    batched = command.make_decoders("tiny.en", "cpu", "auto", "batched")
    assert batched.sequential is None
    assert command.make_decoders("tiny.en", "cpu", "auto", "sequential").sequential_below_s > 1e9


# ------------------------------------------------------------------ --engine


@pytest.mark.model
@pytest.mark.parametrize("engine", ["sequential", "batched"])
def test_both_engines_write_json_with_word_timings(
        capsys: pytest.CaptureFixture[str], jfk_wav: Path, engine: str) -> None:
    rc, out, err = run_cli(capsys, "--engine", engine, "--format", "json", str(jfk_wav))
    assert rc == 0 and err == ""
    transcript = parse_json(out)
    assert transcript.extra["engine"] == {"sequential": "sequential", "batched": "longform"}[engine]
    assert_jfk(transcript.text)
    words = transcript.words
    assert len(words) >= 20 and all(w.start <= w.end for w in words)


def test_interrupted_write_removes_its_temp_file(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C between write and rename: the target keeps its old text, no temp file remains."""
    target = tmp_path / "out.txt"
    target.write_text("old\n")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(target, "new\n")
    monkeypatch.undo()
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
