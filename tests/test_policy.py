"""StreamingPolicy, sans-I/O with simulated time: scheduling, agreement, finals, prompts, lag."""

from __future__ import annotations

import numpy as np
import pytest
from support.policy import SR, audio, started, transcript

from engine.core.form import ensure_form
from engine.core.policy import Job, PolicyOptions, StreamingPolicy
from engine.core.prompt import STYLE_ANCHORS
from engine.core.segmenter import SegmentAudio, SegmentEnded, SegmentStarted
from engine.events import (
    EngineFailed,
    FinalText,
    Metrics,
    PartialText,
    SpeechEnded,
    SpeechStarted,
)


def test_speech_start_then_partials_after_enough_audio() -> None:
    # (Committing early, partials ask for word times and take a prompt: test_commit.py.)
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.6, commit_stable=False))
    events = started(policy)
    assert events == [SpeechStarted(utterance_id=1, at=16000)]
    assert policy.next_request(0.4) is None  # 0.4 s is too little
    assert policy.handle(SegmentAudio(audio(0.3)), 0.7) == []
    request = policy.next_request(0.7)
    assert isinstance(request, Job)
    assert request.kind == "partial" and request.utterance_id == 1 and request.start == 16000
    assert len(request.audio) == int(0.7 * SR)
    assert request.options.beam_size == 1 and not request.options.word_timestamps
    assert request.options.prompt is None and request.options.short_context
    assert request.audio_arrived_at == 0.7
    assert policy.next_request(0.7) is None  # one in flight at most


def test_partial_result_commits_by_agreement_and_reports_metrics() -> None:
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.2, partial_interval_s=0.3,
                                           busy_factor=2.0, commit_stable=False))
    started(policy, seconds=0.5, now=0.5)
    r1 = policy.next_request(0.5)
    assert r1 is not None
    events = policy.on_result(r1.request_id, transcript("the quick"), 0.6)
    metrics = [e for e in events if isinstance(e, Metrics)][0]
    assert metrics.kind == "partial" and metrics.chunk_rtt_ms == pytest.approx(100)
    assert metrics.lag_ms == pytest.approx(100) and metrics.network_ms is None
    assert metrics.rtf == pytest.approx(0.05 / 0.5)
    assert [e for e in events if isinstance(e, PartialText)] == [
        PartialText(utterance_id=1, committed="", tentative="the quick", start=16000)]
    policy.handle(SegmentAudio(audio(0.5)), 0.8)
    assert policy.next_request(0.8) is None  # next partial not before 0.6 + max(0.3, 0.2)
    r2 = policy.next_request(0.9)
    assert r2 is not None
    events = policy.on_result(r2.request_id, transcript("the quick brown fox"), 1.0)
    assert events[-1] == PartialText(1, "the quick", "brown fox", 16000)


def test_until_the_first_words_show_partials_come_as_soon_as_there_is_new_audio() -> None:
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.5, partial_interval_s=0.4,
                                           min_new_audio_s=0.2, first_words_step_s=0.1,
                                           busy_factor=2.0))
    started(policy, seconds=0.5, now=0.5)
    first = policy.next_request(0.5)
    assert first is not None and first.kind == "partial"
    # A partial never falls back to the padded 30 s window: tentative text is not worth it.
    assert first.options.short_context and not first.options.short_fallback
    policy.on_result(first.request_id, transcript(""), 0.55)  # too early: no word yet
    policy.handle(SegmentAudio(audio(0.05)), 0.6)
    assert policy.next_request(0.6) is None  # nothing new worth reading yet
    policy.handle(SegmentAudio(audio(0.05)), 0.65)
    second = policy.next_request(0.65)  # not 0.55 + 0.4: as soon as 0.1 s more is in
    assert second is not None and second.kind == "partial"
    assert len(second.audio) == int(0.6 * SR)
    policy.on_result(second.request_id, transcript("the"), 0.7)
    policy.handle(SegmentAudio(audio(0.1)), 0.8)
    # Words are showing: the usual interval (0.4 s) and step (0.2 s of new audio) again.
    assert policy.next_request(0.8) is None
    policy.handle(SegmentAudio(audio(0.1)), 0.9)
    assert policy.next_request(0.9) is None  # 0.2 s new, but not 0.4 s after the last result
    assert policy.next_request(1.1) is not None


