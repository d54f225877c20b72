"""What the policy tells the segmenter (VAD mode), as events the stream core carries out in the
order they come (`StreamingPolicy.hints`), instead of questions whose call order matters.

- `AwaitReading`: the speculative final of a pause is being decoded; until its text is back only
  ``open_silence_ms`` ends the utterance (`SpeechSegmenter.await_reading`).
- `PauseReads`: that text is back: "finished" shortens the wait (`shorten_end_wait`), "open"
  lengthens it (`extend_end_wait`), None leaves the usual wait (`keep_end_wait`).
- `CutAt`: end the long utterance at the sentence end its speculative final and a later partial
  agree on, although speech went on (`SpeechSegmenter.cut`; `PolicyOptions.sentence_cut_s`). A
  cut the segmenter cannot make is handed back (`StreamingPolicy.refuse_cut`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# How the speculative final of a pause reads: a finished sentence, or one that goes on.
Reading = Literal["finished", "open"]


@dataclass(frozen=True)
class AwaitReading:
    pass


@dataclass(frozen=True)
class PauseReads:
    reading: Reading | None


@dataclass(frozen=True)
class CutAt:
    end: int  # the stream sample the utterance ends at
    speech_end: int  # its last speech
    request_id: int  # the speculative final that reads the cut


Hint = AwaitReading | PauseReads | CutAt
