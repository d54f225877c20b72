"""Speculative finals: decode an utterance before it is known to have ended (sans-I/O).

Most of the wait between the end of speech and the final text is spent waiting: for the
segmenter's min-silence hangover (VAD mode: is this a pause or the end?) or for the push-to-talk
tail after the key release. A speculative final decodes the utterance as it is at that moment,
on a free decode stream, while the wait goes on:

- VAD mode: when the silence after the last speech window reaches the end pad
  (`engine.core.segmenter.SegmentPaused`), the utterance's audio is exactly what its final would
  decode if nothing more is said;
- push-to-talk: when the speech pauses for the end pad while the key is held (if the key is
  then let go before speech resumes, the utterance ends at the release with no tail to wait
  for, and the final is usually ready), else at the key release, once the audio up to it has
  arrived.

When the utterance then ends, the speculative result is used as the final if no speech was
heard after the audio it decoded and it covers the speech the segmenter reports (`usable`);
otherwise it is thrown away and the final is decoded as usual. Speech resuming during the wait
discards it at once. Either way nothing is lost or said twice: a final is always emitted once,
from the speculative decode or from a regular one.
"""

from __future__ import annotations


def usable(cut: int, soft: bool, *, end: int, speech_end: int, speech_upto: int,
           ended_soft: bool) -> bool:
    """Whether a speculative decode of the utterance's audio up to stream sample ``cut``
    (decoded as ``soft`` or not) may stand for the final of the utterance that ended at ``end``
    with its last speech at ``speech_end`` (the segmenter's) and ``speech_upto`` (the end of the
    last audio any window called speech): nothing spoken after the audio it decoded, none of
    the final's audio missing from it, decoded as carefully as the final would be."""
    return (soft == ended_soft and speech_upto <= cut and speech_end <= cut and cut <= end)
