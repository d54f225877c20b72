"""Committing early (PolicyOptions.commit_stable): on continuous speech the words two successive
partials agree on are final while the utterance is still spoken, each piece a final of its own;
no word is committed twice or lost where a piece ends; push-to-talk lands at the release.

The policy's bookkeeping runs on scripted results in simulated time; the text, on the real
tiny.en model and the real Silero VAD on the LJSpeech reading (tests/audio), every decode
answered at once on the audio's own clock (the text does not depend on the machine's speed)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from support.core import answered_by, drive
from support.oracle import plain_words
from support.policy import audio, started, transcript

from app.commands.listen import CaptionPrinter
from bench.evaluation import ManifestEntry, error_rate, normalize
from engine.audio.decode import load_audio
from engine.captions import final_line
from engine.core.captions import merge_lines
from engine.core.form import has_form
from engine.core.policy import Job, PolicyOptions, StreamingPolicy
from engine.core.policy.commit import EarlyCommit
from engine.core.segmenter import SegmentAudio, SegmentEnded
from engine.core.stream import StreamCore, StreamOptions
from engine.events import Event, FinalText, PartialText, SpeechEnded
from engine.types import SAMPLE_RATE, VAD_WINDOW, DecodeOptions, Runner, Word

SR = SAMPLE_RATE
READING = "long-ljspeech-LJ001-0001-0032.wav"


def answer(policy: StreamingPolicy, now: float, text: str, seconds: float) -> list[Event]:
    job = policy.next_request(now)
    assert job is not None
    return policy.on_result(job.request_id, transcript(text, seconds=seconds), now)


def test_words_two_partials_agree_on_are_a_final_and_never_come_again() -> None:
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.2, partial_interval_s=0.1,
                                           commit_stable=True))
    started(policy, start=SR, seconds=3.0, now=3.0)
    first = answer(policy, 3.0, "one two three four five six", 3.0)  # 0.5 s a word
    assert not [e for e in first if isinstance(e, FinalText)]  # one partial is not agreement
    policy.handle(SegmentAudio(audio(0.5), speech=True), 3.5)
    events = answer(policy, 3.5, "one two three four five six seven", 3.5)
    # Agreed, and heard at least COMMIT_HOLD_S before the end of the audio: the six words.
    kinds = [type(e).__name__ for e in events if type(e).__name__ != "Metrics"]
    assert kinds == ["SpeechEnded", "FinalText", "SpeechStarted", "PartialText"]
    final = next(e for e in events if isinstance(e, FinalText))
    assert final.text == "One two three four five six"
    assert (final.utterance_id, final.start, final.end) == (1, SR, 4 * SR)
    assert [w.start for w in final.words] == [SR + i * SR // 2 for i in range(6)]
    assert events[-1] == PartialText(utterance_id=2, committed="", tentative="seven", start=4 * SR)
    # The next partial hears the whole utterance again: the committed words are not repeated;
    # "seven" is agreed now.
    policy.handle(SegmentAudio(audio(0.5), speech=True), 4.0)
    events = answer(policy, 4.0, "one two three four five six seven eight", 4.0)
    [piece] = [e for e in events if isinstance(e, FinalText)]
    assert (piece.utterance_id, piece.text, piece.start) == (2, "seven", 4 * SR)
    assert events[-1] == PartialText(3, "", "eight", piece.end)
    end = SR + 4 * SR
    events = policy.handle(SegmentEnded(end=end, speech_end=end, speech_windows=100), 4.0)
    assert events == [SpeechEnded(utterance_id=3, at=end)]
    [last] = [e for e in answer(policy, 4.1, "one two three four five six seven eight.", 4.0)
              if isinstance(e, FinalText)]
    assert (last.utterance_id, last.text, last.start, last.end) == (3, "eight.", piece.end, end)
    assert policy.idle


def test_the_mark_after_the_last_word_heard_waits_for_the_word_after_it() -> None:
    # Whisper ends whatever audio it is given with a period: "six." is not final yet.
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.2, partial_interval_s=0.1,
                                           commit_stable=True))
    started(policy, start=SR, seconds=3.0, now=3.0)
    answer(policy, 3.0, "one two three.", 1.5)
    policy.handle(SegmentAudio(audio(0.5), speech=True), 3.5)
    events = answer(policy, 3.5, "one two three.", 1.5)
    [final] = [e for e in events if isinstance(e, FinalText)]
    assert final.text == "One two"


def test_a_full_stop_is_final_only_once_the_speech_after_it_was_heard() -> None:
    # A word that ends a sentence waits for commit_end_hold_s of audio after it (the words
    # before it do not); a later decode that reads the sentence going on commits it.
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.2, partial_interval_s=0.1,
                                           commit_stable=True, commit_end_hold_s=1.5))
    started(policy, start=SR, seconds=3.0, now=3.0)
    answer(policy, 3.0, "so my fellow Americans. Ask not", 3.0)  # 0.5 s a word
    policy.handle(SegmentAudio(audio(0.2), speech=True), 3.2)
    [first] = [e for e in answer(policy, 3.2, "so my fellow Americans. Ask not", 3.0)
               if isinstance(e, FinalText)]
    assert first.text == "So my fellow"  # "Americans." was heard 1.2 s before the end
    pieces = []
    for now in (3.6, 4.0, 4.4):
        policy.handle(SegmentAudio(audio(0.4), speech=True), now)
        pieces += [e.text for e in answer(policy, now, "so my fellow Americans, ask not what "
                                          "your country can", now - 0.2)
                   if isinstance(e, FinalText)]
    assert pieces and pieces[0].startswith("Americans, ask")
    assert not any("." in piece for piece in pieces)


def test_a_word_the_decodes_keep_reading_differently_does_not_hold_the_rest_back() -> None:
    # Committing early with the end hold, once COMMIT_STALE_S was heard after a word two decodes
    # never agreed on, the latest decode's words up to there are final.
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.2, partial_interval_s=0.1,
                                           commit_stable=True))
    started(policy, start=SR, seconds=2.0, now=2.0)
    pieces: list[str] = []
    after = ["the", "tent", "of", "the", "abbot", "of", "Iona", "was", "pitched", "on", "the"]
    for n, name in enumerate(("Meath.", "Meeffe.", "Mefe.", "Meeth.", "Meeffe,", "Mief.")):
        now = 2.0 + 0.5 * n
        if n:
            policy.handle(SegmentAudio(audio(0.5), speech=True), now)
        words = ["name", name, *after[:2 * n + 2]]  # 0.5 s a word, the name from 0.5 s
        pieces += [e.text for e in answer(policy, now, " ".join(words), 0.5 * len(words))
                   if isinstance(e, FinalText)]
    assert pieces[0] == "Name"  # agreed at once
    assert " ".join(pieces[1:]).startswith(("Mefe. The", "Meeth. The", "Meeffe, the",
                                            "Mief. The")), pieces


def test_a_late_decode_commits_the_words_heard_long_ago_past_the_last_partial() -> None:
    # On a busy machine decodes come seconds apart: the latest may hold words heard
    # COMMIT_STALE_S ago that the partial before it never had (a ValueError under load once).
    def said(*texts: str, probability: float = 0.9) -> list[Word]:
        return [Word(f" {t}", int(0.5 * i * SR), int(0.5 * (i + 1) * SR), probability)
                for i, t in enumerate(texts)]

    commit = EarlyCommit()
    first = said("so", "my")
    assert commit.agreed(first, heard_upto=SR, recent=[], end_hold_s=1.5) == 0
    commit.advance(first, 0)
    late = said("so", "my", "fellow", "Americans,", "ask", "not", "what", "your", "country",
                "can", "do", "for", probability=0.3)  # the last word ends at 6.0 s
    # Heard up to 8 s: the ten words ending by 5 s are stale; the two after them wait.
    assert commit.agreed(late, heard_upto=8 * SR, recent=[], end_hold_s=1.5) == 10


def test_a_number_or_a_title_is_not_the_last_word_of_a_piece() -> None:
    # "14" may become "1455" once "fifty-five" is heard; a piece ending "Mr." reads as a
    # sentence of its own.
    for first, second, piece in (("in about 14 55", "in about 14 fifty", "In about"),
                                 ("said Mr. Quilter is", "said Mr. Quinter was", "Said")):
        policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.2, partial_interval_s=0.1,
                                               commit_stable=True))
        started(policy, start=SR, seconds=3.0, now=3.0)
        answer(policy, 3.0, first, 2.0)
        policy.handle(SegmentAudio(audio(0.5), speech=True), 3.5)
        [final] = [e for e in answer(policy, 3.5, second, 2.0) if isinstance(e, FinalText)]
        assert final.text == piece


def test_push_to_talk_and_the_switch_keep_text_for_the_end() -> None:
    on = PolicyOptions(commit_stable=True)
    core = StreamCore(StreamOptions(mode="ptt", policy=on), None)
    assert not core.policy.options.commit_stable
    assert StreamCore(StreamOptions(mode="vad", policy=on), None).policy.options.commit_stable
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.2, commit_stable=False))
    started(policy, seconds=3.0, now=3.0)
    job = policy.next_request(3.0)
    assert job is not None and not job.options.word_timestamps and job.options.prompt is None



def test_committing_early_partials_are_decoded_with_the_commit_beam() -> None:
    """Their words become final text: beam 3 by default (greedy misread more of the reading:
    PolicyOptions.commit_beam_size); partials only shown keep partial_beam_size."""
    for commit, beam in ((True, 3), (False, 1)):
        policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.2, commit_stable=commit))
        started(policy, seconds=3.0, now=3.0)
        job = policy.next_request(3.0)
        assert job is not None and job.kind == "partial" and job.options.beam_size == beam
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.2, commit_stable=True,
                                           commit_beam_size=1))
    started(policy, seconds=3.0, now=3.0)
    job = policy.next_request(3.0)
    assert job is not None and job.options.beam_size == 1
    with pytest.raises(ValueError):
        PolicyOptions(commit_beam_size=0)

def stream(core: StreamCore, runner: Runner, data: np.ndarray, release: int | None = None
           ) -> tuple[list[Event], list[bool]]:
    """Feed ``data`` window by window on its own clock, every decode answered at once (a
    push-to-talk release at sample ``release``). Returns the events, and for every partial
    whether it asked for word times."""
    timed: list[bool] = []

    def note(job: Job) -> None:
        if job.kind == "partial":
            timed.append(job.options.word_timestamps)

    return drive(core, data, answered_by(runner), release=release, on_job=note), timed


@pytest.fixture(scope="module")
def reading(shared_audio: Path) -> np.ndarray:
    """The whole 231 s reading (32 sentences, pauses of 100-600 ms, mostly too short to end an
    utterance), then 1.5 s of silence."""
    data = load_audio(shared_audio / READING)
    return np.concatenate([data, np.zeros(int(1.5 * SR), np.float32)])


def runs_against(reference: str) -> Callable[[str, str], int]:
    """Words in runs of two or more deleted (or inserted) against ``reference``."""
    import jiwer

    def count(text: str, kind: str) -> int:
        steps = jiwer.process_words(normalize(reference), normalize(text)).alignments[0]
        ends = ("ref_start_idx", "ref_end_idx") if kind == "delete" else (
            "hyp_start_idx", "hyp_end_idx")
        sizes = [getattr(c, ends[1]) - getattr(c, ends[0]) for c in steps if c.type == kind]
        return sum(n for n in sizes if n > 1)

    return count


@pytest.mark.model
def test_a_continuous_reading_is_final_word_by_word_nothing_lost_or_doubled(
        reading: np.ndarray, tiny_transcriber: Runner, manifest: list[ManifestEntry]) -> None:
    from engine.asr.ct2_decoder import Ct2Runner
    from engine.vad import load_scorer

    runner = Ct2Runner(tiny_transcriber.model)  # type: ignore[attr-defined]
    core = StreamCore(StreamOptions(mode="vad", policy=PolicyOptions(
        max_in_flight=2, commit_stable=True).for_model(runner.info)), load_scorer())
    events, timed = stream(core, runner, reading)
    assert timed and all(timed)
    finals = [e for e in events if isinstance(e, FinalText) and e.text]
    # Early: many pieces, and a word is final soon after it is spoken (on the audio's clock),
    # not when its sentence (up to 22 s) or the reading ends.
    assert len(finals) >= 100, [f.text for f in finals]
    lags = [dict(f.stages)["emitted"] - w.end / SR for f in finals for w in f.words]
    assert float(np.median(lags)) < 1.5 and dict(finals[0].stages)["emitted"] < 4.0
    # Every utterance id: started, ended, one final, in that order; pieces follow each other.
    for uid in {e.utterance_id for e in events if isinstance(e, FinalText)}:
        mine = [type(e).__name__ for e in events if getattr(e, "utterance_id", None) == uid
                and not isinstance(e, PartialText)]
        assert mine == ["SpeechStarted", "SpeechEnded", "FinalText"], (uid, mine)
    for a, b in zip(finals, finals[1:], strict=False):
        assert a.end <= b.start
    for f in finals:  # (word times drift between decodes: a piece holds the words mostly in it)
        assert all(f.start - 0.1 * SR <= (w.start + w.end) / 2 <= f.end for w in f.words), f
    # Nothing said twice where a piece ends: the next piece never starts with the words the
    # last one ended on (a misreading inside a piece is no doubling, so this is judged at
    # the boundaries, by the words themselves).
    for a, b in zip(finals, finals[1:], strict=False):
        tail, head = normalize(a.text).split(), normalize(b.text).split()
        assert not any(tail[-k:] == head[:k] for k in (1, 2, 3) if len(tail) >= k <= len(head)
                       ), (a.text, b.text)
    # Nothing lost or added against the reference beyond what the whole reading decoded
    # offline in the same run loses or adds (the same model on the same processor), and the
    # text as a whole within 2 points of the offline decode's WER.
    offline = tiny_transcriber.decode(reading, DecodeOptions()).text  # type: ignore[attr-defined]
    streamed = " ".join(f.text for f in finals)
    reference = next(e.text for e in manifest if e.path.name == READING)
    assert error_rate([offline], [streamed]) <= 0.12, (offline, streamed)
    assert error_rate([reference], [streamed]) <= error_rate([reference], [offline]) + 0.02
    runs_of = runs_against(reference)
    assert runs_of(streamed, "delete") <= runs_of(offline, "delete") + 6, (offline, streamed)
    assert runs_of(streamed, "insert") <= runs_of(offline, "insert") + 4, (offline, streamed)
    # `sottovoce listen` prints the pieces of a sentence on one line, as the caption transcript
    # shows them (engine.core.captions.merge_lines): the same text, every word once.
    out = io.StringIO()
    printer = CaptionPrinter(out)
    for event in events:
        printer(event)
    printer.summary()
    printed = out.getvalue().splitlines()
    lines = [line.text for line in merge_lines([final_line(f) for f in finals])]
    assert printed == lines
    assert " ".join(printed) == streamed
    assert len(printed) < len(finals) / 3 and all(has_form(line) for line in printed[:-1])


@pytest.mark.model
def test_push_to_talk_text_still_lands_at_the_release(
        reading: np.ndarray, tiny_transcriber: Runner) -> None:
    from engine.asr.ct2_decoder import Ct2Runner
    from engine.vad import load_scorer

    runner = Ct2Runner(tiny_transcriber.model)  # type: ignore[attr-defined]
    data, release = reading[:12 * SR], 12 * SR - VAD_WINDOW * 4

    def dictate(policy: PolicyOptions) -> tuple[list[FinalText], list[bool]]:
        core = StreamCore(StreamOptions(mode="ptt", policy=policy.for_model(runner.info)),
                          load_scorer())
        core.begin(0)
        events, timed = stream(core, runner, data, release)
        return [e for e in events if isinstance(e, FinalText)], timed

    finals, timed = dictate(PolicyOptions(commit_stable=True))  # the core turns it off
    assert timed and not any(timed)
    [final] = finals
    assert dict(final.stages)["emitted"] >= release / SR
    # All of it, from its first word (a plain decode's, on this processor) on.
    oracle = plain_words(runner, data)
    assert normalize(final.text).split()[:1] == oracle[:1], (final.text, oracle)
    assert len(final.text.split()) >= len(oracle) - 2, (final.text, oracle)
    [same], _ = dictate(PolicyOptions(commit_stable=False))
    assert same.text == final.text