def test_busy_factor_spaces_partials_after_slow_decodes() -> None:
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.2, partial_interval_s=0.1,
                                           busy_factor=2.0, max_lag_s=5.0))
    started(policy, seconds=1.0)
    r1 = policy.next_request(1.0)
    assert r1 is not None
    policy.on_result(r1.request_id, transcript("a"), 1.5)  # took 0.5 s
    policy.handle(SegmentAudio(audio(1.0)), 2.0)
    assert policy.next_request(2.4) is None  # not before 1.5 + 2 * 0.5
    assert policy.next_request(2.5) is not None


def test_no_partial_without_new_audio_or_when_disabled() -> None:
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.2, partial_interval_s=0.0,
                                           min_new_audio_s=0.2, busy_factor=1.0))
    started(policy, seconds=0.5)
    r1 = policy.next_request(0.5)
    assert r1 is not None
    policy.on_result(r1.request_id, transcript("x"), 0.5)
    policy.handle(SegmentAudio(audio(0.1)), 0.6)
    assert policy.next_request(0.6) is None
    off = StreamingPolicy(PolicyOptions(partials=False))
    started(off, seconds=5.0)
    assert off.next_request(10.0) is None


def test_end_of_speech_gives_one_final_with_offset_words_and_latency() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False))
    started(policy, start=8000, seconds=1.0, now=1.0)
    policy.handle(SegmentAudio(audio(1.0)), 2.0)
    # the segmenter noticed the end 0.5 s of silence late: speech ended at sample 8000 + 1.5 s
    events = policy.handle(SegmentEnded(end=8000 + int(1.7 * SR), speech_end=8000 + int(1.5 * SR),
                                        speech_windows=40), 2.0)
    assert events == [SpeechEnded(utterance_id=1, at=8000 + int(1.7 * SR))]
    final = policy.next_request(2.0)
    assert final is not None and final.kind == "final"
    assert len(final.audio) == int(1.7 * SR)  # cut back to the padded end
    assert final.options.word_timestamps and final.options.beam_size == 1  # greedy first
    assert final.options.temperatures == (0.0, 0.4)
    assert final.options.prompt is None
    assert final.audio_arrived_at == pytest.approx(1.5)
    events = policy.on_result(final.request_id, transcript("Hello world.", seconds=1.7), 2.2)
    text = [e for e in events if isinstance(e, FinalText)][0]
    assert text.text == "Hello world." and text.start == 8000 and text.end == 8000 + int(1.7 * SR)
    assert [w.start for w in text.words] == [8000, 8000 + int(0.85 * SR)]
    assert text.latency_ms == pytest.approx(200)
    assert text.after_speech_end_ms == pytest.approx(700)
    assert text.language == "en"
    assert policy.idle


def test_finals_feed_the_prompt_of_the_next_final() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False))
    for n, (text, now) in enumerate([("First sentence.", 1.0), ("Second one.", 3.0)]):
        started(policy, start=n * 10 * SR, seconds=1.0, now=now)
        policy.handle(SegmentEnded(n * 10 * SR + SR, n * 10 * SR + SR, 10), now)
        request = policy.next_request(now)
        assert request is not None
        assert request.options.prompt == (None if n == 0 else "First sentence.")
        policy.on_result(request.request_id, transcript(text), now + 0.1)
    assert policy.prompt.prompt(4.0) == "First sentence. Second one."


def test_finals_take_priority_over_partials() -> None:
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.1, partial_interval_s=0.0))
    started(policy, start=0, seconds=1.0)
    policy.handle(SegmentEnded(SR, SR, 10), 1.0)
    started(policy, start=2 * SR, seconds=1.0, now=2.0)
    request = policy.next_request(2.0)
    assert request is not None and request.kind == "final" and request.utterance_id == 1
    policy.on_result(request.request_id, transcript("one"), 2.1)
    request = policy.next_request(2.1)
    assert request is not None and request.kind == "partial" and request.utterance_id == 2


