"""What the policy tells the segmenter (VAD mode), as events the stream core carries out in the
order they come (`StreamingPolicy.hints`), instead of questions whose call order matters.

- `PauseReads`: the speculative final of a pause is back and tells how the pause reads:
  "finished" shortens the wait (`SpeechSegmenter.hurry`), "open" lengthens it (`linger`). A
  text that tells neither (or a rule switched off) sends no hint: the usual wait stands.
- `CutAt`: end the long utterance at the sentence end its speculative final and a later partial
  agree on, although speech went on (`SpeechSegmenter.cut`; `PolicyOptions.sentence_cut_s`). A
  cut the segmenter cannot make is handed back (`StreamingPolicy.refuse_cut`).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.policy.speculation import Reading


@dataclass(frozen=True)
class PauseReads:
    reading: Reading


@dataclass(frozen=True)
class CutAt:
    end: int  # the stream sample the utterance ends at
    speech_end: int  # its last speech
    request_id: int  # the speculative final that reads the cut


Hint = PauseReads | CutAt
