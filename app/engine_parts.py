"""The parts every live engine is built from (`app.engine_factory` picks and assembles them;
`app.captions` builds one engine per caption source from them): the local runner laid out for
this machine, the local engine's options, and the remote engine with its API key.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.errors import EngineError
from engine.events import EventSink

if TYPE_CHECKING:
    from engine.audio.sources import AudioSource
    from engine.live import LiveOptions
    from engine.remote.client import RemoteLiveEngine
    from engine.types import Runner

log = logging.getLogger(__name__)

LIVE_CPU_STREAMS = 2  # decode streams of the live engine on a CPU (see live_layout)
LIVE_CPU_THREADS = 4  # CTranslate2 threads per stream at most (tiny models scale no further)


@dataclass(frozen=True)
class RunnerLayout:
    streams: int  # model replicas decoding at the same time
    cpu_threads: int  # CTranslate2 threads of each


def live_layout(cores: int | None = None) -> RunnerLayout:
    """The live runner's layout on this machine, for every live engine (dictation, captions,
    `listen`). Two decode streams (replicas sharing the weights) on a CPU with two cores or
    more, so a final never waits behind a partial and is decoded speculatively while the end
    of the utterance is confirmed (engine.core.policy.speculation); each replica gets all the
    cores up to `LIVE_CPU_THREADS`, since a lone final, the usual case, then decodes as fast
    as on one all-cores model (docs/evidence.md). CUDA keeps one stream (engine.asr)."""
    cores = cores or os.cpu_count() or 1
    return RunnerLayout(streams=max(1, min(LIVE_CPU_STREAMS, cores)),
                        cpu_threads=min(LIVE_CPU_THREADS, cores))


def live_runner(model: str, device: str, *, padded: bool = False,
                compute_type: str = "auto") -> Runner:
    """The live engine's runner for ``model``, laid out by `live_layout`, not loaded
    (``compute_type`` "auto": the one measured best for this processor, engine.compute_choice)."""
    try:
        from engine.asr import local_runner
    except ImportError as exc:
        raise EngineError(f"the local engine is not available: {exc}") from exc
    layout = live_layout()
    return local_runner(model, device=device, fast=not padded, streams=layout.streams,
                        cpu_threads=layout.cpu_threads, compute_type=compute_type)


def live_options(mode: str, *, language: str | None = None, languages: tuple[str, ...] = (),
                 vocabulary: tuple[str, ...] = (), partials: bool = True, padded: bool = False,
                 journal: bool = True, task: str = "transcribe",
                 commit_stable: bool = False) -> LiveOptions:
    """The local engine's options (its policy's among them) for every live engine."""
    try:
        from engine.core.policy import PolicyOptions
        from engine.live import LiveOptions
    except ImportError as exc:
        raise EngineError(f"the local live engine is not available: {exc}") from exc
    return LiveOptions(mode=mode, journal=journal, policy=PolicyOptions(
        language=language, languages=languages, vocabulary=vocabulary, partials=partials,
        short_context=not padded, task=task, commit_stable=commit_stable))


def remote_engine(sink: EventSink, url: str, source: AudioSource, *, language: str | None,
                  mode: str, vocabulary: tuple[str, ...]) -> RemoteLiveEngine:
    """The engine on a remote server, with the API key the keyring holds for ``url`` (none
    when there is no keyring: a server without keys still serves)."""
    from engine.remote.secrets import KeyringUnavailableError, load_api_key

    try:
        from engine.remote.client import RemoteLiveEngine
    except ImportError as exc:
        raise EngineError(f"the remote backend is not available: {exc}") from exc
    try:
        api_key = load_api_key(url)
    except KeyringUnavailableError as exc:
        log.warning("%s", exc)
        api_key = None
    engine = RemoteLiveEngine(sink, url=url, api_key=api_key, language=language, mode=mode,
                              source=source)
    engine.set_vocabulary(vocabulary)
    return engine
