"""Captions without a sound server: the amend rule, the echo guard, the export of a caption
session, the journal's labels and translations, the profanity mask, the settings' checks, and
`CaptionEngine`'s driving of two sources (labels, echo guard, journal, translation below) with
engines whose events the test hands in (the real engines on real audio: test_captions_pulse.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.subtitles import parse_srt, parse_vtt

from engine.asr.fake import ScriptedRunner
from engine.audio.sources import AudioSource, FileSource
from engine.audio.targets import CaptureTarget
from engine.captions import CaptionEngine, Feed
from engine.core.captions import (
    CaptionLine,
    EchoGuard,
    amend,
    echoes,
    in_range,
    merge_lines,
)
from engine.events import (
    EngineFailed,
    Event,
    EventSink,
    FinalText,
    PartialText,
    SpeechStarted,
    StateChanged,
    Translation,
)
from engine.journal import Journal, caption_lines, is_caption_session, read_journal
from engine.types import SAMPLE_RATE
from engine.wire.export import export_captions


def line(source: str, n: int, text: str, start: float, end: float, **kw: object) -> CaptionLine:
    return CaptionLine(source, f"{source}#{n}", text, start, end, **kw)  # type: ignore[arg-type]


def test_a_final_that_goes_on_with_the_sentence_amends_the_last_line():
    first = line("Them", 1, "And so my fellow Americans, ask not what your country can do for you.",
                 0.0, 5.0)
    second = line("Them", 2, "ask what you can do for your country.", 5.4, 8.0)
    joined = amend(first, second)
    assert joined is not None and joined.text == (
        "And so my fellow Americans, ask not what your country can do for you, "
        "ask what you can do for your country.")
    assert (joined.start_s, joined.end_s, joined.key) == (0.0, 8.0, "Them#1")
    assert amend(first, line("Them", 2, "Ask what you can do.", 5.4, 8.0)) is None  # new sentence
    assert amend(first, line("You", 2, "ask what", 5.4, 8.0)) is None  # another source
    assert amend(first, line("Them", 2, "ask what", 9.1, 10.0)) is None  # a long pause
    assert amend(line("Them", 1, "Really?", 0, 1), line("Them", 2, "yes.", 1.2, 2)) is None
    # Interleaved sources: each joins only the line right above it.
    lines = [first, line("You", 1, "Yes.", 5.1, 5.3), second]
    assert [x.text for x in merge_lines(lines)] == [first.text, "Yes.", second.text]


def test_pieces_committed_while_a_sentence_is_spoken_make_one_line():
    # PolicyOptions.commit_stable: a long utterance's words are final in pieces, each of which
    # leaves the sentence open (no full stop), whatever case the next piece starts with.
    pieces = [line("", 1, "The first Bible actually dated, which also", 0.0, 2.1),
              line("", 2, "was printed at", 2.1, 2.9), line("", 3, "Mainz by Peter", 2.9, 3.8),
              line("", 4, "Schoeffer in the year 1462.", 3.8, 5.6),
              line("", 5, "It imitates a much freer hand.", 5.9, 8.0)]
    assert [x.text for x in merge_lines(pieces)] == [
        "The first Bible actually dated, which also was printed at Mainz by Peter Schoeffer in "
        "the year 1462.", "It imitates a much freer hand."]
    assert merge_lines(pieces)[0].end_s == 5.6
    # An open line still ends at a long pause, and at another source.
    assert amend(pieces[2], line("", 4, "Schoeffer.", 7.0, 8.0)) is None
    assert amend(pieces[2], line("Them", 4, "Schoeffer.", 3.8, 5.0)) is None


def test_echo_guard_keeps_a_line_heard_on_both_once_as_theirs():
    guard = EchoGuard("You", "Them", window_s=3.0, hold_s=6.0)
    theirs = line("Them", 1, "Ask not what your country can do for you.", 1.0, 4.0)
    assert guard.final(theirs, now=10.0) == [theirs]
    echo = line("You", 1, "ask not what your country can do", 1.1, 4.1)
    assert guard.final(echo, now=10.2) == [] and guard.dropped == [echo]
    mine = line("You", 2, "I agree with that completely.", 4.5, 6.0)
    assert guard.final(mine, now=10.5) == [mine]  # the user's own words pass at once
    # While the system is in an utterance, a microphone line waits for its final...
    guard.speaking(True)
    held = line("You", 3, "Lord, but I'm glad to see you again, Phil.", 8.0, 10.0)
    assert guard.final(held, now=20.0) == []
    later = line("Them", 2, "Lord but I am glad to see you again Phil.", 7.9, 10.1)
    assert guard.final(later, now=20.4) == [later]  # ...and is dropped as its echo
    guard.speaking(True, "Lord but I")
    mine_now = line("You", 7, "Completely different words here.", 12.0, 13.0)
    assert guard.final(mine_now, now=29.0) == [mine_now]  # nothing in common: shown at once
    guard.speaking(True)  # (no partial text yet: it could be anything)
    other = line("You", 4, "Completely different words here.", 12.0, 13.0)
    assert guard.final(other, now=30.0) == []
    assert guard.due(now=33.0) == []
    assert guard.due(now=36.0) == [other]  # held at most hold_s
    guard.speaking(True)
    last = line("You", 5, "One more thing.", 20.0, 21.0)
    guard.final(last, now=40.0)
    assert guard.flush() == [last]
    far = line("You", 6, "ask not what your country can do", 30.0, 31.0)
    assert not echoes(far, theirs)  # same words much later: said again, not an echo


def test_export_a_caption_session_every_format_with_and_without_labels_and_times():
    lines = [line("Them", 1, "Hello there, how are", 1.0, 2.5, language="en"),
             line("Them", 2, "you today?", 2.9, 3.5, language="en"),
             line("You", 1, "Fine, thanks.", 4.0, 5.0, language="en"),
             line("Them", 3, "Bonjour à tous.", 6.0, 7.0, language="fr",
                  translation="Hello everyone.")]
    assert export_captions(lines, "txt") == (
        "[00:00:01] Them: Hello there, how are you today?\n"
        "[00:00:04] You: Fine, thanks.\n"
        "[00:00:06] Them: Bonjour à tous.\n    Hello everyone.\n")
    assert export_captions(lines, "txt", labels=False, timestamps=False,
                           translations=False) == (
        "Hello there, how are you today?\nFine, thanks.\nBonjour à tous.\n")
    srt = parse_srt(export_captions(lines, "srt"))
    assert [c.text for c in srt] == ["Them: Hello there, how are you today?",
                                     "You: Fine, thanks.",
                                     "Them: Bonjour à tous. / Hello everyone."]
    assert (srt[0].start, srt[1].start) == (SAMPLE_RATE, 4 * SAMPLE_RATE)
    assert [c.text for c in parse_vtt(export_captions(lines, "vtt", labels=False))][1] == (
        "Fine, thanks.")
    doc = json.loads(export_captions(lines, "json", timestamps=False))
    assert len(doc["lines"]) == 3 and doc["lines"][2] == {"text": "Bonjour à tous.", "language": "fr", "source": "Them",
                               "translation": "Hello everyone."}
    assert "start" not in doc["lines"][0]
    assert json.loads(export_captions(lines, "json", labels=False))["lines"][1] == {
        "text": "Fine, thanks.", "language": "en", "start": 4.0, "end": 5.0}
    assert [x.text for x in in_range(lines, 3.8, 6.5)] == ["Fine, thanks.", "Bonjour à tous."]
    with pytest.raises(ValueError, match="unknown format"):
        export_captions(lines, "docx")


def test_capture_targets_parse_and_refuse_what_is_not_one():
    assert CaptureTarget.parse("app:Firefox") == CaptureTarget("app", "Firefox")
    assert CaptureTarget.parse("system") == CaptureTarget("system")
    for bad in ("radio", "app:", "device: "):
        with pytest.raises(ValueError):
            CaptureTarget.parse(bad)


def test_caption_config_checks_sources_labels_and_translation():
    from app.captions import CaptionConfig

    assert CaptionConfig(translate="below").decode_model == "base"  # tiny.en can't translate
    assert CaptionConfig(model="base").decode_model == "base"
    for bad in ({"source": "radio"}, {"source": "app:"}, {"source": "both", "them": "You"},
                {"translate": "yes"}, {"server": "ws://127.0.0.1:9", "translate": "alone"}):
        with pytest.raises(ValueError):
            CaptionConfig(**bad)  # type: ignore[arg-type]


def test_profanity_mask_is_off_by_default_and_masks_when_asked():
    from app.settings import Settings
    from engine.profanity import profanity_mask

    assert Settings().caption_mask_profanity is False
    mask = profanity_mask()
    assert mask("What the fuck, this shit works. Hello Scunthorpe!") == (
        "What the ****, this **** works. Hello Scunthorpe!")


# -- CaptionEngine, driven by hand --------------------------------------------------------------

class HandEngine:
    """A live engine whose events the test emits (`say`)."""

    def __init__(self, source: AudioSource, sink: EventSink) -> None:
        self.source, self.sink, self.calls = source, sink, []

    def start(self) -> None:
        self.calls.append("start")
        self.sink(StateChanged("listening"))

    def stop(self) -> None:
        self.calls.append("stop")
        self.sink(StateChanged("stopped"))

    def begin_utterance(self) -> int | None:
        return None

    def end_utterance(self) -> None: ...

    def set_vocabulary(self, terms: tuple[str, ...]) -> None: ...

    def say(self, n: int, text: str, start_s: float, end_s: float,
            language: str | None = "en") -> None:
        self.sink(SpeechStarted(n, round(start_s * SAMPLE_RATE)))
        self.sink(PartialText(n, text.split()[0], "", round(start_s * SAMPLE_RATE)))
        self.sink(FinalText(n, text, (), round(start_s * SAMPLE_RATE), round(end_s * SAMPLE_RATE),
                            100.0, language=language))


def hand_engines(feeds: list[Feed], tmp_path: Path, **kw: object
                 ) -> tuple[CaptionEngine, list[HandEngine], list[Event]]:
    events: list[Event] = []
    engines: list[HandEngine] = []

    def build(source: AudioSource, sink: EventSink) -> HandEngine:
        engines.append(HandEngine(source, sink))
        return engines[-1]

    journal = Journal("20261202-120000-000000-captions", tmp_path)
    captions = CaptionEngine(events.append, feeds, build, journal=journal,  # type: ignore[arg-type]
                             **kw)  # type: ignore[arg-type]
    return captions, engines, events


def silence(seconds: float) -> FileSource:
    return FileSource(audio=np.zeros(round(seconds * SAMPLE_RATE), dtype=np.float32))


def test_two_sources_are_labelled_echoes_kept_once_and_journalled(tmp_path):
    captions, (you, them), events = hand_engines(
        [Feed("You", silence(1)), Feed("Them", silence(1))], tmp_path)
    captions.start()
    them.say(1, "Ask not what your country can do for you.", 1.0, 4.0)
    you.say(1, "ask not what your country can do for you", 1.05, 4.1)  # the speakers' echo
    you.say(2, "I think he means it.", 5.0, 6.0)
    them.sink(SpeechStarted(2, 7 * SAMPLE_RATE))
    them.sink(PartialText(2, "He", "does", 7 * SAMPLE_RATE))
    you.say(3, "He does, absolutely right.", 7.1, 7.6)  # like their words: waits for their line
    them.say(2, "He does.", 7.0, 8.0)
    captions.stop()
    assert [(e.source, e.utterance_id) for e in events
            if isinstance(e, FinalText) and not e.text] == [("You", 1)]  # the echo, closed
    finals = [(e.source, e.text) for e in events if isinstance(e, FinalText) and e.text]
    assert finals == [("Them", "Ask not what your country can do for you."),
                      ("You", "I think he means it."), ("Them", "He does."),
                      ("You", "He does, absolutely right.")]
    partials = {e.source for e in events if isinstance(e, PartialText)}
    assert partials == {"You", "Them"}
    states = [e.state for e in events if isinstance(e, StateChanged)]
    assert states == ["listening", "stopped"]  # one lifecycle for both
    journal = tmp_path / "20261202-120000-000000-captions.jsonl"
    assert is_caption_session(journal)
    assert [(e.source, e.text) for e in read_journal(journal)] == finals
    assert captions.wait(0)


def test_one_source_failing_lets_the_other_go_on(tmp_path):
    captions, (you, them), events = hand_engines(
        [Feed("You", silence(1)), Feed("Them", silence(1))], tmp_path)
    captions.start()
    you.sink(EngineFailed("no audio from input device 'USB mic' for 5.0 s", recoverable=False))
    you.sink(StateChanged("stopped"))
    them.say(1, "Still here.", 1.0, 2.0)
    failure = next(e for e in events if isinstance(e, EngineFailed))
    assert failure.recoverable and failure.message == (
        "You: no audio from input device 'USB mic' for 5.0 s (captions of Them go on)")
    assert not captions.wait(0)
    them.sink(StateChanged("stopped"))
    assert captions.wait(0) and events[-1] == StateChanged("stopped")


def test_translation_below_decodes_each_final_again_and_journals_it(tmp_path):
    runner = ScriptedRunner(["Under the consulate he became curator of waters and forests."])
    speech = np.random.default_rng(1).normal(0, 0.1, 3 * SAMPLE_RATE).astype(np.float32)
    captions, (only,), events = hand_engines(
        [Feed("", FileSource(audio=speech))], tmp_path, translate_with=runner,
        mask=lambda text: text.replace("forests", "*******"))
    only.source.start()
    while only.source.read(0.1) is not None:  # the engine's reads, keeping the recent audio
        pass
    captions.start()
    only.say(1, "Sous le consulat il devient conservateur des eaux et forêts.", 0.5, 2.5, "fr")
    only.say(2, "Hello.", 2.6, 2.9, "en")  # English needs no translation
    captions.stop()
    translation = next(e for e in events if isinstance(e, Translation))
    assert translation == Translation(
        1, "", "Under the consulate he became curator of waters and *******.", "fr")
    assert runner.calls[0][0] == 2 * SAMPLE_RATE  # the final's audio, decoded once more
    assert runner.calls[0][1].task == "translate" and len(runner.calls) == 1
    entries = read_journal(tmp_path / "20261202-120000-000000-captions.jsonl")
    assert [e.translation for e in entries] == [translation.text, ""]
    assert caption_lines(entries)[0].translation == translation.text
