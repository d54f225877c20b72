"""Property-based fuzzing (issue 30): whatever arrives, the parsers answer with a message or a
clear error, never an exception (no time bound per example: a loaded machine's speed decides
nothing here). Covered: both wire protocols' parsers (ours and WhisperLive's, both
sides), the replacement-rule parser and applier, the settings reader, the output manifest and
the cluster summary writer.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.dictation.rules import RuleError, apply_rules, max_length, parse_rules
from engine.wire import protocol as p
from engine.wire import whisperlive_protocol as wlc
from engine.wire import whisperlive_server as wls

# No per-example deadline: how fast a loaded machine runs an example decides nothing here (the
# rule applier's own time budget, engine.dictation.rules.RULES_BUDGET_S, is the product's and
# is tested where it applies).
FAST = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
RULES = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=24),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12)


def fields(valid: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with the known keys, each valid or anything, some missing, plus strangers."""
    keys = {k: st.one_of(v, json_values) for k, v in valid.items()}
    return st.fixed_dictionaries({}, optional=keys).flatmap(
        lambda known: st.dictionaries(st.text(max_size=8), json_values, max_size=2).map(
            lambda extra: {**extra, **known}))


def dumps(data: object) -> str:
    return json.dumps(data, allow_nan=True)


# -- protocol v1 ---------------------------------------------------------------------------

HELLO = fields({
    "type": st.sampled_from(["hello", "end", "flush", "vocabulary", "cancel", "keepalive"]),
    "protocol": st.just(1), "session_id": st.text(max_size=140),
    "sample_rate": st.just(16000), "language": st.sampled_from(["en", "de", "EN", "zz", None]),
    "prompt": st.text(max_size=50) | st.none(), "offset": st.integers(-5, 2**40),
    "options": st.dictionaries(st.text(max_size=5), json_values, max_size=2),
    "vocabulary": st.lists(st.text(max_size=30), max_size=8)})
frames = st.lists(st.one_of(HELLO.map(dumps), st.text(max_size=80), st.binary(max_size=64)),
                  max_size=8)


@FAST
@given(frames)
def test_protocol_v1_server_side_never_raises(sequence: list[str | bytes]) -> None:
    conn = p.ServerConnection()
    position = 0
    for frame in sequence:
        before = conn.state
        out = (conn.receive_bytes(frame) if isinstance(frame, bytes)
               else conn.receive_text(frame))
        assert isinstance(out, list)
        for message in out:
            assert isinstance(message, (p.Hello, p.Audio, p.Flush, p.Vocabulary, p.End,
                                        p.Cancel, p.ProtocolViolation))
            if isinstance(message, p.ProtocolViolation):
                assert conn.state == "failed" and message.code and message.message
            if isinstance(message, p.Hello):
                assert message.language is None or message.language.islower()
                position = message.offset
            if isinstance(message, p.Audio):
                assert message.start == position
                position = message.end
        if before in ("failed", "closed"):
            assert out == []


SERVER_MESSAGE = fields({
    "type": st.sampled_from(["ready", "partial", "final", "ack", "error", "bye", "what"]),
    "session_id": st.text(max_size=10), "model": st.text(max_size=10),
    "utterance_id": st.integers(-1, 9), "committed": st.text(max_size=20),
    "tentative": st.text(max_size=20), "text": st.text(max_size=20), "start": st.integers(-1, 99),
    "end": st.integers(-1, 99), "upto": st.integers(-1, 99), "code": st.text(max_size=10),
    "message": st.text(max_size=20), "language": st.sampled_from(["en", None]),
    "words": st.lists(fields({"word": st.text(max_size=5), "start": st.integers(0, 9),
                              "end": st.integers(0, 9), "p": st.floats(0, 1)}), max_size=3),
    "decode_ms": st.floats(allow_nan=True), "server_ms": st.floats(allow_nan=True)})


@FAST
@given(st.lists(st.one_of(SERVER_MESSAGE.map(dumps), st.text(max_size=60),
                          st.binary(max_size=8)), max_size=6))
def test_protocol_v1_client_side_never_raises(sequence: list[str | bytes]) -> None:
    conn = p.ClientConnection()
    conn.hello(p.Hello(session_id="s"))
    for frame in sequence:
        out = (conn.receive_bytes(frame) if isinstance(frame, bytes)
               else conn.receive_text(frame))
        for message in out:
            assert isinstance(message, (p.Ready, p.Partial, p.Final, p.Ack, p.Error, p.Bye,
                                        p.ProtocolViolation))
            if isinstance(message, p.Final):
                assert all(math.isfinite(w.probability) for w in message.words)


