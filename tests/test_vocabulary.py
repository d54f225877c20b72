"""Custom vocabulary without a model: the settings text, its rendering for Whisper, the recital
check, the policy's decode options, the wire protocol and its limits, the server's batches."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.settings import Settings, from_mapping_report
from engine.core import hotwords
from engine.core.ladder import check
from engine.core.policy import PolicyOptions, StreamingPolicy
from engine.core.segmenter import SegmentAudio, SegmentEnded, SegmentStarted
from engine.events import FinalText, PartialText
from engine.server.scheduler import without_prompts
from engine.types import SAMPLE_RATE, DecodeOptions, DecodeRequest, Segment, Transcript, Word
from engine.vocabulary import Vocabulary, VocabularyError, load, parse
from engine.wire import protocol as p

SETTINGS_TEXT = """# names I dictate
Concord
Abigail   Claflin

[medical]
tachycardia
Concord
[work]
Kubernetes
[medical]
bradycardia
"""


# -- the settings text -------------------------------------------------------------------------


def test_parse_default_and_named_sets() -> None:
    vocab = parse(SETTINGS_TEXT)
    assert vocab.names == ("medical", "work")
    assert vocab.terms() == ("Concord", "Abigail Claflin")
    assert vocab.terms(("medical",)) == ("Concord", "Abigail Claflin", "tachycardia",
                                         "bradycardia")
    assert vocab.terms(("work", "medical", "nope")) == (
        "Concord", "Abigail Claflin", "Kubernetes", "tachycardia", "bradycardia")
    assert parse("").terms() == () and parse("# only a comment\n\n").as_prompt() is None
    assert Vocabulary().terms(("work",)) == ()


@pytest.mark.parametrize(("text", "message"), [
    ("Concord\n[bad name]\nx", "vocabulary line 2: '[bad name]' is not a set name"),
    ("Concord\n\n[]\n", "vocabulary line 3: '[]' is not a set name"),
    ("ok\n[work\nx", "vocabulary line 2: '[work' looks like a set header"),
    ("ok\n" + "x" * 101, "vocabulary line 2: an entry is at most 100 characters (this one has 101)"),
    ("\n".join(f"term{i}" for i in range(201)), "vocabulary line 201: more than 200 entries"),
])
def test_parse_names_the_bad_line(text: str, message: str) -> None:
    with pytest.raises(VocabularyError) as error:
        parse(text)
    assert str(error.value).startswith(message)


def test_settings_refuse_a_bad_vocabulary_and_loading_falls_back(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert Settings(vocabulary=SETTINGS_TEXT).vocabulary == SETTINGS_TEXT
    with pytest.raises(ValueError, match=r"vocabulary line 2: '\[a b\]' is not a set name"):
        Settings(vocabulary="Concord\n[a b]\n")
    settings, problems = from_mapping_report({"version": 3, "vocabulary": "x\n[a b]\n"})
    assert settings.vocabulary == "" and len(problems) == 1 and "vocabulary" in problems[0]


def test_load_a_file_names_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    good = tmp_path / "words.txt"
    good.write_text("Concord\nQuilter\n", encoding="utf-8")
    assert load(good).as_prompt() == "Concord, Quilter."
    bad = tmp_path / "bad.txt"
    bad.write_text("[x y]\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match=r"^bad.txt: vocabulary line 1"):
        load(bad)


# -- rendering, sharing the prompt room, recitals ----------------------------------------------


def test_render_keeps_whole_terms_within_the_cap() -> None:
    terms = ("Concord", "Abigail Claflin", "Quilter")
    assert hotwords.render(terms, 200) == "Concord, Abigail Claflin, Quilter."
    assert hotwords.render(terms, 25) == "Concord, Abigail Claflin."
    assert hotwords.render(terms, 24) == "Concord."
    assert hotwords.render(terms, 7) is None
    assert hotwords.render(("Mr.", "Ltd."), 50) == "Mr., Ltd."


def test_share_gives_the_vocabulary_its_room_first() -> None:
    assert hotwords.share((), 140) == (None, 140)
    assert hotwords.share(("Concord",), 140) == ("Concord.", 131)
    assert hotwords.share(("Concord",), 15) == ("Concord.", None)  # too little left
    long = tuple(f"Name{i:03d}" for i in range(100))
    text, left = hotwords.share(long, 1000)
    assert text is not None and len(text) <= hotwords.VOCABULARY_MAX_CHARS and left == 1000 - len(
        text) - 1


@pytest.mark.parametrize(("text", "recited"), [
    ("Concord, Abigail Claflin, Quilter.", True),
    ("Concord. Abigail Claflin.", True),  # only list entries
    ("Abigail Claflin, Quilter, Kubernetes", True),  # three in a row, in order
    ("Concord returned to its place amidst the tents.", False),
    ("Concord", False),  # one name alone is dictation
    ("I met Abigail Claflin and Quilter in Concord.", False),
    ("", False),
])
def test_recital_of_the_list_is_recognised(text: str, recited: bool) -> None:
    vocabulary = "Concord, Abigail Claflin, Quilter, Kubernetes."
    assert hotwords.recites(vocabulary, text) is recited
    flags = check(text, 3.0, hotwords=vocabulary)
    assert ("prompt_echo" in flags) is recited


def test_peer_terms_are_checked() -> None:
    assert hotwords.checked_terms([" Concord ", "Concord", "", "Abigail  Claflin"]) == (
        "Concord", "Abigail Claflin")
    for bad in ("Concord", ["x"] * 201, [1], ["x" * 101]):
        with pytest.raises(ValueError):
            hotwords.checked_terms(bad)


# -- the policy --------------------------------------------------------------------------------


def _audio(seconds: float) -> np.ndarray:
    return np.full(int(seconds * SAMPLE_RATE), 0.1, dtype=np.float32)


def _transcript(text: str, seconds: float) -> Transcript:
    split = text.split()  # spread over the audio, as speech is
    step = seconds * SAMPLE_RATE / len(split)
    words = tuple(Word(" " + w, int(i * step), int((i + 1) * step), 0.9)
                  for i, w in enumerate(split))
    seg = Segment(text=" " + text, start=0, end=int(seconds * SAMPLE_RATE), words=words,
                  avg_logprob=-0.2)
    return Transcript(segments=(seg,), language="en", decode_ms=10.0)


def _utterance(policy: StreamingPolicy, seconds: float, now: float) -> None:
    policy.handle(SegmentStarted(start=int(now * SAMPLE_RATE), audio=_audio(seconds)), now)
    policy.handle(SegmentEnded(end=int((now + seconds) * SAMPLE_RATE),
                               speech_end=int((now + seconds) * SAMPLE_RATE),
                               speech_windows=10), now + seconds)


def test_partials_and_finals_carry_the_vocabulary_and_it_can_change() -> None:
    policy = StreamingPolicy(PolicyOptions(vocabulary=("Concord", "Quilter"),
                                           min_partial_audio_s=0.5))
    policy.handle(SegmentStarted(start=0, audio=_audio(1.0)), 1.0)
    partial = policy.next_request(1.0)
    assert partial is not None and partial.kind == "partial"
    assert partial.options.hotwords == "Concord, Quilter." and partial.options.prompt is None
    # A recited list never shows as a partial.
    events = policy.on_result(partial.request_id, _transcript("Concord, Quilter.", 1.0), 1.1)
    assert [e for e in events if isinstance(e, PartialText)][0].tentative == ""
    policy.handle(SegmentAudio(_audio(2.0)), 3.0)
    policy.handle(SegmentEnded(end=3 * SAMPLE_RATE, speech_end=3 * SAMPLE_RATE,
                               speech_windows=10), 3.0)
    final = policy.next_request(3.0)
    assert final is not None and final.kind == "final"
    assert final.options.hotwords == "Concord, Quilter."
    policy.on_result(final.request_id, _transcript("Concord returned to its place.", 3.0), 3.2)
    policy.set_vocabulary(("Claflin",))
    _utterance(policy, 3.0, 10.0)
    final = policy.next_request(13.0)
    assert final is not None and final.options.hotwords == "Claflin."
    assert final.options.prompt == "Concord returned to its place."  # the room left over
    policy.set_vocabulary(())
    policy.on_result(final.request_id, _transcript("Abigail Claflin is here.", 3.0), 13.2)
    _utterance(policy, 3.0, 14.0)
    final = policy.next_request(17.0)
    assert final is not None and final.options.hotwords is None


def test_a_short_utterance_gets_a_vocabulary_in_proportion() -> None:
    terms = tuple(f"Name{i:02d}" for i in range(40))
    policy = StreamingPolicy(PolicyOptions(vocabulary=terms))
    _utterance(policy, 1.0, 0.0)
    final = policy.next_request(1.0)
    assert final is not None and final.options.hotwords is not None
    assert len(final.options.hotwords) <= 40 and final.options.prompt is None


def test_a_recited_vocabulary_is_retried_without_it() -> None:
    policy = StreamingPolicy(PolicyOptions(vocabulary=("Concord", "Quilter", "Claflin")))
    _utterance(policy, 2.0, 0.0)
    first = policy.next_request(2.0)
    assert first is not None and first.options.hotwords == "Concord, Quilter, Claflin."
    assert policy.on_result(first.request_id, _transcript("Concord, Quilter, Claflin.", 2.0),
                            2.1)[1:] == []  # no final yet: a retry is queued
    retry = policy.next_request(2.1)
    assert retry is not None and retry.kind == "final"
    assert retry.options.hotwords is None and retry.options.prompt is None
    events = policy.on_result(retry.request_id, _transcript("Hello there.", 2.0), 2.5)
    assert [e.text for e in events if isinstance(e, FinalText)] == ["Hello there."]


# -- the wire ----------------------------------------------------------------------------------


def test_hello_and_update_carry_the_vocabulary() -> None:
    client = p.ClientConnection()
    hello = client.hello(p.Hello(session_id="s", vocabulary=("Concord", "Abigail Claflin")))
    assert json.loads(hello)["vocabulary"] == ["Concord", "Abigail Claflin"]
    assert "vocabulary" not in json.loads(p.ClientConnection().hello(p.Hello(session_id="s")))
    server = p.ServerConnection()
    [received] = server.receive_text(hello)
    assert isinstance(received, p.Hello) and received.vocabulary == ("Concord", "Abigail Claflin")
    assert server.receive_text(client.vocabulary(("Kubernetes",))) == [
        p.Vocabulary(("Kubernetes",))]
    assert server.receive_text(client.vocabulary(())) == [p.Vocabulary(())]
    server.receive_text(client.end())
    assert server.receive_text(client.vocabulary(("late",))) == []


@pytest.mark.parametrize("vocabulary", [["x"] * 201, ["y" * 101], "Concord", [3]])
def test_a_hostile_vocabulary_is_refused(vocabulary: object) -> None:
    server = p.ServerConnection()
    hello = {"type": "hello", "protocol": 1, "session_id": "s", "vocabulary": vocabulary}
    [violation] = server.receive_text(json.dumps(hello))
    assert isinstance(violation, p.ProtocolViolation) and violation.code == p.BAD_MESSAGE
    server = p.ServerConnection()
    server.receive_text(json.dumps({"type": "hello", "protocol": 1, "session_id": "s"}))
    [violation] = server.receive_text(json.dumps({"type": "vocabulary",
                                                  "vocabulary": vocabulary}))
    assert isinstance(violation, p.ProtocolViolation) and "vocabulary" in violation.message


def test_batched_requests_keep_only_the_most_common_vocabulary() -> None:
    audio = np.zeros(1600, dtype=np.float32)
    texts = ("Concord.", "Concord.", "Quilter.", None)
    requests = [DecodeRequest(audio, DecodeOptions(hotwords=h, prompt="before"), tag=i)
                for i, h in enumerate(texts)]
    batched = without_prompts(requests)
    assert [r.options.hotwords for r in batched] == ["Concord.", "Concord.", None, None]
    assert all(r.options.prompt is None for r in batched)


def test_the_vocabulary_goes_first_and_both_fit_the_prompt_limit() -> None:
    from engine.asr.ct2_passes import MAX_PROMPT_TOKENS, prompt_tokens

    class Letters:  # one token per character: 1000 + its code
        sot_prev, sot_sequence, no_timestamps = 1, (2, 3), 4

        def encode(self, text: str) -> list[int]:
            return [1000 + ord(c) for c in text]

    def text(ids: list[int]) -> str:
        return "".join(chr(i - 1000) for i in ids if i >= 1000)

    tok = Letters()
    assert prompt_tokens(tok, None) == [2, 3]
    assert prompt_tokens(tok, None, False, "Concord.") == [1, *tok.encode(" Concord."), 2, 3, 4]
    both = prompt_tokens(tok, "we met", True, "Concord.")
    assert both[0] == 1 and text(both) == " Concord. we met" and both[-2:] == [2, 3]
    long = prompt_tokens(tok, "x" * 500, True, "Concord.")
    assert len(long) == 1 + MAX_PROMPT_TOKENS + 2
    assert text(long).startswith(" Concord.xxx")  # the recent text's tail fills the rest
    huge = prompt_tokens(tok, "recent", True, "y" * 500)
    assert len(huge) == 1 + MAX_PROMPT_TOKENS + 2 and "recent" not in text(huge)


def test_an_imported_file_is_decoded_with_the_vocabulary(jfk_wav, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from app.file_import import FileImport, ImportOptions
    from engine.asr.fake import ScriptedRunner

    calls: list[str] = []

    class Listener:
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return lambda *args: calls.append(name)

    runner = ScriptedRunner(("and so my fellow Americans",))
    job = FileImport(jfk_wav, lambda: runner, Listener(), journal_dir=tmp_path,
                     options=ImportOptions(vocabulary=("Concord", "Americans")))
    job.start()
    assert job.wait(60) and calls[-1] == "import_finished"
    assert runner.calls and {o.hotwords for _, o in runner.calls} == {"Concord, Americans."}
    # With a vocabulary the chunks take the padded window (engine.longform.pipeline._fitted).
    assert not any(o.short_context for _, o in runner.calls)


@pytest.mark.parametrize("scheme", ["ws", "whisperlive"])
def test_both_remote_links_bring_the_vocabulary_to_the_server(scheme: str) -> None:
    """A real server on 127.0.0.1 (scripted decoder): the native link's hello and the
    whisperlive:// link's hotwords option both reach every decode of the session."""
    from engine.asr.fake import ScriptedRunner
    from engine.audio.sources import FileSource
    from engine.remote.client import RemoteLiveEngine, RemoteOptions
    from engine.server.server import ServerOptions, ServerThread, TranscriptionServer
    from engine.vad import EnergyVad

    runner = ScriptedRunner(("Hello Concord.",))
    thread = ServerThread(TranscriptionServer(runner, ServerOptions(port=0),
                                              scorer_factory=EnergyVad))
    thread.start()
    try:
        t = np.arange(24_000) / SAMPLE_RATE
        audio = np.concatenate([np.zeros(8000), 0.3 * np.sin(2 * np.pi * 220 * t),
                                np.zeros(16_000)]).astype(np.float32)
        events: list[object] = []
        engine = RemoteLiveEngine(events.append, url=f"{scheme}://127.0.0.1:{thread.port}",
                                  source=FileSource(audio=audio, realtime=False),
                                  options=RemoteOptions(end_timeout_s=30))
        engine.set_vocabulary(("Concord", "Abigail Claflin"))
        engine.start()
        assert engine.wait(60)
    finally:
        thread.stop()
    assert [e.text for e in events if isinstance(e, FinalText)] == ["Hello Concord."]
    assert runner.calls and {o.hotwords for _, o in runner.calls} == {
        "Concord, Abigail Claflin."}


