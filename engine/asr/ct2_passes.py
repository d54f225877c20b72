"""The CTranslate2 Whisper calls behind the chunk decoder: features, encode, generate, align.

Works on a loaded ``faster_whisper.WhisperModel`` (its CTranslate2 model, feature extractor and
tokenizer), so the weights are shared with faster-whisper's own loop
(`engine.asr.whisper_model.FasterWhisperModel`). This module is only imported once
faster-whisper is known to be installed (the runner imports it lazily).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.asr.budget import ByteBudget, encode_bytes
from engine.asr.ct2_guards import Attempt, restart_index
from engine.asr.ct2_words import (
    TIME_PRECISION_S,
    WordTiming,
    clip_long_words,
    word_timings,
)
from engine.core.quality import compression_ratio, words_of
from engine.errors import TranscriptionError
from engine.languages import restrict
from engine.native_memory import release_if_grown
from engine.types import Audio

Features = npt.NDArray[np.float32]
PADDED_FRAMES = 3000  # Whisper's 30 s window in mel frames (10 ms each)
MAX_LENGTH = 448  # Whisper's decoder context
MAX_PROMPT_TOKENS = MAX_LENGTH // 2 - 1
MAX_INITIAL_TIMESTAMP_INDEX = 50  # first timestamp within 1 s, as faster-whisper
BEST_OF = 5  # sampled hypotheses per item at temperature > 0
PREPEND_PUNCTUATIONS = "\"'“¿([{-"
APPEND_PUNCTUATIONS = "\"'.。,，!！?？:：”)]}、"
# A segment starting this close to the audio end, or later, holds no speech of its own.
PAST_END_MARGIN_S = 0.3
# Share of the words of segments past the end that must repeat earlier words to drop them.
REPEAT_SHARE = 0.8


def log_mel(whisper_model: Any, audio: Audio) -> Features:
    """Log-mel features of ``audio`` (n_mels x frames, 100 frames/s), the same numbers as
    faster-whisper's feature extractor (within float32 rounding), computed faster.

    faster-whisper projects the power spectrum onto the mel bank with a dense matmul, which
    NumPy hands to multi-threaded OpenBLAS, where it contends with CTranslate2's own threads on
    a busy CPU. Each mel filter covers only a few FFT bins, so a gather and a segmented sum of
    those bins (no BLAS) does the same several times faster (docs/evidence.md).
    """
    extractor = whisper_model.feature_extractor
    n_fft, hop = int(extractor.n_fft), int(extractor.hop_length)
    frames = len(audio) // hop
    if len(audio) <= n_fft:  # too short to reflect-pad like the extractor; not worth a fast path
        features = extractor(audio)
        return np.ascontiguousarray(features[:, :frames], dtype=np.float32)
    # As faster-whisper: `hop` zeros appended, centred frames (reflect padding), periodic Hann
    # window, power spectrum without the last frame, log10 clamped to 8 below the maximum.
    padded = np.pad(np.pad(np.asarray(audio, dtype=np.float32), (0, hop)), n_fft // 2,
                    mode="reflect")
    windows = np.lib.stride_tricks.sliding_window_view(padded, n_fft)[::hop][:-1]
    spectrum = np.fft.rfft(windows * np.hanning(n_fft + 1)[:-1].astype(np.float32), axis=1)
    power = spectrum.real ** 2 + spectrum.imag ** 2
    filters = np.asarray(extractor.mel_filters, dtype=np.float32)
    rows, bins = np.nonzero(filters)  # row-major: each filter's bins are contiguous here
    if np.unique(rows).size == filters.shape[0]:
        starts = np.searchsorted(rows, np.arange(filters.shape[0]))
        mel = np.add.reduceat(power[:, bins] * filters[rows, bins], starts, axis=1)
    else:  # an empty filter would break the segmented sum
        mel = power @ filters.T
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return np.ascontiguousarray(((log_spec[:frames] + 4.0) / 4.0).T, dtype=np.float32)


def no_features(whisper_model: Any) -> Features:
    """An empty feature matrix, for items that are not decoded."""
    return np.zeros((whisper_model.feature_extractor.mel_filters.shape[0], 0), dtype=np.float32)


def stack(features: Sequence[Features], frames: int) -> Features:
    """One batch of features, each zero-padded (faster-whisper's padding value) or cut to
    ``frames``."""
    n_mels = features[0].shape[0]
    batch = np.zeros((len(features), n_mels, frames), dtype=np.float32)
    for row, feats in zip(batch, features, strict=True):
        width = min(frames, feats.shape[1])
        row[:, :width] = feats[:, :width]
    return batch


class EncodedBatch:
    """Encoder output of one feature batch, from which sub-batches can be taken.

    On the CPU the items are encoded one at a time and their outputs stacked: the encoder is
    compute-bound there already at batch 1, and a batched encode only spills its activations
    out of the caches (one by one took about half the time; docs/evidence.md). The decoder,
    which is bound by reading its weights once per step, is what batching pays for, and it
    still gets the whole batch. A sub-batch is then a slice of the stacked output. On CUDA the
    batch is encoded in one call and a sub-batch is re-encoded from its features (only needed
    when one batch mixes options: prompt/no prompt, beam sizes, retries).

    ``widths`` (CPU only): the frames of each item worth encoding (its audio plus the short
    path's pad). An item is encoded at its own width, and the positions after it, up to the
    batch's width, are copied from ``silence``: the encoding of a window of padding alone
    (`SilenceEncoding`), which is what those positions hold (the generate call needs one width
    for the whole batch). Items of a short-path batch differ in length, so this saves the
    encoder the padding of the shorter ones, a sizeable share of the pipeline's CPU time, at the
    same WER and with fewer padded fallbacks, since each item is encoded as it would be alone.
    On the padded path (a request's ``padding="silence"``) it spares encoding 30 s for a few
    seconds of audio, which was most of a fallback's cost (figures: docs/evidence.md).
    """

    def __init__(self, ct2_model: Any, features: Features, widths: Sequence[int] | None = None,
                 silence: SilenceEncoding | None = None,
                 budget: ByteBudget | None = None) -> None:
        self._model = ct2_model
        self._features = features
        self._host: npt.NDArray[Any] | None = None
        narrower = widths is not None and min(widths) < features.shape[2]
        if ct2_model.device == "cpu" and (features.shape[0] > 1 or narrower):
            self._host = _encode_one_by_one(ct2_model, features, widths, silence, budget)
        if self._host is not None:
            self.output = _storage(self._host)
        else:
            need = features.shape[0] * _encode_need(ct2_model, features.shape[2])
            with budget.hold(need) if budget is not None else nullcontext():
                self.output = _call(ct2_model.encode, _storage(features))
            _WIDTHS[id(ct2_model)] = int(self.output.shape[2])

    @property
    def frames(self) -> int:
        return int(self._features.shape[2])

    @property
    def width(self) -> int:
        """The model's width (d_model): the encoder output's last dimension."""
        return int(self.output.shape[-1])

    def subset(self, rows: Sequence[int]) -> Any:
        if list(rows) == list(range(self._features.shape[0])):
            return self.output
        if self._model.device == "cpu" and self._host is None:
            try:
                self._host = np.asarray(self.output)
            except (TypeError, ValueError, RuntimeError):  # a dtype NumPy cannot view
                self._host = None
        if self._host is not None and self._host.dtype == np.float32:
            return _storage(np.ascontiguousarray(self._host[list(rows)]))
        return _call(self._model.encode, _storage(np.ascontiguousarray(self._features[list(rows)])))


class SilenceEncoding:
    """The encoder's output for a whole window of padding (zero features), computed once per
    model on first use and shared by every batch and thread after that."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._host: npt.NDArray[Any] | None = None

    def positions(self, ct2_model: Any, n_mels: int, start: int, end: int) -> npt.NDArray[Any]:
        """Encoder positions ``[start, end)`` of the padding window, shape (1, end - start, d)."""
        with self._lock:
            if self._host is None:
                zeros = np.zeros((1, n_mels, PADDED_FRAMES), dtype=np.float32)
                self._host = np.array(_call(ct2_model.encode, _storage(zeros)))
        return self._host[:, start:end]


# The encoder width of each model seen (by id), for `encode_bytes` before its next encode; a
# model not yet seen counts as the widest Whisper (over-estimating its first call keeps the bound).
_WIDTHS: dict[int, int] = {}
WIDEST = 1280


def _encode_need(ct2_model: Any, frames: int) -> int:
    """What one item's encode() over ``frames`` feature frames holds (`engine.asr.budget`)."""
    return encode_bytes(frames // 2, _WIDTHS.get(id(ct2_model), WIDEST))


def _encode_one_by_one(ct2_model: Any, features: Features, widths: Sequence[int] | None,
                       silence: SilenceEncoding | None,
                       budget: ByteBudget | None = None) -> npt.NDArray[Any] | None:
    """The encoder outputs of ``features``' items, each encoded alone (at its width, the rest
    from ``silence``), stacked on the host; None when an output is not float32 (a compute type
    NumPy cannot hold: encode as one batch). Each encode holds its activations' bytes from
    ``budget`` while it runs."""
    frames = features.shape[2]
    outputs = []
    for row in range(features.shape[0]):
        width = frames if widths is None else min(frames, widths[row] + widths[row] % 2)
        item = np.ascontiguousarray(features[row:row + 1, :, :width])
        with budget.hold(_encode_need(ct2_model, width)) if budget is not None else nullcontext():
            encoded = _call(ct2_model.encode, _storage(item))
        try:
            host = np.asarray(encoded)
        except (TypeError, ValueError, RuntimeError):
            return None
        _WIDTHS[id(ct2_model)] = int(host.shape[-1])
        if host.dtype != np.float32:
            return None
        if width < frames:
            if silence is None:
                raise ValueError("narrower widths need the encoding of silence for the rest")
            tail = silence.positions(ct2_model, features.shape[1], host.shape[1], frames // 2)
            host = np.concatenate([host, tail], axis=1)
        outputs.append(host)  # a view of ``encoded``; the concatenation below copies it
        release_if_grown()  # the encoder's activations (engine.native_memory)
    return np.ascontiguousarray(np.concatenate(outputs))


def _storage(array: npt.NDArray[Any]) -> Any:
    import ctranslate2

    return ctranslate2.StorageView.from_array(array)


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a CTranslate2 call, translating its errors into the engine's."""
    try:
        return fn(*args, **kwargs)
    except (RuntimeError, ValueError) as exc:
        raise TranscriptionError(f"CTranslate2 decode failed: {exc}") from exc


def detect_languages(ct2_model: Any, encoded: Any,
                     allowed: Sequence[Sequence[str]] = ()) -> list[str]:
    """Most likely language code per item (multilingual models only), among that item's
    ``allowed`` codes when it has some (CTranslate2 ranks every language)."""
    results = _call(ct2_model.detect_language, encoded)
    chosen = []
    for i, ranked in enumerate(results):
        pairs = [(str(token)[2:-2], float(p)) for token, p in ranked]
        only = allowed[i] if i < len(allowed) else ()
        chosen.append(restrict(pairs, only) or pairs[0][0])
    return chosen


def prompt_tokens(tokenizer: Any, previous_text: str | None, timestamps: bool = True,
                  hotwords: str | None = None) -> list[int]:
    """[sot_prev, hotwords..., previous text...] + sot sequence (+ <|notimestamps|> for a
    text-only decode), as faster-whisper's initial prompt and ``hotwords``. Together they keep
    within MAX_PROMPT_TOKENS: the vocabulary first (cut at its end), the previous text's last
    tokens in what is left."""
    hot = list(tokenizer.encode(" " + hotwords.strip()))[:MAX_PROMPT_TOKENS] if (
        has_previous_text(hotwords) and hotwords) else []
    previous: list[int] = []
    room = MAX_PROMPT_TOKENS - len(hot)
    if previous_text and has_previous_text(previous_text) and room > 0:
        previous = list(tokenizer.encode(" " + previous_text.strip()))[-room:]
    prompt = [tokenizer.sot_prev, *hot, *previous] if hot or previous else []
    suffix = [] if timestamps else [tokenizer.no_timestamps]
    return prompt + list(tokenizer.sot_sequence) + suffix


def equalize_prompts(prompts: Sequence[list[int]], pad_token: int) -> list[list[int]]:
    """Left-pad the previous-text part of each prompt to a common length.

    CTranslate2's batched generate needs <|startoftranscript|> at the same position in every
    item. Prompts with previous text are padded right after <|startofprev|> with a filler
    token (a lone space), which reads as leading whitespace of the previous text; items with and
    without previous text are never mixed in one call (see `has_previous_text`).
    """
    longest = max(len(p) for p in prompts)
    out = []
    for prompt in prompts:
        missing = longest - len(prompt)
        if missing and prompt:
            prompt = [prompt[0], *([pad_token] * missing), *prompt[1:]]
        out.append(list(prompt))
    return out


def has_previous_text(previous_text: str | None) -> bool:
    return bool(previous_text and previous_text.strip())


@dataclass(frozen=True)
class GenerateCall:
    """Settings shared by every item of one generate() call."""

    beam_size: int
    temperature: float
    max_new_tokens: int


def generate_max_length(prompt_len: int, max_new_tokens: int) -> int:
    """CTranslate2's ``max_length`` for a generate() call.

    Measured on CTranslate2 4.8: Whisper generates at most ``min(max_length // 2,
    max_length - prompt_len)`` new tokens, so the limit must cover both; a prompt at or past
    ``max_length`` yields nothing and can crash the process (SIGSEGV), which is why the prompt
    length is part of the sum and not left to chance.
    """
    return min(MAX_LENGTH, max(2 * max_new_tokens, prompt_len + max_new_tokens + 1))


def generate(
    ct2_model: Any,
    encoded: Any,
    prompts: Sequence[list[int]],
    tokenizers: Sequence[Any],
    budgets: Sequence[int],
    call: GenerateCall,
) -> list[Attempt]:
    """One batched generate(); ``budgets`` are per-item token limits used to flag truncation."""
    from faster_whisper.transcribe import get_suppressed_tokens

    if call.temperature > 0:
        kwargs: dict[str, Any] = {"beam_size": 1, "num_hypotheses": BEST_OF, "sampling_topk": 0,
                                  "sampling_temperature": call.temperature}
    else:
        kwargs = {"beam_size": call.beam_size}
    equal = equalize_prompts(prompts, tokenizers[0].encode(" ")[0])
    results = _call(
        ct2_model.generate, encoded, equal,
        max_length=generate_max_length(len(equal[0]) if equal else 0, call.max_new_tokens),
        return_scores=True, return_no_speech_prob=True, suppress_blank=True,
        suppress_tokens=list(get_suppressed_tokens(tokenizers[0], (-1,))),
        max_initial_timestamp_index=MAX_INITIAL_TIMESTAMP_INDEX, **kwargs,
    )
    return [_attempt(r, tok, budget, call.temperature)
            for r, tok, budget in zip(results, tokenizers, budgets, strict=True)]


def _attempt(result: Any, tokenizer: Any, budget: int, temperature: float) -> Attempt:
    tokens = tuple(int(t) for t in result.sequences_ids[0])
    # CTranslate2 returns the length-normalised cumulative log-prob; undo it as faster-whisper
    # does (length_penalty 1) and count the EOT token in the average.
    avg_logprob = float(result.scores[0]) * len(tokens) / (len(tokens) + 1)
    text_tokens = [t for t in tokens if t < tokenizer.eot]
    text = tokenizer.decode(text_tokens).strip()
    stamps = [t for t in tokens if t >= tokenizer.timestamp_begin]
    last_ts = (stamps[-1] - tokenizer.timestamp_begin) * TIME_PRECISION_S if stamps else None
    return Attempt(
        tokens=tokens, text=text, avg_logprob=avg_logprob,
        no_speech_prob=float(result.no_speech_prob), compression_ratio=compression_ratio(text),
        temperature=temperature, truncated=len(tokens) >= budget, last_timestamp_s=last_ts,
    )


def trim_loop(attempt: Attempt, tokenizer: Any,
              loop_at: Callable[[list[str]], int | None] = restart_index) -> Attempt | None:
    """The first pass of a looping attempt, or None where ``loop_at`` finds no loop (by
    default, for a truncated attempt: where it starts over from its first words)."""
    text_tokens = [t for t in attempt.tokens if t < tokenizer.eot]
    words, word_tokens = tokenizer.split_to_word_tokens(text_tokens + [tokenizer.eot])
    cut = loop_at([w for w in words[:-1]])
    if cut is None:
        return None
    kept = [t for toks in word_tokens[:cut] for t in toks]
    first_stamp = [attempt.tokens[0]] if attempt.tokens[0] >= tokenizer.timestamp_begin else []
    text = tokenizer.decode(kept).strip()
    return replace(attempt, tokens=tuple(first_stamp + kept), text=text,
                   compression_ratio=compression_ratio(text), truncated=False,
                   last_timestamp_s=None, trimmed=True)


def drop_past_end(attempt: Attempt, tokenizer: Any, duration_s: float) -> Attempt | None:
    """The attempt without its segments that start after the audio ends, when those segments
    only repeat words already said; None when there is nothing (safe) to drop.

    On a short window Whisper often closes the right transcript with a timestamp at or past
    the audio end, then starts a new segment there and says it all again
    ("<|0.00|> Mr. Quilter ... gospel.<|7.00|><|7.00|> Mr. Quilter ... gospel.<|14.00|>" for
    5.9 s of audio). No speech can start after the audio ends, and a repeat is a loop, so such
    segments go; anything else past the end is left to the guards (and the padded fallback).
    """
    tokens = list(attempt.tokens)
    begin = tokenizer.timestamp_begin
    cut = next((i for i in range(1, len(tokens))
                if tokens[i - 1] >= begin and tokens[i] >= begin
                and (tokens[i] - begin) * TIME_PRECISION_S >= duration_s - PAST_END_MARGIN_S),
               None)
    if cut is None:
        return None
    kept_words = set(words_of(tokenizer.decode([t for t in tokens[:cut] if t < tokenizer.eot])))
    dropped = words_of(tokenizer.decode([t for t in tokens[cut:] if t < tokenizer.eot]))
    if not kept_words or sum(w in kept_words for w in dropped) < REPEAT_SHARE * len(dropped):
        return None
    kept = tuple(tokens[:cut])
    text = tokenizer.decode([t for t in kept if t < tokenizer.eot]).strip()
    return replace(attempt, tokens=kept, text=text, compression_ratio=compression_ratio(text),
                   truncated=False, last_timestamp_s=(kept[-1] - begin) * TIME_PRECISION_S,
                   trimmed=True)


def align_words(
    ct2_model: Any,
    encoded: Any,
    tokenizer: Any,
    text_tokens: Sequence[Sequence[int]],
    num_frames: Sequence[int],
) -> list[list[WordTiming]]:
    """Word timings per item from one batched cross-attention alignment (items share the
    tokenizer's start sequence, i.e. language and task)."""
    from faster_whisper.transcribe import merge_punctuations

    results = _call(ct2_model.align, encoded, list(tokenizer.sot_sequence),
                    [list(t) for t in text_tokens], list(num_frames), median_filter_width=7)
    out: list[list[WordTiming]] = []
    for result, tokens in zip(results, text_tokens, strict=True):
        words, word_tokens = tokenizer.split_to_word_tokens(list(tokens) + [tokenizer.eot])
        pairs = result.alignments
        timings = word_timings(words, word_tokens, [p[0] for p in pairs], [p[1] for p in pairs],
                               result.text_token_probs)
        timings = clip_long_words(timings)
        # merge_punctuations works on faster-whisper's dicts; round-trip through them.
        dicts: list[dict[str, Any]] = [{"word": w.text, "tokens": [0] * w.token_count, "start": w.start_s,
                  "end": w.end_s, "probability": w.probability} for w in timings]
        merge_punctuations(dicts, PREPEND_PUNCTUATIONS, APPEND_PUNCTUATIONS)
        out.append([WordTiming(d["word"], d["start"], d["end"], d["probability"],
                               len(d["tokens"])) for d in dicts])
    return out
