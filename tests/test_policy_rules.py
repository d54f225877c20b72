"""The streaming rules as a table: a switch per rule (`RULES`), every retry of a final through
one table with a cap and a selection rule, and the hints the policy emits to the segmenter."""

from __future__ import annotations

import numpy as np
import pytest
from support.policy import SR, audio, started, transcript

from engine.core.ladder import Rung
from engine.core.policy import (
    RULES,
    AwaitReading,
    Job,
    PauseReads,
    PolicyOptions,
    StreamingPolicy,
    finals,
)
from engine.core.policy.job import JobKind
from engine.core.policy.retries import MAX_FINAL_DECODES, Retry
from engine.core.segmenter import SegmentAudio, SegmentEnded, SegmentPaused
from engine.events import FinalText
from engine.types import DecodeOptions, DecodeRequest


def test_every_rule_turns_off_by_name() -> None:
    full = PolicyOptions()
    for name in RULES:
        assert full.without(name) != full, name
    assert full.without("shorten_end_wait", "replay") == PolicyOptions(shorten_end_wait=False,
                                                                   replay=False)
    with pytest.raises(ValueError, match="unknown rule.*nonsense.*rules: speculation"):
        full.without("nonsense")


def _job() -> Job:
    return Job(request_id=1, utterance_id=1, kind=JobKind.FINAL, start=0, issued_at=0.0,
               audio_arrived_at=0.0, request=DecodeRequest(np.zeros(SR, np.float32),
                                                           DecodeOptions()))


def _judged(rung: Rung = Rung.ACCEPT, text: str = "one two three", flags: tuple[str, ...] = ()
            ) -> finals.Judged:
    return finals.Judged(_job(), transcript(text), [], flags, rung)


def test_retries_come_from_one_table_in_its_order_within_the_cap() -> None:
    o = PolicyOptions()
    # A ladder rung first, then the replay; each at most once.
    assert finals.next_retry(o, _judged(Rung.PADDED), decodes=1, tried=(),
                             dropped=True) is Retry.PADDED
    assert finals.next_retry(o, _judged(), decodes=2, tried=[Retry.PADDED],
                             dropped=True) is Retry.REPLAY
    # The rungs follow a first decode only; nothing is tried twice.
    assert finals.next_retry(o, _judged(Rung.BEAM), decodes=2, tried=[Retry.REPLAY],
                             dropped=True) is None
    # A switched-off row is skipped; past the cap nothing is retried.
    assert finals.next_retry(o.without("replay"), _judged(), decodes=2, tried=(),
                             dropped=True) is None
    assert finals.next_retry(o, _judged(), decodes=MAX_FINAL_DECODES, tried=(),
                             dropped=True) is None


def test_of_two_decodes_the_one_that_passes_the_checks_wins_then_the_longer() -> None:
    short, longer = _judged(text="one two"), _judged(text="one two three four")
    looping = _judged(text="one two three four five six", flags=("word_loop",))
    assert finals.choose(short, longer) is longer
    assert finals.choose(longer, short) is longer
    assert finals.choose(short, looping) is short  # reads more, but loops
    assert finals.choose(short, _judged(text="one two")) is short  # a tie keeps the earlier


def test_a_replay_that_loops_does_not_replace_the_final_it_replays() -> None:
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.2, commit_stable=False))
    started(policy, seconds=3.0)
    partial = policy.next_request(3.0)
    assert partial is not None and partial.kind == "partial"
    heard = "one two three four five six seven eight nine ten"
    policy.on_result(partial.request_id, transcript(heard, seconds=3.0), 3.1)
    end = 16000 + 3 * SR
    policy.handle(SegmentEnded(end, end, 50), 3.5)
    final = policy.next_request(3.5)
    assert final is not None and final.kind == "final"
    assert not [e for e in policy.on_result(final.request_id,
                                            transcript("one two three", seconds=3.0), 3.7)
                if isinstance(e, FinalText)]  # it dropped seven words the partial heard
    replay = policy.next_request(3.7)
    assert replay is not None and replay.kind == "final" and replay.options.beam_size == 1
    assert replay.options.prompt is None and not replay.options.short_fallback
    events = policy.on_result(replay.request_id,
                              transcript(" ".join(["again"] * 14), seconds=3.0), 3.9)
    assert [e.text for e in events if isinstance(e, FinalText)] == ["One two three."]
    assert policy.next_request(4.0) is None  # nothing more decoded


@pytest.mark.parametrize(("options", "hint"), [
    (PolicyOptions(), PauseReads("finished")),
    (PolicyOptions(shorten_end_wait=False), PauseReads(None)),  # the rule off: the usual wait
])
def test_the_policy_tells_the_segmenter_how_a_pause_reads(options: PolicyOptions,
                                                          hint: PauseReads) -> None:
    policy = StreamingPolicy(options)
    started(policy, seconds=2.0, now=2.0)
    policy.handle(SegmentAudio(audio(0.2), speech=False), 2.2)
    policy.handle(SegmentPaused(at=16000 + int(2.2 * SR)), 2.2)
    spec = policy.next_request(2.2)
    assert spec is not None and spec.speculative
    assert policy.hints() == [AwaitReading()]  # until its text is back, no usual end
    policy.on_result(spec.request_id, transcript("This is the end.", seconds=2.2), 2.3)
    assert policy.hints() == [hint]
    assert policy.hints() == []  # each hint once