def test_partial_result_after_the_utterance_ended_is_not_shown() -> None:
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.1))
    started(policy, seconds=1.0)
    partial = policy.next_request(1.0)
    assert partial is not None
    policy.handle(SegmentEnded(16000 + SR, 16000 + SR, 10), 1.1)
    events = policy.on_result(partial.request_id, transcript("late"), 1.2)
    assert [type(e) for e in events] == [Metrics]
    assert not policy.idle  # the final is still pending
    assert policy.on_result(partial.request_id, transcript("again"), 1.3) == []


def test_a_slow_partial_of_an_ended_utterance_does_not_hold_back_the_next_ones() -> None:
    # (CI, 2 cores: a push-to-talk utterance's partial still ran beside its final and took
    # 1.8 s; its lag doubled the backoff and its result put the next partial 7 s off, so the
    # next utterance, 2.8 s long, showed no partial text while the key was held.)
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.1, partial_interval_s=0.2,
                                           busy_factor=2.0, max_lag_s=1.0, max_in_flight=2,
                                           commit_stable=False))
    started(policy, start=0, seconds=1.0, now=1.0)
    partial = policy.next_request(1.0)
    assert partial is not None and partial.kind == "partial"
    policy.handle(SegmentEnded(SR, SR, 10), 1.1)
    final = policy.next_request(1.1)
    assert final is not None and final.kind == "final"
    policy.on_result(final.request_id, transcript("One."), 1.6)
    events = policy.on_result(partial.request_id, transcript("One"), 3.0)  # 2 s behind
    assert [type(e) for e in events] == [Metrics]  # (reported, not shown)
    assert policy.backoff == 1.0
    started(policy, start=2 * SR, seconds=1.0, now=3.1)
    request = policy.next_request(3.1)
    assert request is not None and (request.kind, request.utterance_id) == ("partial", 2)


def test_no_partial_of_a_pause() -> None:
    # (Audio the VAD calls silence adds no words; its decode would compete with the final.)
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.2, partial_interval_s=0.0,
                                           min_new_audio_s=0.2, busy_factor=1.0,
                                           commit_stable=False))
    started(policy, seconds=0.5)
    first = policy.next_request(0.5)
    assert first is not None
    policy.on_result(first.request_id, transcript("hello"), 0.5)
    policy.handle(SegmentAudio(audio(0.5), speech=False), 1.0)
    assert policy.next_request(1.0) is None
    policy.handle(SegmentAudio(audio(0.1)), 1.1)
    assert policy.next_request(1.1) is not None


def test_unknown_results_and_failures_are_ignored() -> None:
    policy = StreamingPolicy()
    assert policy.on_result(99, transcript("x"), 0.0) == []
    assert policy.on_failure(99, "boom", 0.0) == []
    assert policy.handle(SegmentAudio(audio(0.1)), 0.0) == []
    assert policy.handle(SegmentEnded(0, 0, 1), 0.0) == []


def test_failed_partial_reports_and_failed_final_closes_the_utterance() -> None:
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.1))
    started(policy, seconds=1.0)
    partial = policy.next_request(1.0)
    assert partial is not None
    assert policy.on_failure(partial.request_id, "oom", 1.1) == [
        EngineFailed("decode failed: oom", recoverable=True)]
    policy.handle(SegmentEnded(16000 + SR, 16000 + SR, 10), 1.2)
    final = policy.next_request(1.2)
    assert final is not None
    events = policy.on_failure(final.request_id, "oom", 1.3)
    assert isinstance(events[0], EngineFailed)
    assert isinstance(events[1], FinalText) and events[1].text == "" and events[1].words == ()
    assert policy.idle


def test_utterance_without_speech_gets_an_empty_final_without_decoding() -> None:
    policy = StreamingPolicy()
    started(policy, seconds=1.0)
    events = policy.handle(SegmentEnded(16000 + SR, 16000 + SR, speech_windows=0), 1.0)
    assert isinstance(events[0], SpeechEnded)
    assert isinstance(events[1], FinalText) and events[1].text == "" and events[1].latency_ms == 0
    assert policy.next_request(1.0) is None and policy.idle