# -- WhisperLive -------------------------------------------------------------------------

WL_OPTIONS = fields({
    "uid": st.text(min_size=1, max_size=10), "language": st.sampled_from(["en", "de", "qq"]),
    "task": st.sampled_from(["transcribe", "translate", "dance"]),
    "model": st.text(max_size=10), "use_vad": st.booleans(),
    "send_last_n_segments": st.integers(-5, 500), "no_speech_thresh": st.floats(-1, 2),
    "same_output_threshold": st.integers(-5, 500), "initial_prompt": st.text(max_size=30),
    "hotwords": st.text(max_size=30), "word_timestamps": st.booleans(),
    "audio_format": st.sampled_from(["float32", "int16", "uint8", "float64"]),
    "vad_parameters": st.dictionaries(
        st.sampled_from(["threshold", "neg_threshold", "min_silence_duration_ms",
                         "max_speech_duration_s", "onset"]),
        st.floats(allow_nan=False) | json_values, max_size=3),
    "enable_translation": json_values, "enable_diarization": json_values})


@FAST
@given(WL_OPTIONS.map(dumps) | st.text(max_size=80),
       st.lists(st.binary(max_size=64) | st.just(wlc.END_OF_AUDIO) | st.text(max_size=8),
                max_size=6))
def test_whisperlive_server_side_never_raises(first: str, later: list[str | bytes]) -> None:
    conn = wls.WlServerConnection()
    out = conn.receive(first)
    assert len(out) == 1 and isinstance(out[0], (wls.WlOptions, p.ProtocolViolation))
    if isinstance(out[0], wls.WlOptions):
        options = out[0]
        assert options.audio_format in wls.AUDIO_FORMATS and options.task in (
            "transcribe", "translate")
        assert 1 <= options.send_last_n_segments <= 100
        assert all(isinstance(w, str) for w in options.warnings)
    for frame in later:
        for message in conn.receive(frame):
            assert isinstance(message, (wls.WlAudio, wls.WlEnd, p.ProtocolViolation))
            if isinstance(message, wls.WlAudio):
                assert np.all(np.isfinite(message.samples))
                assert np.all(np.abs(message.samples) <= 1.0)


WL_REPLY = fields({
    "uid": st.just("u"), "message": st.sampled_from(["SERVER_READY", "DISCONNECT"]) | json_values,
    "status": st.sampled_from(["WAIT", "ERROR", "WARNING"]), "backend": st.text(max_size=8),
    "language": st.text(max_size=4), "language_prob": st.floats(allow_nan=True),
    "segments": st.lists(fields({"start": st.from_regex(r"\A[0-9]{1,3}\.[0-9]{3}\Z"),
                                 "end": st.from_regex(r"\A[0-9]{1,3}\.[0-9]{3}\Z"),
                                 "text": st.text(max_size=12), "completed": st.booleans()}),
                         max_size=4)})


@FAST
@given(st.lists(WL_REPLY.map(dumps) | st.text(max_size=60), max_size=6))
def test_whisperlive_client_side_never_raises(replies: list[str]) -> None:
    conn = wlc.WhisperLiveConnection("u")
    tracker = wlc.SegmentTracker()
    for reply in replies:
        for message in conn.receive_text(reply):
            if isinstance(message, wlc.WlSegments):
                tracker.update(message.segments)
    tracker.finish()


# -- replacement rules ---------------------------------------------------------------------

PATTERN_CHARS = "()[]{}*+?|\\.^$,!aw1 -:<>=#dsS"
rule_lines = st.one_of(
    st.tuples(st.text(PATTERN_CHARS, min_size=1, max_size=16), st.sampled_from(["", "i", "g"]),
              st.text("ab \\1g<>", max_size=6)).map(lambda t: f"/{t[0]}/{t[1]} => {t[2]}"),
    st.tuples(st.text(st.characters(blacklist_characters="\n\r|"), min_size=1, max_size=10),
              st.text("word ", max_size=12)).map(lambda t: f"{t[0]} => {t[1]}"),
    st.text(max_size=30))


@RULES
@given(st.lists(rule_lines, max_size=6).map("\n".join), st.text(max_size=120))
def test_rules_parse_or_name_the_line_and_apply_within_bounds(lines: str, text: str) -> None:
    try:
        rules = parse_rules(lines)
    except RuleError as exc:
        assert exc.line >= 1 and str(exc).startswith(f"replacement rules, line {exc.line}: ")
        return
    problems: list[RuleError] = []
    out = apply_rules(text, rules, problems)
    assert isinstance(out, str) and len(out) <= max_length(text)
    assert all(isinstance(problem, RuleError) for problem in problems)


