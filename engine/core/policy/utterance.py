"""The state the policy keeps per utterance."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.core.agreement import LocalAgreement
from engine.core.policy.commit import EarlyCommit
from engine.core.policy.job import Job
from engine.core.policy.retries import Retry
from engine.core.policy.speculation import Speculation
from engine.types import Audio, Transcript


@dataclass
class Utterance:
    id: int
    start: int
    started_at: float
    chunks: list[Audio] = field(default_factory=list)
    samples: int = 0
    arrived_at: float = 0.0  # when the newest sample arrived
    partial_samples: int = 0  # audio length at the last partial request
    agreement: LocalAgreement = field(default_factory=LocalAgreement)
    speech: bool = False  # any speech heard yet (a ptt press may start on silence)
    end: int = 0
    speech_end_at: float = 0.0
    speech_end: int = 0  # session sample where the last speech window ended
    attempts: int = 0
    soft: bool = False  # only the segmenter's soft path heard speech (see soft_no_speech)
    heard: str = ""  # the latest partial's text: which vocabulary terms go first
    heard_upto: int = 0  # ... and the stream sample after the audio it decoded (`finals.dropped`)
    tried: list[Retry] = field(default_factory=list)  # the final's retries so far (finals.py)
    retry: Retry | None = None  # the retry the next final attempt is (finals.RETRIES)
    earlier: tuple[Job, Transcript] | None = None  # a decode a retry competes with (REPLAY)
    speech_upto: int = 0  # stream sample after the last audio a window called speech
    ended_at: float = 0.0  # when the segmenter (or a flush) closed it
    spec: Speculation = field(default_factory=Speculation)  # its speculative final, if any
    decoded_at: float = 0.0  # when the result its final is made of came back
    decode_ms: float = 0.0
    # Where this utterance's own words begin: ``start``, or the end of the words committed
    # early before it (its audio may start earlier: commit.COMMIT_WINDOW_S).
    first: int = 0
    commit: EarlyCommit = field(default_factory=EarlyCommit)  # its words on the way to commit

    def audio(self) -> Audio:
        if not self.chunks:
            return np.zeros(0, dtype=np.float32)
        if len(self.chunks) > 1:
            self.chunks = [np.concatenate(self.chunks)]
        return self.chunks[0]