def test_looping_final_with_a_prompt_is_retried_once_without_it() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False))
    policy.prompt.add("Earlier text.", at=0.0)
    started(policy, seconds=3.0, now=3.0)
    policy.handle(SegmentEnded(16000 + 3 * SR, 16000 + 3 * SR, 50), 3.0)
    first = policy.next_request(3.0)
    assert first is not None and first.options.prompt == "Earlier text."
    loop = "the train was late again " * 6
    events = policy.on_result(first.request_id, transcript(loop, seconds=3.0), 3.2)
    assert [type(e) for e in events] == [Metrics]  # no text yet: retried
    retry = policy.next_request(3.2)
    assert retry is not None and retry.kind == "final" and retry.options.prompt is None
    assert first.options.short_context and not retry.options.short_context  # padded, robust
    assert (first.options.beam_size, retry.options.beam_size) == (1, 5)  # the hard case: beam
    events = policy.on_result(retry.request_id, transcript("The train was late.", seconds=3.0),
                              3.4)
    final = [e for e in events if isinstance(e, FinalText)][0]
    assert final.text == "The train was late."


@pytest.mark.parametrize("loop", ["thank you " * 10, "1 1 1 1 1 1", "2 2 2 2", "no " * 9,
                                  "Three. Three.",
                                  "is going to be forced is going to be forced",
                                  "Very bad aligner. Very bad aligner.",
                                  "we are just saying some words I know what I'm saying "
                                  "we are just saying some words"])
def test_a_final_looping_twice_is_kept_but_not_used_as_prompt(loop: str) -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False))
    started(policy, seconds=1.0, now=3.0)
    policy.handle(SegmentEnded(16000 + SR, 16000 + SR, 50), 3.0)
    for _attempt in range(2):
        request = policy.next_request(3.0)
        assert request is not None
        events = policy.on_result(request.request_id, transcript(loop, seconds=1.0), 3.2)
    kept = [e for e in events if isinstance(e, FinalText)][0].text
    assert kept == ensure_form(loop)[0]  # kept (with sentence form), not dropped
    assert policy.prompt.prompt(3.3) is None
    assert policy.idle


def test_no_retry_when_disabled() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False, retry_on_loop=False))
    started(policy, seconds=1.0, now=3.0)
    policy.handle(SegmentEnded(16000 + SR, 16000 + SR, 50), 3.0)
    request = policy.next_request(3.0)
    assert request is not None
    events = policy.on_result(request.request_id, transcript("Go go go go.", seconds=3.0), 3.2)
    assert [e for e in events if isinstance(e, FinalText)][0].text == "Go go go go."


def test_partial_that_loops_is_not_shown() -> None:
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.1))
    started(policy, seconds=1.0, now=1.0)
    request = policy.next_request(1.0)
    assert request is not None
    events = policy.on_result(request.request_id, transcript("one one one one one"), 1.1)
    assert events[-1] == PartialText(1, "", "", 16000)


def test_no_speech_segments_are_dropped() -> None:
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.1))
    started(policy, seconds=2.0, now=2.0)
    partial = policy.next_request(2.0)
    assert partial is not None
    events = policy.on_result(partial.request_id,
                              transcript("Thank you.", no_speech=0.9, logprob=-1.5), 2.1)
    assert events[-1] == PartialText(1, "", "", 16000)
    policy.handle(SegmentEnded(16000 + 2 * SR, 16000 + 2 * SR, 5), 2.2)
    final = policy.next_request(2.2)
    assert final is not None
    events = policy.on_result(final.request_id,
                              transcript("Thank you.", no_speech=0.9, logprob=-1.5), 2.3)
    text = [e for e in events if isinstance(e, FinalText)][0]
    assert text.text == "" and text.words == ()


def test_lag_backs_off_partials_and_recovers() -> None:
    # (Committing early, the lag does not back partials off: they make the final text.)
    opts = PolicyOptions(min_partial_audio_s=0.1, partial_interval_s=0.2, busy_factor=1.0,
                         max_lag_s=1.0, min_new_audio_s=0.0, commit_stable=False)
    policy = StreamingPolicy(opts)
    started(policy, seconds=1.0, now=1.0)
    now = 1.0
    request = policy.next_request(now)
    assert request is not None
    events = policy.on_result(request.request_id, transcript("slow"), now + 1.5)
    assert [e for e in events if isinstance(e, Metrics)][0].lag_ms == pytest.approx(1500)
    assert policy.backoff == 2.0 and policy.last_lag_ms == pytest.approx(1500)
    now += 1.5
    policy.handle(SegmentAudio(audio(0.1)), now)
    # next partial waits max(0.2, 1.0 * 1.5) * 2 = 3 s
    assert policy.next_request(now + 2.9) is None
    now += 3.0
    policy.handle(SegmentAudio(audio(0.1)), now)
    request = policy.next_request(now)
    assert request is not None
    policy.on_result(request.request_id, transcript("fast"), now + 0.1)
    assert policy.backoff == 1.0
    # lag between max/2 and max leaves the backoff unchanged
    policy.handle(SegmentAudio(audio(0.1)), now + 1.0)
    request = policy.next_request(now + 1.0)
    assert request is not None
    policy.on_result(request.request_id, transcript("mid"), now + 1.7)
    assert policy.backoff == 1.0
    for _ in range(5):
        policy.lag.track(10.0)
    assert policy.backoff == 8.0  # capped


