"""The batch decode behind `Ct2Runner.decode_batch`: short pass, guards, padded pass.

Each request becomes an `_Item` that carries its features, tokenizer and attempts through the
passes. A pass encodes all its items in one call, detects languages where needed, then runs one
generate() per group of items that share beam size and temperature (normally the whole pass),
and finally aligns words for the items that want them.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.asr import ct2_passes as passes
from engine.asr.budget import ByteBudget, align_bytes, generate_bytes
from engine.asr.ct2_guards import (
    COMPRESSION_THRESHOLD,
    LOGPROB_THRESHOLD,
    TRUSTED_SILENCE_RMS,
    Attempt,
    is_silence,
    padded_needs_retry,
    repeat_index,
    rms,
    short_failure,
    token_budget,
)
from engine.asr.ct2_words import TokenSpan, assign_to_spans, split_spans
from engine.asr.short_context import ShortContextSettings
from engine.core.quality import QualityThresholds
from engine.errors import TranscriptionError
from engine.native_memory import release_if_grown
from engine.types import SAMPLE_RATE, Segment, Word, seconds_to_samples

if TYPE_CHECKING:
    from engine.types import DecodeRequest

log = logging.getLogger(__name__)

MIN_DECODE_SAMPLES = SAMPLE_RATE // 10  # 0.1 s
# Items per align() call when generate() is sliced (CPU): an alignment holds ~35 MB per 10 s
# item on tiny.en, and one at a time lowers the peak at no cost in wall time, since each item
# takes one decoder pass either way (figures: docs/evidence.md).
ALIGN_SLICE = 1
# What a generate() call holds grows with its hypotheses (beam or best-of, each with its own
# copy of the cross-attention keys and values) times its encoder frames. A slice of
# ``max_generate`` items was sized for short windows (up to 14 s: 700 frames) at beam 5; a call
# on the padded 30 s window (1500 frames), or sampling best-of-5 there, takes fewer items so
# it holds no more: such calls made the peaks of long files (docs/evidence.md).
SLICE_HYPOTHESES, SLICE_FRAMES = 5, 700

# One encoding of padding per loaded model (faster-whisper WhisperModel), for every runner and
# thread that shares it; dropped with the model.
_SILENCE: weakref.WeakKeyDictionary[Any, passes.SilenceEncoding] = weakref.WeakKeyDictionary()
_SILENCE_LOCK = threading.Lock()


def _silence(whisper: Any) -> passes.SilenceEncoding:
    with _SILENCE_LOCK:
        return _SILENCE.setdefault(whisper, passes.SilenceEncoding())


@dataclass
class _Item:
    """Mutable working state of one request during a batch decode (private)."""

    request: DecodeRequest
    features: passes.Features
    path: str = "padded"
    fallback: str | None = None
    tokenizer: Any = None
    language: str | None = None
    attempts: list[Attempt] = field(default_factory=list)
    chosen: Attempt | None = None
    segments: tuple[Segment, ...] = ()

    @property
    def duration_s(self) -> float:
        return len(self.request.audio) / SAMPLE_RATE

    @property
    def frames(self) -> int:
        return int(self.features.shape[1])


@dataclass(frozen=True)
class Outcome:
    segments: tuple[Segment, ...]
    language: str | None
    duration: int
    path: str
    fallback: str | None
    temperature: float
    batch_size: int
    loop_trimmed: bool


def decode(whisper: Any, requests: Sequence[DecodeRequest], thresholds: QualityThresholds,
           short: ShortContextSettings, max_generate: int | None = None,
           budget: ByteBudget | None = None) -> list[Outcome]:
    """Every request decoded; ``max_generate``: at most that many items per generate() and
    align() call (memory), all encoded and generated at the pass's one width (same text);
    ``budget``: every generate() and align() call holds its estimated bytes from it
    (`engine.asr.budget`), waiting while other streams hold too much."""
    # Under 0.1 s there is nothing a model could recognise (and Whisper would invent text).
    items = [_Item(r, passes.log_mel(whisper, r.audio)) if len(r.audio) >= MIN_DECODE_SAMPLES
             else _Item(r, passes.no_features(whisper), path="skipped") for r in requests]
    short_items = [it for it in items if it.path == "padded"
                   and it.request.options.short_context and it.duration_s <= short.max_s]
    if short_items:
        for it in short_items:
            it.path = "short"
        pad_frames = int(short.pad_s * 100)
        frames = min(passes.PADDED_FRAMES, max(it.frames for it in short_items) + pad_frames)
        widths = [it.frames + pad_frames for it in short_items]
        encoded = _run_pass(whisper, short_items, frames + frames % 2, thresholds,
                            short_pass=True, widths=widths, max_generate=max_generate,
                            budget=budget)
        kept = []
        for row, it in enumerate(short_items):
            reason = _short_verdict(it, thresholds, short.timestamp_cues)
            if reason is None or not it.request.options.short_fallback:
                if reason is not None and it.chosen is not None:
                    # No fallback (a partial): a loop keeps its first pass, aligned alone,
                    # rather than being thrown out whole. tiny.en says a window that ends
                    # mid-sentence twice over (on the 231 s reading, 1 partial in 7).
                    it.chosen = passes.trim_loop(it.chosen, it.tokenizer,
                                                 repeat_index) or it.chosen
                kept.append(row)
            else:
                log.debug("short path failed (%s); falling back to padded", reason)
                it.path, it.fallback, it.attempts, it.chosen = "padded", reason, [], None
        _build_segments(whisper.model, encoded, short_items, kept, max_generate, budget)
        del encoded  # not held through the padded pass (memory)
    padded_items = [it for it in items if it.path == "padded"]
    if padded_items:
        pad_frames = int(short.pad_s * 100)
        widths = [it.frames + pad_frames if it.request.padding == "silence"
                  else passes.PADDED_FRAMES for it in padded_items]
        encoded = _run_pass(whisper, padded_items, passes.PADDED_FRAMES, thresholds,
                            short_pass=False,
                            widths=widths if min(widths) < passes.PADDED_FRAMES else None,
                            max_generate=max_generate, budget=budget)
        _build_segments(whisper.model, encoded, padded_items, range(len(padded_items)),
                        max_generate, budget)
    return [_outcome(it, len(items)) for it in items]


def _short_verdict(item: _Item, thresholds: QualityThresholds, timestamp_cues: bool
                   ) -> str | None:
    attempt = item.chosen
    if attempt is None:
        return None
    if is_silence(attempt):
        # A short window sometimes calls real (quiet, clipped) speech silence; only near-digital
        # silence is trusted without asking the padded window too.
        return "silence_check" if rms(item.request.audio) > TRUSTED_SILENCE_RMS else None
    return short_failure(attempt, item.request.audio, thresholds, timestamp_cues=timestamp_cues)


def _run_pass(whisper: Any, items: list[_Item], frames: int, thresholds: QualityThresholds,
              *, short_pass: bool, widths: list[int] | None = None,
              max_generate: int | None = None,
              budget: ByteBudget | None = None) -> passes.EncodedBatch:
    """Encode ``items`` as one batch (each at its ``widths`` on the CPU, see
    `passes.EncodedBatch`) and generate (with temperature fallback on the padded pass); each
    item's chosen attempt is set. Returns the encoder output for alignment."""
    model = whisper.model
    features = passes.stack([it.features for it in items], frames)
    encoded = passes.EncodedBatch(model, features, widths,
                                  _silence(whisper) if widths is not None else None, budget)
    _set_tokenizers(whisper, items, encoded)
    pending = list(range(len(items)))
    step = 0
    while pending:
        # One generate() per group: prompts of one call must line up (same layout).
        groups: dict[tuple[int, float, bool, bool], list[int]] = {}
        for i in pending:
            opts = items[i].request.options
            key = (opts.beam_size, opts.temperatures[step],
                   passes.has_previous_text(opts.prompt) or passes.has_previous_text(opts.hotwords),
                   items[i].request.timestamps)
            groups.setdefault(key, []).append(i)
        for (beam, temperature, _, _), rows in groups.items():
            hypotheses = passes.BEST_OF if temperature > 0 else beam
            size = generate_slice(max_generate, hypotheses, frames // 2)
            if budget is not None:  # no call holds more than the budget (unless one item does)
                fit = budget.limit // generate_bytes(1, hypotheses, frames // 2, encoded.width)
                size = max(1, min(size or len(rows), fit))
            for part in _slices(rows, size):
                need = generate_bytes(len(part), hypotheses, frames // 2, encoded.width)
                with budget.hold(need) if budget else nullcontext():
                    _generate(model, encoded, [items[i] for i in part], part, beam,
                              temperature, short_pass)
                release_if_grown()  # engine.native_memory: what the call freed, if kept
        step += 1
        pending = [i for i in pending if not short_pass
                   and step < len(items[i].request.options.temperatures)
                   and padded_needs_retry(items[i].attempts[-1], thresholds)]
    for it in items:
        it.chosen = _choose(it.attempts)
    return encoded


def _set_tokenizers(whisper: Any, items: list[_Item], encoded: passes.EncodedBatch) -> None:
    from faster_whisper.tokenizer import Tokenizer

    multilingual = bool(whisper.model.is_multilingual)
    detect = [i for i, it in enumerate(items) if multilingual and not it.request.options.language]
    detected: dict[int, str] = {}
    if detect:
        languages = passes.detect_languages(whisper.model, encoded.subset(detect),
                                            [items[i].request.options.languages for i in detect])
        detected = dict(zip(detect, languages, strict=True))
    for i, it in enumerate(items):
        language = (detected.get(i) or it.request.options.language) if multilingual else "en"
        try:
            it.tokenizer = Tokenizer(whisper.hf_tokenizer, multilingual,
                                     task=it.request.options.task, language=language)
        except ValueError as exc:
            raise TranscriptionError(f"unsupported language or task: {exc}") from exc
        it.language = language


def _generate(model: Any, encoded: passes.EncodedBatch, items: list[_Item], rows: list[int],
              beam: int, temperature: float, short_pass: bool) -> None:
    budgets = [token_budget(it.duration_s) if short_pass else passes.MAX_LENGTH for it in items]
    prompts = [passes.prompt_tokens(it.tokenizer, it.request.options.prompt,
                                    it.request.timestamps, it.request.options.hotwords)
               for it in items]
    call = passes.GenerateCall(beam_size=beam, temperature=temperature,
                               max_new_tokens=max(budgets))
    attempts = passes.generate(model, encoded.subset(rows), prompts,
                               [it.tokenizer for it in items], budgets, call)
    for it, attempt in zip(items, attempts, strict=True):
        if short_pass:
            attempt = _repair_short(attempt, it)
        it.attempts.append(attempt)


def _repair_short(attempt: Attempt, item: _Item) -> Attempt:
    """Cut a short-window decode back to its first pass when it ran on into a repeat: a decode
    that ran out of budget and starts over from the top, or segments that start past the
    audio end and only repeat what was said."""
    if attempt.truncated:
        trimmed = passes.trim_loop(attempt, item.tokenizer)
        if trimmed is not None:
            return trimmed
    return passes.drop_past_end(attempt, item.tokenizer, item.duration_s) or attempt


def _choose(attempts: list[Attempt]) -> Attempt | None:
    """The last attempt if it passed, else (all failed) the most confident one that is not
    loop-like, as faster-whisper does."""
    if not attempts:
        return None
    if len(attempts) == 1:
        return attempts[0]
    last = attempts[-1]
    if last.compression_ratio <= COMPRESSION_THRESHOLD and last.avg_logprob >= LOGPROB_THRESHOLD:
        return last
    not_loops = [a for a in attempts if a.compression_ratio <= COMPRESSION_THRESHOLD]
    return max(not_loops or attempts, key=lambda a: a.avg_logprob)


def generate_slice(max_items: int | None, hypotheses: int, frames: int) -> int | None:
    """Items per generate() call: at most ``max_items`` (None: no limit), and no more
    hypotheses x encoder ``frames`` than that many short-window items at beam 5 hold."""
    if max_items is None:
        return None
    budget = max_items * SLICE_HYPOTHESES * SLICE_FRAMES
    return max(1, min(max_items, budget // max(1, hypotheses * frames)))


def _slices(rows: list[int], size: int | None) -> list[list[int]]:
    """``rows`` in consecutive slices of at most ``size`` (one slice when None)."""
    step = size or len(rows) or 1
    return [rows[i:i + step] for i in range(0, len(rows), step)]


def _build_segments(model: Any, encoded: passes.EncodedBatch, items: list[_Item],
                    rows: Iterable[int], max_generate: int | None = None,
                    budget: ByteBudget | None = None) -> None:
    """Segments (and words, where asked) for ``items[rows]``, rows of the ``encoded`` batch."""
    spans_of: dict[int, list[TokenSpan]] = {}
    for i in rows:
        it = items[i]
        attempt = it.chosen
        if attempt is None or is_silence(attempt):
            continue
        spans_of[i] = split_spans(attempt.tokens, it.tokenizer.timestamp_begin,
                                  it.tokenizer.eot, it.duration_s)
    words_of = _align(model, encoded, items, spans_of, max_generate, budget)
    for i, spans in spans_of.items():
        it = items[i]
        attempt = it.chosen
        assert attempt is not None
        per_span = assign_to_spans(words_of[i], spans) if i in words_of else [[] for _ in spans]
        it.segments = tuple(_segment(it, attempt, span, timings)
                            for span, timings in zip(spans, per_span, strict=True))


def _align(model: Any, encoded: passes.EncodedBatch, items: list[_Item],
           spans_of: dict[int, list[TokenSpan]], max_generate: int | None = None,
           budget: ByteBudget | None = None) -> dict[int, list[Any]]:
    """Word timings for the items that asked for them, one align() per start sequence."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i in spans_of:
        if items[i].request.options.word_timestamps:
            groups.setdefault(tuple(items[i].tokenizer.sot_sequence), []).append(i)
    out: dict[int, list[Any]] = {}
    size = ALIGN_SLICE if max_generate else None
    for rows in (part for group in groups.values() for part in _slices(group, size)):
        tokens = [[t for s in spans_of[i] for t in s.tokens] for i in rows]
        frames = [min(items[i].frames, encoded.frames) for i in rows]
        need = align_bytes(len(rows), encoded.frames // 2, encoded.width)
        with budget.hold(need) if budget else nullcontext():
            timings = passes.align_words(model, encoded.subset(rows), items[rows[0]].tokenizer,
                                         tokens, frames)
        out.update(zip(rows, timings, strict=True))
        release_if_grown()
    return out


def _segment(item: _Item, attempt: Attempt, span: TokenSpan, timings: list[Any]) -> Segment:
    limit = len(item.request.audio)

    def at(seconds: float) -> int:
        return max(0, min(limit, seconds_to_samples(seconds)))

    words = tuple(Word(text=w.text, start=at(w.start_s), end=max(at(w.start_s), at(w.end_s)),
                       probability=w.probability) for w in timings)
    start, end = at(span.start_s), at(span.end_s)
    if words:
        start, end = min(start, words[0].start), max(end, words[-1].end)
    return Segment(
        text=item.tokenizer.decode(list(span.tokens)), start=start, end=max(start, end),
        words=words, avg_logprob=attempt.avg_logprob, no_speech_prob=attempt.no_speech_prob,
        compression_ratio=attempt.compression_ratio, temperature=attempt.temperature,
    )


def _outcome(item: _Item, batch_size: int) -> Outcome:
    temperature = item.chosen.temperature if item.chosen else 0.0
    return Outcome(segments=item.segments, language=item.language,
                   duration=len(item.request.audio), path=item.path, fallback=item.fallback,
                   temperature=temperature, batch_size=batch_size,
                   loop_trimmed=bool(item.chosen and item.chosen.trimmed))
