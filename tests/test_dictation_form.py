"""Finals keep Whisper's case and punctuation through a whole dictation session (after one
unpunctuated final, every later dictation would come out unpunctuated, because Whisper copies its
prompt's style). Real speech, the real stream core in push-to-talk and voice-activity mode,
driven synchronously (the core is sans-I/O).

What tiny.en writes with and without a style prompt (a comma, lower case) is a behaviour of the
model on one processor's kernels: the push-to-talk tests replay recorded decodes of tiny.en
(tests/recordings/dictation-form-*.jsonl). The voice-activity test runs the real model and
asserts what holds on any processor: form, and the reference's words in order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.recordings import recorded_runner

from bench.evaluation import error_rate
from engine.audio.decode import load_audio
from engine.core.form import has_form, reads_open
from engine.core.policy import PolicyOptions
from engine.core.stream import StreamCore, StreamOptions
from engine.events import Event, FinalText
from engine.types import SAMPLE_RATE, Audio, Runner
from engine.vad import default_scorer

JFK = "jfk-inaugural-1961-excerpt.wav"
CONCORD = "ls-tc-6930-75918-0000.wav"
UNPUNCTUATED = ("and so my fellow Americans ask not what your country can do for you ask what "
                "you can do for your country")


def tiny() -> Runner:
    from engine.asr.ct2_decoder import Ct2Runner

    fast = Ct2Runner("tiny.en")
    fast.load()
    return fast


@pytest.fixture
def recorded(request: pytest.FixtureRequest) -> Runner:
    """tiny.en's decodes of this test, recorded (tests/recordings/dictation-form-NAME.jsonl)."""
    name = request.node.name.removeprefix("test_").replace("_", "-")
    return recorded_runner(f"dictation-form-{name}", tiny)


@pytest.fixture(scope="module")
def runner(tiny_transcriber: Runner) -> Runner:
    from engine.asr.ct2_decoder import Ct2Runner

    fast = Ct2Runner(tiny_transcriber.model)  # type: ignore[attr-defined]
    fast.load()
    return fast


class Dictation:
    """A session on the stream core; every decode runs here, on the real model."""

    def __init__(self, runner: Runner, mode: str) -> None:
        policy = PolicyOptions().for_model(runner.info)
        self.core = StreamCore(StreamOptions(mode=mode, policy=policy), default_scorer())
        self.runner = runner
        self.now = 0.0
        self.finals: list[str] = []
        # Per final: what Whisper wrote in the decode that made it (before any repair), and
        # how many final decodes it took.
        self.whisper: list[str] = []
        self.attempts: list[int] = []  # final decodes per final (speculative ones included)
        self._decoded: dict[int, tuple[str, int]] = {}  # utterance -> its last final decode

    def play(self, audio: Audio) -> None:
        for i in range(0, len(audio), 1600):
            self.now += len(audio[i:i + 1600]) / SAMPLE_RATE
            self._take(self.core.feed(audio[i:i + 1600], self.now))

    def silence(self, seconds: float) -> None:
        self.play(np.zeros(int(seconds * SAMPLE_RATE), np.float32))

    def dictate(self, audio: Audio) -> str:
        """Hold the key, speak, let go: the final text."""
        before = len(self.finals)
        self.core.begin()
        self.silence(0.3)
        self.play(audio)
        self.silence(0.4)
        self.core.end()
        self.silence(0.3)
        assert len(self.finals) == before + 1, self.finals[before:]
        return self.finals[-1]

    def _take(self, events: list[Event]) -> None:
        self._record(events)
        while (job := self.core.next_job(self.now)) is not None:
            transcript = self.runner.decode_batch([job.request])[0]
            if job.kind == "final":  # (a speculative final may stand, or be dropped)
                tries = self._decoded.get(job.utterance_id, ("", 0))[1] + 1
                self._decoded[job.utterance_id] = (transcript.text.strip(), tries)
            self.now += 0.1
            self._record(self.core.on_result(job, transcript, self.now))

    def _record(self, events: list[Event]) -> None:
        """Finals come from a decode's result or, decoded speculatively, from the audio that
        confirms the end: either way the utterance's last final decode is what Whisper wrote."""
        for e in events:
            if isinstance(e, FinalText) and e.text:
                text, tries = self._decoded.pop(e.utterance_id, ("", 0))
                self.finals.append(e.text)
                self.whisper.append(text)
                self.attempts.append(tries)