def test_a_new_start_closes_an_open_utterance() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False))
    started(policy, start=0, seconds=1.0)
    events = started(policy, start=SR, seconds=1.0)
    assert [type(e) for e in events] == [SpeechEnded, SpeechStarted]
    assert events[1] == SpeechStarted(utterance_id=2, at=SR)
    request = policy.next_request(1.0)
    assert request is not None and request.utterance_id == 1


def test_cancel_forgets_everything() -> None:
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.1))
    started(policy, seconds=1.0)
    request = policy.next_request(1.0)
    assert request is not None and policy.in_flight == 1
    policy.cancel()
    assert policy.idle and policy.on_result(request.request_id, transcript("x"), 1.1) == []


def test_handle_all_and_empty_audio() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False))
    events = policy.handle_all([SegmentStarted(0, np.zeros(0, np.float32)),
                                SegmentAudio(np.zeros(0, np.float32)),
                                SegmentEnded(0, 0, 3)], 0.0)
    assert [type(e) for e in events] == [SpeechStarted, SpeechEnded, FinalText]


def test_more_in_flight_for_a_batching_server() -> None:
    policy = StreamingPolicy(PolicyOptions(max_in_flight=2, min_partial_audio_s=0.1))
    started(policy, start=0, seconds=1.0)
    policy.handle(SegmentEnded(SR, SR, 5), 1.0)
    started(policy, start=2 * SR, seconds=1.0, now=2.0)
    first, second = policy.next_request(2.0), policy.next_request(2.0)
    assert first is not None and first.kind == "final"
    assert second is not None and second.kind == "partial"
    assert policy.next_request(2.0) is None


@pytest.mark.parametrize("kwargs", [
    {"min_partial_audio_s": -1}, {"busy_factor": 0.5}, {"max_lag_s": 0}, {"max_in_flight": 0},
    {"final_beam_size": 0}, {"careful_beam_size": 0}, {"greedy_final_max_s": -1.0}, {"soft_no_speech": 0.0}, {"language": "e1"}, {"task": "summarise"}, {"final_temperatures": ()},
])
def test_options_are_validated(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        PolicyOptions(**kwargs)


def test_no_partials_until_speech_is_heard() -> None:
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.1, partial_interval_s=0.0))
    policy.handle(SegmentStarted(0, audio(1.0), speech=False), 1.0)
    policy.handle(SegmentAudio(audio(0.5), speech=False), 1.5)
    assert policy.next_request(1.5) is None
    policy.handle(SegmentAudio(audio(0.5), speech=True), 2.0)
    request = policy.next_request(2.0)
    assert request is not None and request.kind == "partial"


def test_finals_are_greedy_while_behind() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False, final_beam_size=5, max_lag_s=10.0))
    for n in range(2):
        started(policy, start=n * 2 * SR, seconds=1.0, now=float(n))
        policy.handle(SegmentEnded(n * 2 * SR + SR, n * 2 * SR + SR, 10), float(n))
    first = policy.next_request(2.0)
    assert first is not None and first.options.beam_size == 1  # another final is waiting
    policy.on_result(first.request_id, transcript("one"), 2.1)
    second = policy.next_request(2.1)
    assert second is not None and second.options.beam_size == 5  # caught up


