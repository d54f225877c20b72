"""Tuning of the CTranslate2 runner's short path (`engine.asr.ct2_decoder.Ct2Runner`).

Its own module so that `engine.asr.ct2_batch` (the decode) and `engine.asr.ct2_decoder` (the
runner that calls it) both import it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ShortContextSettings:
    """Tuning of the short path.

    Attributes:
      pad_s: silence added after the longest chunk of a batch before encoding; gives the model
        room to place the final timestamp and EOT instead of looping at a hard window edge.
      max_s: chunks longer than this always take the padded path (little to gain there).
      timestamp_cues: also fall back when the last timestamp lies past the audio end or the text
        stops early while loud audio goes on ("past_end", "early_end"). Off by default: on a
        short window Whisper's timestamps are unreliable (a correct "Lord, but I am glad to see
        you again, Phil.<|5.00|>" on 2.8 s of audio); on the shared English set these cues
        caused fallbacks and no WER gain (docs/evidence.md). The end-of-text cue (no EOT within
        the token budget) is always on, and segments that start past the audio end are always
        dropped when they only repeat earlier words.
    """

    pad_s: float = 1.0
    max_s: float = 25.0
    timestamp_cues: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.pad_s <= 10.0:
            raise ValueError("pad_s must be within 0..10 s")
        if not 0.0 < self.max_s <= 30.0:
            raise ValueError("max_s must be within 0..30 s")