def test_push_to_talk_finals_keep_their_form_all_session(recorded: Runner,
                                                         shared_audio: Path) -> None:
    """Every final of a session is capitalised and ended; the first keeps the comma Whisper
    writes only when steered by the style prompt (recorded: tiny.en writes this clip without
    any punctuation unprompted)."""
    session = Dictation(recorded, "ptt")
    jfk, concord = load_audio(shared_audio / JFK), load_audio(shared_audio / CONCORD)
    texts = [session.dictate(jfk), session.dictate(concord), session.dictate(jfk)]
    print(texts, session.whisper, session.attempts)
    assert all(t[0].isupper() and has_form(t) for t in texts), texts
    # The first JFK: Whisper's own comma, thanks to the style prompt (with no prompt tiny.en
    # writes the clip without any punctuation).
    assert session.whisper[0].startswith("And so") and "," in session.whisper[0], session.whisper
    assert texts[0].startswith("And so") and texts[1].startswith("Concord returned"), texts
    assert "," in texts[0], texts  # tiny.en writes this clip without any comma with no prompt


def test_an_unpunctuated_final_never_steers_the_next_one(recorded: Runner,
                                                        shared_audio: Path) -> None:
    """Text without form offered to the prompt (as a final from an unpadded window or a
    client's hello may be) is refused, so the next final keeps Whisper's punctuation instead
    of copying the unpunctuated style (recorded decodes of tiny.en)."""
    session = Dictation(recorded, "ptt")
    assert not session.core.policy.prompt.add(UNPUNCTUATED, at=0.0, language="en")
    text = session.dictate(load_audio(shared_audio / JFK))
    # Steered by that prompt, tiny.en writes "and so my fellow Americans ask not ... country"
    # (lower case, no punctuation at all); unsteered, it writes a capitalised, ended sentence.
    assert session.whisper[-1].startswith("And so") and has_form(session.whisper[-1]), (
        session.whisper)
    assert text == session.whisper[-1], text


@pytest.mark.model
def test_voice_activity_finals_keep_their_form(runner: Runner, shared_audio: Path,
                                               manifest: list) -> None:  # type: ignore[type-arg]
    """On the real model, any processor: every piece is capitalised unless it goes on with the
    sentence the piece before left open, the last one is ended, and the finals read the three
    clips' references in order (WER well under that of the clips in another order)."""
    session = Dictation(runner, "vad")
    for name in (JFK, CONCORD, JFK):
        session.silence(0.5)
        session.play(load_audio(shared_audio / name))
        session.silence(1.5)
    assert len(session.finals) >= 3, session.finals
    # The VAD cuts sentences at pauses, and words the partials agree on are final before
    # the pause (PolicyOptions.commit_stable): every piece is capitalised unless it goes on
    # with the sentence the piece before left open; the end of a sentence ends with
    # Whisper's punctuation.
    assert all(t[0].isupper() or reads_open(before)
               for before, t in zip(["."] + session.finals, session.finals, strict=False)), (
        session.finals)
    assert has_form(session.finals[-1]), session.finals
    said = {e.path.name: e.text for e in manifest}
    in_order = error_rate([" ".join(said[n] for n in (JFK, CONCORD, JFK))],
                          [" ".join(session.finals)])
    swapped = error_rate([" ".join(said[n] for n in (CONCORD, JFK, JFK))],
                         [" ".join(session.finals)])
    assert in_order <= 0.15 and in_order + 0.15 < swapped, (in_order, swapped)