def test_repeated_words_spoken_slowly_are_not_a_loop() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False))
    started(policy, seconds=4.0, now=4.0)
    policy.handle(SegmentEnded(16000 + 4 * SR, 16000 + 4 * SR, 50), 4.0)
    request = policy.next_request(4.0)
    assert request is not None
    text = "And here are some more words, words, words, words. you know, you know."
    events = policy.on_result(request.request_id, transcript(text, seconds=4.0), 4.2)
    assert [e for e in events if isinstance(e, FinalText)][0].text == text


def test_a_final_reciting_its_prompt_is_retried_without_it() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False))
    policy.prompt.add("I'm talking pretty fast here. There's nothing going on.", at=0.0)
    started(policy, seconds=3.0, now=3.0)
    policy.handle(SegmentEnded(16000 + 3 * SR, 16000 + 3 * SR, 50), 3.0)
    first = policy.next_request(3.0)
    assert first is not None and first.options.prompt
    echo = "we are just saying some words. I'm talking pretty fast here, there's nothing going"
    assert [type(e) for e in policy.on_result(first.request_id, transcript(echo, seconds=3.0),
                                              3.2)] == [Metrics]
    retry = policy.next_request(3.2)
    assert retry is not None and retry.options.prompt is None
    fine = "And I'm talking pretty fast here too."  # 5 shared words in a row: not an echo
    policy.prompt.add("Unrelated.", at=3.3)
    started(policy, start=10 * SR, seconds=3.0, now=4.0)
    policy.handle(SegmentEnded(13 * SR, 13 * SR, 50), 4.0)
    policy.on_result(retry.request_id, transcript("we are just saying some words"), 4.0)
    request = policy.next_request(4.0)
    assert request is not None and request.options.prompt
    events = policy.on_result(request.request_id, transcript(fine, seconds=3.0), 4.2)
    assert [e for e in events if isinstance(e, FinalText)][0].text == fine


def test_the_prompt_of_a_short_utterance_is_kept_in_proportion() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False))
    policy.prompt.add("word " * 60 + "end.", at=0.0)
    started(policy, seconds=1.0, now=1.0)
    policy.handle(SegmentEnded(16000 + SR, 16000 + SR, 20), 1.0)
    request = policy.next_request(1.0)
    assert request is not None and request.options.prompt is not None
    assert len(request.options.prompt) <= 40


def test_long_utterances_take_the_padded_window() -> None:
    policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.1, short_context_max_s=5.0))
    started(policy, seconds=6.0, now=6.0)
    partial = policy.next_request(6.0)
    assert partial is not None and not partial.options.short_context
    policy.handle(SegmentEnded(16000 + 6 * SR, 16000 + 6 * SR, 50), 6.0)
    policy.on_result(partial.request_id, transcript("x"), 6.1)
    final = policy.next_request(6.1)
    assert final is not None and final.kind == "final" and not final.options.short_context


def test_a_final_that_stops_before_the_speech_does_is_retried_on_the_padded_window() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False))
    started(policy, start=0, seconds=3.0, now=3.0)
    policy.handle(SegmentEnded(3 * SR, 3 * SR, 50), 3.0)
    first = policy.next_request(3.0)
    assert first is not None and first.options.short_context
    # two words ending at 0.6 s of 3 s of speech
    assert [type(e) for e in policy.on_result(first.request_id, transcript("so this"), 3.2)] == [
        Metrics]
    retry = policy.next_request(3.2)
    assert retry is not None and not retry.options.short_context
    events = policy.on_result(retry.request_id, transcript("So this."), 3.4)
    assert [e for e in events if isinstance(e, FinalText)][0].text == "So this."


def test_early_end_needs_words_and_a_risky_first_attempt() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False, short_context=False))
    started(policy, start=0, seconds=3.0, now=3.0)
    policy.handle(SegmentEnded(3 * SR, 3 * SR, 50), 3.0)
    request = policy.next_request(3.0)
    assert request is not None and not request.options.short_context
    events = policy.on_result(request.request_id, transcript("So this."), 3.2)
    assert [e for e in events if isinstance(e, FinalText)][0].text == "So this."


