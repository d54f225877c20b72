"""Custom vocabulary on real speech: a name tiny.en gets wrong comes out right with it, through
the live engine (push-to-talk), a real server on 127.0.0.1 (in the hello and as an update
message), files and the CLI; a vocabulary is never recited (silence, an unrelated clip); it
never decides or changes the language (multilingual base model).

How tiny.en misspells a name depends on the processor's kernels, so the tests about names
replay recorded decodes of tiny.en (tests/recordings/vocabulary-*.jsonl, recorded with
SOTTOVOCE_RECORD=1). The tests on the real model assert what holds on any processor: no term
recited, the language as without the vocabulary, the CLI's text within 2 words of the
reference."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support.recordings import recorded_runner

from bench.evaluation import error_rate, normalize
from engine.asr.ct2_decoder import Ct2Runner
from engine.audio.decode import load_audio
from engine.audio.sources import FileSource
from engine.core.policy import PolicyOptions
from engine.errors import ModelNotFoundError
from engine.events import Event, FinalText
from engine.files import transcribe_file
from engine.live import DecodeCost, LiveOptions, LocalLiveEngine
from engine.remote.client import RemoteLiveEngine, RemoteOptions
from engine.server.server import ServerOptions, ServerThread, TranscriptionServer
from engine.server.session import SessionOptions
from engine.types import SAMPLE_RATE, DecodeOptions, DecodeRequest, Runner, Segment, Transcript
from engine.vocabulary import parse
from engine.wire import protocol as p

pytestmark = pytest.mark.timeout(600)

CONCORD = "ls-tc-6930-75918-0000.wav"  # "CONCORD RETURNED TO ITS PLACE AMIDST THE TENTS"
CLAFLIN = "ami-es2011a-headset0-40s-46s.wav"  # "I'M ABIGAIL CLAFLIN YOU CAN CALL ME ABBIE"
NAMES = parse("# the shared clips' names\nConcord\nAbigail Claflin\nAbbie\nQuilter\n"
              "Montreal Forced Aligner\n").terms()
CONCORD_TEXT = "Concord returned to its place amidst the tents."
CLAFLIN_TEXT = "I'm Abigail Claflin. You can call me Abbie."
# How tiny.en spells the names without a vocabulary (it varies with the path's cut and window).
CONCORD_FIXES = {r"Concorde|Con chord|Conc chord": "Concord"}
CLAFLIN_FIXES = {r"Class 1|Klaflin|Klafflin|Claphlin|Claflin": "Claflin", r"Abi|Abby": "Abbie"}


def same_but_names(with_: list[str], without: list[str], fixes: dict[str, str]) -> None:
    """One final each; ``with_`` (decoded with the vocabulary) is ``without`` with its names set
    right, spelled exactly (case kept); other words unchanged (punctuation may differ)."""
    assert len(with_) == len(without) == 1, (with_, without)
    assert normalize(with_[0]) == normalize(fixed(without[0], fixes)), (with_, without)
    for right in fixes.values():
        assert re.search(rf"\b{right}\b", with_[0]), with_


def fixed(without: str, fixes: dict[str, str]) -> str:
    """``without`` (decoded without a vocabulary) with its names set right: what a decode
    with the vocabulary must give (the names right, nothing else changed)."""
    original = without
    for wrong, right in fixes.items():
        assert re.search(rf"\b({wrong})\b", without), without
        without = re.sub(rf"\b({wrong})\b", right, without)
    assert without != original, original  # one name at least was wrong: what it is for
    return without


def tiny() -> Runner:
    fast = Ct2Runner("tiny.en")
    fast.load()
    return fast


@pytest.fixture
def recorded(request: pytest.FixtureRequest) -> Runner:
    """tiny.en's decodes of this test, recorded (tests/recordings/vocabulary-NAME.jsonl)."""
    name = request.node.originalname.removeprefix("test_").replace("_", "-")
    return recorded_runner(f"vocabulary-{name}", tiny)


@pytest.fixture(scope="module")
def runner(tiny_transcriber: Runner) -> Ct2Runner:
    fast = Ct2Runner(tiny_transcriber.model)  # type: ignore[attr-defined]
    fast.load()
    return fast


def dictate(runner: Runner, source: FileSource, seconds: float,
            vocabulary: tuple[str, ...] | None, *, finals_only: bool = False) -> list[str]:
    """Push-to-talk held over the whole source; the finals' texts. ``vocabulary`` is set
    through `set_vocabulary` (None: never called). ``finals_only``: no partial or speculative
    decode, whose timing depends on the machine, so the decodes are the same every run."""
    events: list[Event] = []
    policy = PolicyOptions(partials=not finals_only, speculative_finals=not finals_only)
    engine = LocalLiveEngine(events.append, source=source, runner=runner,
                             options=LiveOptions(mode="ptt", journal=False, policy=policy,
                                                 decode_cost=DecodeCost()))  # (modelled)
    if vocabulary is not None:
        engine.set_vocabulary(vocabulary)
    engine.begin_utterance(at=0)
    engine.end_utterance(at=int(seconds * SAMPLE_RATE))
    engine.start()
    assert engine.wait(300), "engine did not stop"
    return [e.text for e in events if isinstance(e, FinalText) and e.text]


