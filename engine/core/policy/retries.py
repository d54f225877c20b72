"""Every retry of a final, in one table (`RETRIES`), in the style of `engine.core.ladder.LIVE`.

A final's first decode is judged (`engine.core.policy.finals.judge`); the first row of the table
whose trigger holds, whose switch is on and which this final has not tried yet, is its next
decode, with that row's options (`engine.core.policy.finals.plan`); at most `MAX_FINAL_DECODES`
decodes per final. Which result stands when a retry comes back is the row's ``keeps``:
"retry" (the retry's text), or "best" (the one that passes the checks, then the one that reads
more words; a tie keeps the earlier one).

| retry   | trigger                                             | options                              | keeps  |
|---------|-----------------------------------------------------|--------------------------------------|--------|
| BEAM    | a greedy first decode fails only confidence checks  | beam search, same window and prompt  | retry  |
| PADDED  | a loop, a recited prompt, an early end              | padded window, no prompt, beam       | retry  |
| REPLAY  | words its last partial heard are missing            | as partials: greedy, no prompt       | best   |

BEAM and PADDED are the ladder's rungs (`engine.core.ladder.LIVE`: one rung, first decodes
only; while other finals wait, PADDED alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal

MAX_FINAL_DECODES = 3  # first decode + a rung + the replay


class Retry(Enum):
    BEAM = "beam"
    PADDED = "padded"
    REPLAY = "replay"


@dataclass(frozen=True)
class RetryRule:
    retry: Retry
    switch: str  # the PolicyOptions field (and RULES name) that turns it off
    keeps: Literal["retry", "best"]
    first_only: bool  # only after a final's first decode


RETRIES: tuple[RetryRule, ...] = (
    RetryRule(Retry.BEAM, "beam_rung", "retry", first_only=True),
    RetryRule(Retry.PADDED, "padded_rung", "retry", first_only=True),
    RetryRule(Retry.REPLAY, "replay", "best", first_only=False),
)


def rule(retry: Retry) -> RetryRule:
    return next(r for r in RETRIES if r.retry is retry)