@RULES
@given(st.integers(1, 40), st.text("word ", min_size=1, max_size=60))
def test_rules_never_grow_a_text_past_the_cap(doublings: int, text: str) -> None:
    rules = parse_rules("\n".join(["word => word word"] * doublings))
    problems: list[RuleError] = []
    out = apply_rules(text, rules, problems)
    assert len(out) <= max_length(text)
    grows = text.split().count("word") * (2 ** doublings - 1) * 5 > max_length(text) - len(text)
    assert bool(problems) == grows


# -- settings ------------------------------------------------------------------------------


def settings_tables() -> st.SearchStrategy[dict[str, Any]]:
    from dataclasses import fields as dataclass_fields

    from app.settings import Settings

    toml_values = st.recursive(
        st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=True)
        | st.text(max_size=30), lambda inner: st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
    valid = {f.name: toml_values for f in dataclass_fields(Settings)}
    valid["version"] = st.integers(0, 5) | toml_values
    valid["replacements"] = st.lists(rule_lines, max_size=3).map("\n".join)
    return fields(valid)  # type: ignore[arg-type]


@FAST
@given(settings_tables(), st.text(max_size=60))
def test_the_settings_reader_always_gives_usable_settings(table: dict[str, Any],
                                                          raw: str) -> None:
    import tomli_w

    from app.settings import Settings, read_settings

    with tempfile.TemporaryDirectory() as folder:
        for text in (_toml(tomli_w, table), raw):
            if text is None:
                continue
            path = Path(folder) / "settings.toml"
            path.write_text(text, encoding="utf-8")
            loaded = read_settings(path)
            assert isinstance(loaded.settings, Settings)
            assert all(isinstance(problem, str) and problem for problem in loaded.problems)


def _toml(tomli_w: Any, table: dict[str, Any]) -> str | None:
    try:
        return str(tomli_w.dumps(table))
    except (TypeError, ValueError):  # TOML cannot hold it (a null): the raw text case covers it
        return None


# -- output manifest and cluster summary ---------------------------------------------------

file_names = st.text(st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)),
                     min_size=1, max_size=260).filter(
    lambda n: n not in (".", "..") and len(n.encode()) <= 255)


@FAST
@given(st.lists(file_names, min_size=1, max_size=6, unique=True),
       st.sampled_from(["txt", "srt", "vtt", "json"]), st.booleans())
def test_the_manifest_gives_every_input_its_own_lasting_output(names: list[str], fmt: str,
                                                               same_folder: bool) -> None:
    from engine.cluster.inputs import list_inputs
    from engine.outputs import NAME_MAX, Manifest

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        inputs = [root / "in" / name for name in names]
        inputs[0].parent.mkdir()
        for path in inputs:
            path.write_bytes(b"audio")
        out = inputs[0].parent if same_folder else root / "out"
        manifest = Manifest.load(out)
        first = list_inputs(inputs, out, fmt, manifest)
        out.mkdir(exist_ok=True)
        manifest.save()
        outputs = [item.output for item in first]
        assert len(set(outputs)) == len(outputs)
        assert not set(outputs) & set(inputs)
        assert all(len(o.name.encode("utf-8", "surrogateescape")) <= NAME_MAX for o in outputs)
        for item in first[:1]:
            item.output.write_text("done")
        again = list_inputs(list(reversed(inputs)), out, fmt, Manifest.load(out))
        assert {i.path: i.output for i in again} == {i.path: i.output for i in first}


@FAST
@given(st.lists(st.tuples(st.sampled_from(["done", "skipped", "errors"]), st.text(max_size=20),
                          st.floats(0, 1e6) | st.none()), max_size=8),
       st.floats(0, 1e7), st.floats(0, 1e7),
       st.sampled_from(["running", "done", "interrupted", "failed"]))
def test_the_cluster_summary_is_valid_json_and_accounts_for_every_input(
        rows: list[tuple[str, str, float | None]], total: float, partial: float,
        state: str) -> None:
    from engine.cluster.progress import Tally

    tally = Tally(total_s=total)
    tally.partial_s = partial
    for kind, name, seconds in rows:
        if kind == "errors":
            tally.failed({"input": name}, "unreadable", seconds)
        else:
            getattr(tally, kind).append({"input": name, "audio_s": seconds})
    doc = json.loads(json.dumps(tally.summary(state, {"inputs": len(rows)}), allow_nan=False))
    assert sum(doc["counts"].values()) == len(rows) == doc["inputs"]
    assert doc["state"] == state and doc["audio_s_done"] <= round(total, 2)
    assert doc["eta_s"] is None or (state == "running" and doc["eta_s"] >= 0)