def clip(shared_audio: Path, name: str) -> tuple[FileSource, float]:
    seconds = len(load_audio(shared_audio / name)) / SAMPLE_RATE + 1.0
    return FileSource(shared_audio / name, lead_silence_s=0.5, tail_silence_s=0.5), seconds


# (Push-to-talk writes "Concord" right even without the vocabulary since finals get the style
# prompt, engine.core.prompt; files and the CLI still write it wrong without: tested below.)
@pytest.mark.parametrize(("name", "fixes"), [(CLAFLIN, CLAFLIN_FIXES)])
def test_push_to_talk_gets_the_names_right(recorded: Runner, shared_audio: Path, name: str,
                                           fixes: dict[str, str]) -> None:
    """With the vocabulary, the final is the one without it with the misspelled names set
    right and nothing else changed (recorded decodes)."""
    [without] = dictate(recorded, *clip(shared_audio, name), vocabulary=None, finals_only=True)
    assert dictate(recorded, *clip(shared_audio, name), vocabulary=NAMES,
                   finals_only=True) == [fixed(without, fixes)]


def test_files_get_the_names_right(recorded: Runner, shared_audio: Path) -> None:
    """A file transcribed with the vocabulary has the name tiny.en misspells without it
    (recorded decodes)."""
    def text(hotwords: str | None) -> str:
        run = transcribe_file(shared_audio / CONCORD, recorded,
                              DecodeOptions(beam_size=5, word_timestamps=False,
                                            hotwords=hotwords))
        return Transcript(tuple(s for s in run if isinstance(s, Segment))).text

    assert "Concord " not in text(None)
    assert text(parse("\n".join(NAMES)).as_prompt()) == CONCORD_TEXT


@pytest.mark.model
def test_the_cli_reads_the_vocabulary_file(shared_audio: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str],
                                           manifest: list) -> None:  # type: ignore[type-arg]
    """`transcribe --vocabulary` writes the clip within 2 words of its reference on the real
    model (any processor), and a bad vocabulary file is refused naming its line."""
    from app.cli import main

    words = tmp_path / "names.txt"
    words.write_text("\n".join(NAMES) + "\n[other]\nKubernetes\n", encoding="utf-8")
    assert main(["transcribe", "--vocabulary", str(words), str(shared_audio / CLAFLIN)]) == 0
    said = capsys.readouterr().out.strip()
    reference = next(e.text for e in manifest if e.path.name == CLAFLIN)
    assert error_rate([reference], [said]) <= 2 / len(reference.split()), said
    bad = tmp_path / "bad.txt"
    bad.write_text("[no good]\n", encoding="utf-8")
    assert main(["transcribe", "--vocabulary", str(bad), str(shared_audio / CLAFLIN)]) == 2
    assert "bad.txt: vocabulary line 1" in capsys.readouterr().err


# -- a real server on 127.0.0.1 ----------------------------------------------------------------


@pytest.fixture
def server(recorded: Runner) -> Iterator[ServerThread]:
    """A real server on 127.0.0.1 decoding with tiny.en's recorded decodes; finals only (no
    partial or speculative decode, whose timing depends on the machine)."""
    finals_only = PolicyOptions(partials=False, speculative_finals=False)
    thread = ServerThread(TranscriptionServer(recorded, ServerOptions(
        port=0, session=SessionOptions(policy=finals_only))))
    thread.start()
    yield thread
    thread.stop()


def test_remote_client_sends_its_vocabulary_in_the_hello(server: ServerThread,
                                                        shared_audio: Path) -> None:
    """The client's vocabulary reaches the server's decodes: the names set right, nothing else
    changed (recorded decodes)."""
    def finals(vocabulary: tuple[str, ...]) -> list[str]:
        events: list[Event] = []
        engine = RemoteLiveEngine(events.append, url=f"ws://127.0.0.1:{server.port}",
                                  source=FileSource(shared_audio / CLAFLIN, realtime=False,
                                                    tail_silence_s=1.0),
                                  options=RemoteOptions(language="en"))
        engine.set_vocabulary(vocabulary)
        engine.start()
        assert engine.wait(120), "client did not finish"
        return [e.text for e in events if isinstance(e, FinalText) and e.text]

    same_but_names(finals(NAMES), finals(()), CLAFLIN_FIXES)


