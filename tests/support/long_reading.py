"""The repository's 231 s reading (the one ``long`` entry of tests/audio/manifest.jsonl), decoded
once per test run per configuration.

Decoding the reading takes the better part of a minute on a small CPU, so the tests that need one
configuration's decode of it share it: `decoded` computes a configuration on its first call in
the test process and hands the same result to every later caller. A configuration's name must
say everything that decides the decode (engine, options, model), since it is the cache's key.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from bench.evaluation import read_manifest
from engine.audio.decode import load_audio
from engine.types import DecodeOptions, DecodeRequest, Runner, Transcript

AUDIO = Path(__file__).resolve().parents[1] / "audio"
# How much worse than faster-whisper's own loop on the same audio, decoded in the same run, the
# pipeline may read the reading: its configurations read it 0.5 to 0.9 point worse (3 to 5 of the
# 567 words) with either kernel family, and 1.5 points more pass, since processors move a few
# words in either decode.
PEER_MARGIN = 0.025

T = TypeVar("T")
_decodes: dict[str, Any] = {}
_lock = threading.Lock()


@functools.cache
def long_reading() -> tuple[np.ndarray, str]:
    """The reading's samples and its reference transcript."""
    entry = next(e for e in read_manifest(AUDIO / "manifest.jsonl") if e.kind == "long")
    return load_audio(entry.path), entry.text


def decoded(configuration: str, decode: Callable[[], T]) -> T:
    """``decode()``'s result for ``configuration``: computed on the first call of this test run,
    the same object afterwards."""
    with _lock:
        if configuration not in _decodes:
            _decodes[configuration] = decode()
        result: T = _decodes[configuration]
        return result


def faster_whisper_decode(transcriber: Runner) -> Transcript:
    """The reading through faster-whisper's own loop (``transcriber``: the session's tiny.en
    `SequentialRunner`) with `sottovoce transcribe --engine sequential`'s settings (beam 5, the
    TXT output's options): the peer the pipeline is judged against."""
    from app.commands.transcribe import Decoders, decode_options, transcribe

    def decode() -> Transcript:
        decoders = Decoders(runner=None, sequential=transcriber,  # type: ignore[arg-type]
                            sequential_below_s=math.inf)
        return transcribe(long_reading()[0], decoders, decode_options(None, 5, "txt"))

    return decoded("tiny.en faster-whisper loop, beam 5, txt options", decode)


@dataclasses.dataclass(frozen=True)
class PipelineDecode:
    transcript: Transcript
    options: list[DecodeOptions]  # each decode request's options, in the order decoded


class _OptionsSeen:
    """A runner that notes each request's options (the pipeline's prompts, beams) as it
    decodes with ``inner``."""

    def __init__(self, inner: Runner) -> None:
        self.inner = inner
        self.options: list[DecodeOptions] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        with self._lock:
            self.options += [r.options for r in requests]
        return self.inner.decode_batch(requests)


def pipeline_decode() -> PipelineDecode:
    """The reading through the default long-file pipeline (tiny.en laid out for files on the
    default device, default `FileOptions`), with the options of every decode it made."""
    from engine.asr import local_runner
    from engine.files import transcribe_file

    def decode() -> PipelineDecode:
        runner = local_runner("tiny.en", files=True)
        runner.load()
        seen = _OptionsSeen(runner)
        transcript = transcribe_file(long_reading()[0], seen).transcript()  # type: ignore[arg-type]
        return PipelineDecode(transcript, seen.options)

    return decoded("tiny.en pipeline, files layout, default FileOptions", decode)
