"""Exporters: each format parses back to what was written; subtitle cues obey the readability
rules (<= 42 chars a line, <= 2 lines, <= 7 s, word boundaries) on many generated transcripts."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.subtitles import parse_json, parse_srt, parse_txt, parse_vtt

from engine.types import SAMPLE_RATE, Segment, Transcript, Word
from engine.wire.export import (
    FORMATS,
    Cue,
    CueLayout,
    format_timestamp,
    layout_cues,
    render,
    to_json,
    to_srt,
    to_txt,
    to_vtt,
    wrap_lines,
)

S = SAMPLE_RATE
VOCAB = ("the", "a", "of", "country", "Americans,", "ask", "not", "what", "you", "can", "do.",
         "for", "your", "fellow", "extraordinarily", "circumstances", "I", "we're", "okay?",
         "antidisestablishmentarianism", "naïve", "日本語", "<tag>", "R&D", "-->")


def timed_segment(words: list[str], start: int, word_len: int = S // 3, gap: int = 0) -> Segment:
    timed, t = [], start
    for w in words:
        timed.append(Word(" " + w, t, t + word_len, 0.9))
        t += word_len + gap
    return Segment(text="".join(x.text for x in timed), start=start, end=t, words=tuple(timed))


def random_transcript(rng: random.Random) -> Transcript:
    segments, t = [], 0
    for _ in range(rng.randint(1, 6)):
        n = rng.randint(1, 60)
        words = [rng.choice(VOCAB) for _ in range(n)]
        if rng.random() < 0.1:
            words.append("x" * rng.randint(43, 100))  # longer than a line: must be cut
        if rng.random() < 0.3:  # no word timings: spread over the segment
            length = rng.randint(1, 30 * S)
            segments.append(Segment(text=" " + " ".join(words), start=t, end=t + length))
            t += length
        else:
            seg = timed_segment(words, t, rng.randint(S // 20, 2 * S), rng.choice((0, 0, S // 2, 2 * S)))
            segments.append(seg)
            t = seg.end
        t += rng.choice((0, S // 10, 3 * S))
    return Transcript(segments=tuple(segments), language="en", duration=t + S)


def assert_cue_rules(transcript: Transcript, cues: list[Cue], lay: CueLayout) -> None:
    for cue in cues:
        assert 1 <= len(cue.lines) <= lay.max_lines, cue
        assert all(0 < len(line) <= lay.max_line_chars for line in cue.lines), cue
        assert 0 < cue.end - cue.start <= lay.max_duration, cue
    for before, after in zip(cues, cues[1:], strict=False):
        assert before.end <= after.start, (before, after)
    # Split only at word boundaries: the cues hold every word, once, in order.
    cue_text = "".join(" ".join(c.lines) for c in cues).replace(" ", "")
    assert cue_text == transcript.text.replace(" ", "")


@pytest.mark.parametrize("seed", range(200))
def test_generated_transcripts_obey_cue_rules_and_round_trip(seed: int) -> None:
    rng = random.Random(seed)
    transcript = random_transcript(rng)
    lay = CueLayout()
    cues = layout_cues(transcript, lay)
    assert_cue_rules(transcript, cues, lay)
    for parsed in (parse_srt(to_srt(transcript)), parse_vtt(to_vtt(transcript))):
        assert [c.lines for c in parsed] == [c.lines for c in cues]
        for got, want in zip(parsed, cues, strict=True):  # millisecond resolution
            assert abs(got.start - want.start) <= S // 2000 and abs(got.end - want.end) <= S // 2000
    assert parse_json(to_json(transcript)) == transcript
    assert parse_txt(to_txt(transcript)) == " ".join(transcript.text.split())


JFK = ("And so my fellow Americans, ask not what your country can do for you, ask what "
       "you can do for your country.")


def test_a_txt_line_is_a_run_of_segments_that_ends_a_sentence() -> None:
    # Whisper cut the JFK excerpt after "do for you" with one processor's kernels and after
    # "Americans," with another's: the text file reads the same either way.
    def cut(*texts: str) -> Transcript:
        return Transcript(segments=tuple(Segment(t, i * S, (i + 1) * S)
                                         for i, t in enumerate(texts)))

    assert to_txt(cut(" And so my fellow Americans ask not what your country can do for you",
                      " ask what you can do for your country.", " Thank you!", " and then")) == (
        "And so my fellow Americans ask not what your country can do for you ask what you can "
        "do for your country.\nThank you!\nand then\n")
    assert to_txt(cut(" He said \"go.\"", " ", " Then 今日は。", " 好")) == (
        "He said \"go.\"\nThen 今日は。\n好\n")


def test_cue_layout_prefers_clause_breaks() -> None:
    words = JFK.split(" ")
    transcript = Transcript(segments=(timed_segment(words, 0, S // 3),), duration=10 * S)
    cues = layout_cues(transcript)
    assert [c.lines for c in cues] == [
        ("And so my fellow Americans,", "ask not what your country can do for you,"),
        ("ask what you can do for your country.",),
    ]


def test_long_pause_starts_a_new_cue_and_short_cue_is_stretched() -> None:
    first = timed_segment(["Hello."], 0, S // 4)
    second = timed_segment(["Again", "here."], 5 * S, S // 4)
    words = first.words + second.words
    transcript = Transcript(segments=(Segment(" Hello. Again here.", 0, second.end, words),),
                            duration=6 * S)
    cues = layout_cues(transcript)
    assert [c.text for c in cues] == ["Hello.", "Again here."]
    assert cues[0].end == CueLayout().min_duration  # stretched into the pause for reading
    assert cues[1].end == second.start + CueLayout().min_duration


def test_last_cue_is_not_stretched_past_the_audio() -> None:
    transcript = Transcript(segments=(timed_segment(["Hi."], 0, S // 10),), duration=S // 5)
    assert layout_cues(transcript)[0].end == S // 5


def test_words_at_the_very_end_of_the_audio_get_a_cue_with_a_length() -> None:
    """Issue 15 item 14: audio that ends mid-word gave a last cue 300.0 -> 300.0 s."""
    end = 300 * S
    said = timed_segment(["Ask", "not."], end - 2 * S, S // 2)
    cut = Segment(" what", end, end, words=(Word(" what", end, end),))
    for lay in (CueLayout(), CueLayout(min_duration=0)):
        cues = layout_cues(Transcript(segments=(said, cut), duration=end), lay)
        assert [c.text for c in cues] == ["Ask not.", "what"]
        assert all(c.start < c.end <= end for c in cues), cues
        assert cues[0].end <= cues[1].start
        assert "00:05:00,000 --> 00:05:00,000" not in to_srt(Transcript((said, cut), duration=end))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20 * S), st.integers(0, 20 * S), st.booleans()),
                min_size=1, max_size=10), st.integers(0, 20 * S), st.integers(0, S))
def test_any_segment_times_give_cues_of_positive_length_in_order(
        times: list[tuple[int, int, bool]], duration: int, min_duration: int) -> None:
    """Segments and words at any times (equal, reversed, at or past the end of the audio):
    every cue has a positive length and none overlaps the next."""
    segments = []
    for i, (a, b, timed) in enumerate(sorted(times)):
        words = (Word(f" w{i}", a, b),) if timed else ()
        segments.append(Segment(f" w{i}", a, b, words=words))
    lay = CueLayout(min_duration=min_duration)
    cues = layout_cues(Transcript(segments=tuple(segments), duration=duration), lay)
    assert all(c.start < c.end for c in cues), cues
    assert all(a.end <= b.start for a, b in zip(cues, cues[1:], strict=False)), cues
    assert [c.text for c in cues] == [s.text.strip() for s in segments]


def test_segment_without_words_spreads_time_by_length() -> None:
    seg = Segment(text=" aaaa bb", start=S, end=4 * S)
    cues = layout_cues(Transcript(segments=(seg,)), CueLayout(max_line_chars=8, max_lines=1))
    assert [c.text for c in cues] == ["aaaa bb"]
    long_seg = Segment(text=" " + " ".join(["word"] * 40), start=0, end=20 * S)
    cues = layout_cues(Transcript(segments=(long_seg,)))
    assert len(cues) >= 3 and all(c.end - c.start <= 7 * S for c in cues)


def test_overlapping_word_times_are_made_monotonic() -> None:
    seg_a = timed_segment(["one", "two"], 2 * S, S)
    seg_b = timed_segment(["three"], S, S)  # a backend glitch: starts before the previous end
    cues = layout_cues(Transcript(segments=(seg_a, seg_b)))
    assert cues[1].start == cues[0].end and cues[1].end >= cues[1].start


def test_wrap_lines_balances_and_rejects_overflow() -> None:
    assert wrap_lines([], 42, 2) == []
    assert wrap_lines(["a" * 43], 42, 2) is None
    assert wrap_lines(["word"] * 30, 42, 2) is None
    three = wrap_lines(["abcd"] * 12, 20, 3)
    assert three is not None and len(three) == 3 and max(map(len, three)) <= 20
    numbers = "one two three four five six seven eight nine ten"
    two = wrap_lines(numbers.split(" "), 42, 2)
    assert two == ["one two three four five", "six seven eight nine ten"]


def test_vtt_escapes_markup_and_arrows() -> None:
    seg = timed_segment(["<b>", "R&D", "-->", "ok"], 0)
    vtt = to_vtt(Transcript(segments=(seg,)))
    assert "<b>" not in vtt and "--> ok" not in vtt and "&amp;" in vtt
    assert parse_vtt(vtt)[0].text == "<b> R&D --> ok"


def test_formats_and_timestamps() -> None:
    assert format_timestamp(0, ",") == "00:00:00,000"
    assert format_timestamp((3600 + 62) * S + 8, ".") == "01:01:02.001"  # rounds to the ms
    assert format_timestamp(-5, ",") == "00:00:00,000"
    empty = Transcript(segments=())
    assert (to_txt(empty), to_srt(empty), to_vtt(empty)) == ("", "", "WEBVTT\n")
    seg = timed_segment(["hi"], 0)
    for fmt in FORMATS:
        assert render(Transcript(segments=(seg,)), fmt)
    with pytest.raises(ValueError, match="unknown format"):
        render(empty, "doc")


def test_parsers_accept_foreign_files_and_reject_wrong_documents() -> None:
    srt = "7\r\n00:00:01,500 --> 00:00:02,000\r\nHello\r\nthere\r\n\r\n\r\n8\r\n" \
          "100:00:00,000 --> 100:00:01,000\r\nlate\r\n"
    cues = parse_srt(srt)
    assert cues[0] == Cue(24000, 32000, ("Hello", "there"))
    assert cues[1].start == 100 * 3600 * S
    vtt = ("\ufeffWEBVTT - title\n\nNOTE a comment\n\nSTYLE\n::cue { color: red }\n\nid1\n"
           "00:01.000 --> 00:02.000 align:start\nshort form\n")
    assert parse_vtt(vtt) == [Cue(S, 2 * S, ("short form",))]
    with pytest.raises(ValueError, match="WEBVTT"):
        parse_vtt(srt)
    with pytest.raises(ValueError, match="sottovoce-transcript"):
        parse_json('{"segments": []}')
    with pytest.raises(ValueError, match="version"):
        parse_json('{"format": "sottovoce-transcript", "version": 99}')


def test_json_keeps_flags_language_and_extra() -> None:
    seg = Segment(" loop loop loop", 0, S, flags=("compression", "repeats"), temperature=0.4)
    transcript = Transcript(segments=(seg,), language="de", duration=S, decode_ms=12.5,
                            extra={"engine": "sequential"})
    back = parse_json(to_json(transcript))
    assert back == transcript and back.extra == {"engine": "sequential"}


@pytest.mark.parametrize("kwargs", [
    {"max_line_chars": 4}, {"max_lines": 0}, {"max_duration": 0},
    {"min_duration": 8 * S}, {"pause_split": 0},
])
def test_layout_validation(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        CueLayout(**kwargs)