def test_a_soft_utterance_keeps_only_what_the_model_calls_speech() -> None:
    """The segmenter's soft path (energy, weak VAD score) asks the decoder to confirm: its
    segments must have a no-speech probability under soft_no_speech, whatever the log-prob."""
    for soft, no_speech, expected in [(True, 0.7, ""), (True, 0.3, "Hello there."),
                                      (False, 0.7, "Hello there.")]:
        policy = StreamingPolicy(PolicyOptions(partials=False))
        started(policy, seconds=2.0, now=2.0)
        policy.handle(SegmentEnded(16000 + 2 * SR, 16000 + 2 * SR, 20, soft=soft), 2.0)
        request = policy.next_request(2.0)
        assert request is not None
        # a soft utterance is decoded carefully: padded window, beam search
        careful = (request.options.beam_size, request.options.short_context) == (5, False)
        assert careful == soft
        result = transcript("Hello there.", seconds=2.0, no_speech=no_speech, logprob=-0.3)
        events = policy.on_result(request.request_id, result, 2.2)
        assert [e.text for e in events if isinstance(e, FinalText)] == [expected]


def test_long_finals_take_the_careful_beam() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False))
    for seconds, beam in [(5.0, 1), (6.0, 5)]:
        started(policy, seconds=seconds, now=10.0)
        policy.handle(SegmentEnded(16000 + int(seconds * SR), 16000 + int(seconds * SR), 50), 10.0)
        request = policy.next_request(10.0)
        assert request is not None and request.options.beam_size == beam
        policy.on_result(request.request_id, transcript("fine words here", seconds=seconds), 10.2)


def _ended(policy: StreamingPolicy, seconds: float = 3.0, now: float = 3.0) -> None:
    started(policy, seconds=seconds, now=now)
    end = 16000 + int(seconds * SR)
    policy.handle(SegmentEnded(end, end, 50), now)


def _final_of(policy: StreamingPolicy, text: str, *, start: int, now: float) -> tuple[Job, str]:
    """One 3 s utterance from ``start`` (samples), decoded as ``text``: its request, its final."""
    started(policy, start=start, seconds=3.0, now=now)
    end = start + 3 * SR
    policy.handle(SegmentEnded(end, end, 50), now)
    request = policy.next_request(now)
    assert request is not None and request.kind == "final"
    events = policy.on_result(request.request_id, transcript(text, seconds=3.0), now + 0.2)
    finals = [e.text for e in events if isinstance(e, FinalText)]
    assert len(finals) == 1, "decoded once"
    return request, finals[0]


def test_a_final_that_goes_on_with_an_open_sentence_keeps_its_lower_case_start() -> None:
    """A pause longer than the wait cut a sentence at its comma (VAD mode): the next piece is
    decoded with the open piece as its prompt and keeps Whisper's lower-case start; it is
    not capitalised. After a piece that ends a sentence, or once the open one is too long
    ago, a lower-case start is a new sentence's: capitalised."""
    policy = StreamingPolicy(PolicyOptions(partials=False, language="en", end_sentences=False))
    _, first = _final_of(policy, "And so, my fellow Americans,", start=SR, now=4.0)
    request, second = _final_of(policy, "ask not what your country can do for you.",
                                start=5 * SR, now=8.0)
    assert (first, second) == ("And so, my fellow Americans,",
                               "ask not what your country can do for you.")
    assert request.options.prompt == "And so, my fellow Americans,"
    # The sentence ended: a lower-case start is a new sentence's.
    assert _final_of(policy, "ask again", start=9 * SR, now=12.0)[1] == "Ask again"
    # An open piece, then a long silence: the prompt's memory is gone, so is the sentence.
    policy = StreamingPolicy(PolicyOptions(partials=False, language="en", end_sentences=False))
    _final_of(policy, "Well,", start=SR, now=4.0)
    gap = int(PolicyOptions().prompt.reset_after_s + 1) * SR
    request, text = _final_of(policy, "ask again", start=4 * SR + gap, now=30.0)
    assert request.options.prompt == STYLE_ANCHORS["en"] and text == "Ask again"


_W = ["Word0", *(f"word{i}" for i in range(1, 20))]
WORDS = " ".join(_W) + "."  # what the partial heard
SKIPPED = " ".join(_W[:10]) + "."  # a final that skipped half of it


def _heard_then_ended(policy: StreamingPolicy, heard: str) -> None:
    """A 6 s utterance whose last partial (4 s in) read ``heard``; then it ends."""
    started(policy, seconds=4.0, now=4.0)
    partial = policy.next_request(4.0)
    assert partial is not None and partial.kind == "partial"
    policy.on_result(partial.request_id, transcript(heard, seconds=4.0), 4.1)
    policy.handle(SegmentAudio(audio(2.0)), 6.0)
    policy.handle(SegmentEnded(16000 + 6 * SR, 16000 + 6 * SR, 150), 6.0)


