"""The streaming policy: when to decode what, and which events to emit (sans-I/O); see
`engine.core.policy.streaming` for the calls and the map of this package, and
docs/streaming-rules.md for its rules, their switches and what each is measured to do."""

from engine.core.policy.hints import AwaitReading, CutAt, Hint, PauseReads
from engine.core.policy.job import Job, JobKind
from engine.core.policy.options import RULES, PolicyOptions
from engine.core.policy.streaming import StreamingPolicy

__all__ = ["RULES", "AwaitReading", "CutAt", "Hint", "Job", "JobKind", "PauseReads",
           "PolicyOptions", "StreamingPolicy"]