def test_terms_like_what_was_heard_go_first() -> None:
    terms = tuple(f"Decoy{i}" for i in range(20)) + ("Concord", "Abigail Claflin", "Abbie")
    assert hotwords.by_relevance(terms, "Concorde returned to its place")[:2] == (
        "Concord", "Decoy0")
    assert hotwords.by_relevance(terms, "I'm Abigail Class 1. You can call me Abi.")[:3] == (
        "Abigail Claflin", "Abbie", "Decoy0")
    assert hotwords.by_relevance(terms, "to me") == terms == hotwords.by_relevance(terms, "")
    assert hotwords.by_relevance((), "Concord") == ()
    # The policy: a final whose partial heard "Concorde" gets Concord though it is far down.
    policy = StreamingPolicy(PolicyOptions(vocabulary=terms, min_partial_audio_s=0.5))
    policy.handle(SegmentStarted(start=0, audio=_audio(1.0)), 1.0)
    partial = policy.next_request(1.0)
    assert partial is not None and "Concord" not in (partial.options.hotwords or "")
    policy.on_result(partial.request_id, _transcript("Concorde returned", 1.0), 1.1)
    policy.handle(SegmentEnded(end=SAMPLE_RATE, speech_end=SAMPLE_RATE, speech_windows=10), 1.2)
    final = policy.next_request(1.2)
    assert final is not None and (final.options.hotwords or "").startswith("Concord, Decoy0")