@pytest.mark.parametrize(("again", "final"), [(WORDS, WORDS), ("Word0 word1.", SKIPPED)])
def test_a_final_that_drops_words_its_partial_heard_is_decoded_as_the_partials_are(
        again: str, final: str) -> None:
    """Whisper can skip a sentence of a long window (prompted or not) that the partials,
    greedy and without a prompt, read: such a final is decoded once more their way, and that
    text stands if it reads more (one replay only)."""
    policy = StreamingPolicy(PolicyOptions(language="en", speculative_finals=False))
    _heard_then_ended(policy, WORDS)
    first = policy.next_request(6.0)
    assert first is not None and first.kind == "final" and first.options.prompt
    assert [type(e) for e in policy.on_result(
        first.request_id, transcript(SKIPPED, seconds=6.0), 6.3)] == [Metrics]
    replay = policy.next_request(6.3)
    assert replay is not None and replay.kind == "final" and len(replay.audio) == 6 * SR
    o = replay.options
    assert (o.prompt, o.hotwords, o.beam_size, o.temperatures) == (None, None, 1, (0.0,))
    assert o.word_timestamps and o.short_context and not o.short_fallback
    events = policy.on_result(replay.request_id, transcript(again, seconds=6.0), 6.5)
    assert [e.text for e in events if isinstance(e, FinalText)] == [final]
    assert policy.next_request(6.5) is None and policy.idle


@pytest.mark.parametrize(("heard", "final"), [
    (WORDS, " ".join(_W[:16]) + "."),  # 4 words fewer: partials over-read a little, too
    (SKIPPED + " " + SKIPPED, SKIPPED),  # the partial said it twice: no new words
])
def test_a_final_without_many_new_words_of_its_partial_stands(heard: str, final: str) -> None:
    policy = StreamingPolicy(PolicyOptions(language="en", speculative_finals=False))
    _heard_then_ended(policy, heard)
    first = policy.next_request(6.0)
    assert first is not None
    events = policy.on_result(first.request_id, transcript(final, seconds=6.0), 6.3)
    assert [e.text for e in events if isinstance(e, FinalText)] == [final]


def test_a_final_without_form_is_repaired_and_kept_out_of_the_prompt() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False, language="en"))
    _ended(policy)
    request = policy.next_request(3.0)
    assert request is not None
    events = policy.on_result(request.request_id,
                              transcript("go forward ten meters", seconds=3.0), 3.2)
    assert [e.text for e in events if isinstance(e, FinalText)] == ["Go forward ten meters."]
    assert policy.next_request(3.3) is None and policy.idle
    assert policy.prompt.prompt(3.3) == STYLE_ANCHORS["en"]  # not the unformed text


def test_without_a_style_prompt_a_final_is_repaired_without_a_retry() -> None:
    policy = StreamingPolicy(PolicyOptions(partials=False))  # auto-detect, nothing heard yet
    _ended(policy)
    request = policy.next_request(3.0)
    assert request is not None and request.options.prompt is None
    events = policy.on_result(request.request_id, transcript("go forward ten meters",
                                                             seconds=3.0, language="xx"), 3.2)
    assert [e.text for e in events if isinstance(e, FinalText)] == ["Go forward ten meters."]


def test_every_decode_asks_for_the_padding_chosen() -> None:
    for padding in ("encoded", "silence"):
        policy = StreamingPolicy(PolicyOptions(min_partial_audio_s=0.2, padding=padding))
        started(policy, seconds=0.5)
        partial = policy.next_request(0.5)
        assert partial is not None and partial.request.padding == padding
        policy.on_result(partial.request_id, transcript("the quick"), 0.6)
        policy.handle(SegmentEnded(end=16000 + 8000, speech_end=16000 + 8000,
                                   speech_windows=10), 0.7)
        final = policy.next_request(0.7)
        assert final is not None and final.kind == "final"
        assert final.request.padding == padding
    assert PolicyOptions().padding == "encoded"  # quality first (see PolicyOptions)
