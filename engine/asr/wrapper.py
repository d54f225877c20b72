"""`RunnerWrapper`: a runner that hands every call of the `engine.types.Runner` protocol to an
inner runner, so a runner that adds one thing (records, shares, queues) writes only that."""

from __future__ import annotations

from collections.abc import Sequence

from engine.types import DecodeRequest, ModelInfo, Runner, Transcript


class RunnerWrapper:
    """Delegates ``info``, ``streams``, ``device``, `load()` and `decode_batch()` to ``inner``;
    subclasses override the calls they change."""

    def __init__(self, inner: Runner) -> None:
        self.inner = inner

    @property
    def info(self) -> ModelInfo:
        return self.inner.info

    @property
    def streams(self) -> int:
        return self.inner.streams

    @property
    def device(self) -> str:
        return self.inner.device

    def load(self) -> None:
        self.inner.load()

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        return self.inner.decode_batch(requests)