def test_a_vocabulary_message_changes_the_session_vocabulary(server: ServerThread,
                                                            shared_audio: Path) -> None:
    """A vocabulary message sets the session's names right, nothing else changed (recorded
    decodes)."""
    from websockets.sync.client import connect

    audio = np.concatenate([load_audio(shared_audio / CLAFLIN),
                            np.zeros(SAMPLE_RATE, dtype=np.float32)])
    client = p.ClientConnection()

    def finals(vocabulary: tuple[str, ...] | None) -> list[str]:
        with connect(f"ws://127.0.0.1:{server.port}", max_size=None) as ws:
            ws.send(p.ClientConnection().hello(p.Hello(session_id="v", language="en")))
            if vocabulary is not None:
                ws.send(client.vocabulary(vocabulary))
            for start in range(0, len(audio), SAMPLE_RATE // 2):
                ws.send(p.float_to_pcm16(audio[start:start + SAMPLE_RATE // 2]))
            ws.send(json.dumps({"type": "end", "v": 1}))
            replies = []
            while not replies or replies[-1]["type"] != "bye":
                replies.append(json.loads(ws.recv(timeout=60)))
        assert not [r for r in replies if r["type"] == "error"], replies
        return [r["text"] for r in replies if r["type"] == "final" and r["text"]]

    same_but_names(finals(NAMES), finals(None), CLAFLIN_FIXES)


# -- never recited -----------------------------------------------------------------------------


@pytest.mark.model
def test_the_vocabulary_is_never_recited(runner: Ct2Runner, shared_audio: Path) -> None:
    """Silence and an unrelated clip give no vocabulary term, live or from a file."""
    terms = re.compile("|".join(re.escape(t) for t in NAMES), re.IGNORECASE)
    rng = np.random.default_rng(7)
    quiet = (rng.standard_normal(4 * SAMPLE_RATE) * 0.001).astype(np.float32)
    silence = shared_audio.parent / "vocabulary-silence.wav"
    import wave

    with wave.open(str(silence), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(p.float_to_pcm16(quiet))
    assert dictate(runner, FileSource(silence), 4.0, vocabulary=NAMES) == []
    source, seconds = clip(shared_audio, "cmusphinx-goforward.wav")
    said = dictate(runner, source, seconds, vocabulary=NAMES)
    assert said and not terms.search(" ".join(said)), said
    hotwords = parse("\n".join(NAMES)).as_prompt()
    for path in (silence, shared_audio / "cmusphinx-goforward.wav"):
        run = transcribe_file(path, runner, DecodeOptions(beam_size=5, hotwords=hotwords))
        text = Transcript(tuple(s for s in run if isinstance(s, Segment))).text
        assert not terms.search(text), text
    # The decode itself, without the policy's checks: short window, one name in the prompt.
    bare = runner.decode_batch([DecodeRequest(quiet, DecodeOptions(
        beam_size=1, short_context=True, hotwords=hotwords))])[0]
    assert not terms.search(bare.text), bare.text


# -- never the language ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base() -> Ct2Runner:
    try:
        model = Ct2Runner("base")
        model.load()
    except ModelNotFoundError as exc:
        pytest.skip(f"the multilingual base model is not installed: {exc}")
    return model


@pytest.mark.model
@pytest.mark.parametrize("name", ["picovoice-de.wav", "picovoice-es.wav", "picovoice-fr.wav"])
def test_an_english_vocabulary_never_decides_the_language(base: Ct2Runner, shared_audio: Path,
                                                          name: str) -> None:
    """With English names as hotwords, a clip in another language is detected as the same
    decode without them detects it (the same run's decode as the oracle); none of the names
    is written; a pinned language stays."""
    from engine.asr.sequential import SequentialRunner

    audio = load_audio(shared_audio / name)
    expected = name.split("-")[1].split(".")[0]
    english = "Concord, Abigail Claflin, Montreal Forced Aligner, Kubernetes, Thanksgiving."
    for short in (True, False):
        plain, detected, pinned = base.decode_batch([
            DecodeRequest(audio, DecodeOptions(beam_size=1, short_context=short)),
            DecodeRequest(audio, DecodeOptions(beam_size=1, short_context=short,
                                               hotwords=english)),
            DecodeRequest(audio, DecodeOptions(beam_size=1, short_context=short,
                                               language=expected, hotwords=english)),
        ])
        assert (detected.language, pinned.language) == (plain.language, expected)
        assert not re.search(r"Concord|Claflin|Montreal|Kubernetes", detected.text)
    sequential = SequentialRunner(base.model)
    assert (sequential.decode(audio, DecodeOptions(hotwords=english)).language
            == sequential.decode(audio, DecodeOptions()).language)
