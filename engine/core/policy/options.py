"""The streaming policy's options, and its rules by name (`RULES`). The measurements behind the
defaults are in docs/streaming-rules.md ("Evidence for the defaults"), where they are updated."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from engine.core.ladder import QualityThresholds
from engine.core.prompt import PromptOptions
from engine.types import DecodeOptions, ModelInfo


@dataclass(frozen=True)
class PolicyOptions:
    language: str | None = None
    # Auto-detection (language None) chooses among these only (DecodeOptions.languages);
    # `StreamingPolicy.set_language` changes both while running.
    languages: tuple[str, ...] = ()
    task: str = "transcribe"
    partials: bool = True
    min_partial_audio_s: float = 0.7
    partial_interval_s: float = 0.4
    min_new_audio_s: float = 0.2
    # Until the first words show, a partial is tried again once this much more audio is in, so
    # they appear about when Whisper can first read them (a decode that short is cheap).
    first_words_step_s: float = 0.1
    busy_factor: float = 2.0
    max_lag_s: float = 1.5
    max_in_flight: int = 1
    partial_beam_size: int = 1
    # Greedy finals up to greedy_final_max_s, as beam search reads short finals no better for
    # nearly twice the time; longer finals, retries and soft utterances take careful_beam_size.
    final_beam_size: int = 1
    greedy_final_max_s: float = 5.0
    careful_beam_size: int = 5
    # One sampled fallback, not faster-whisper's six: a long chain costs seconds, and a looping
    # final is retried by this policy anyway.
    final_temperatures: tuple[float, ...] = (0.0, 0.4)
    short_context: bool = True
    # Longer utterances take the padded window, since a long short window is where the fast
    # path hallucinates most.
    short_context_max_s: float = 10.0
    retry_on_loop: bool = True
    # How a decode on the padded 30 s window encodes the window after the audio
    # (`DecodeRequest.padding`): "encoded", as "silence" is faster but reads a little worse.
    padding: Literal["encoded", "silence"] = "encoded"
    # Decode the final while the end is still being confirmed (engine.core.policy.speculation).
    speculative_finals: bool = True
    # A long utterance is cut at a sentence end its speculative final and a later partial agree
    # on although the speaker went on (`CutAt`), as a fluent speaker's pauses between sentences
    # are shorter than the silence that ends an utterance; once the speculation covers this
    # much audio (0: off).
    sentence_cut_s: float = 8.0
    # Continuous speech rarely pauses long enough to end an utterance, so words two partials
    # agree on are made final while it is being spoken (engine.core.policy.commit, .writer).
    # Off by default (dictation's text lands when the utterance ends); captions with one
    # source turn it on; the stream core turns it off in push-to-talk.
    commit_stable: bool = False
    # Committing early, a partial's words become final text, so partials take this beam then
    # (partial_beam_size otherwise): greedy agrees on misreadings such as "then" for "than".
    commit_beam_size: int = 3
    # Committing early, a word that ends a sentence waits until this much audio after it was
    # heard, as Whisper puts a full stop before a pause and may take it back once it hears the
    # sentence go on (0: off).
    commit_end_hold_s: float = 1.5
    # An utterance only the segmenter's soft path heard keeps a segment only below this
    # no-speech probability, as falsetto scores lower than a cough or a door.
    soft_no_speech: float = 0.5
    # The user's vocabulary (names, jargon) every decode is biased towards, in priority order
    # (`engine.core.hotwords`); `StreamingPolicy.set_vocabulary` changes it while running.
    vocabulary: tuple[str, ...] = ()
    prompt: PromptOptions = field(default_factory=PromptOptions)
    # A final ends its sentence (engine.core.form): push-to-talk yes (one dictation, one
    # sentence or more), VAD no (set by the stream core: it cuts sentences at pauses).
    end_sentences: bool = True
    quality: QualityThresholds = field(default_factory=QualityThresholds)
    # Rule switches (docs/streaming-rules.md); `without` turns rules off by name (`RULES`).
    # VAD mode, from how the speculative final of a pause reads: a shorter wait when it reads
    # finished, a longer one when it goes on, and no end while it is being decoded.
    shorten_end_wait: bool = True
    extend_end_wait: bool = True
    await_reading: bool = True
    # One more decode, as the partials decode, of a final that dropped words they heard.
    replay: bool = True
    # A final whose last word ends EARLY_END_S before the speech did fails the loop checks.
    early_end: bool = True
    # While no partial has words, partials come every first_words_step_s of new audio.
    first_words: bool = True
    # A final that fails the short window's checks falls back to the padded window (runner).
    short_fallback: bool = True
    # The live ladder's rungs (ladder.LIVE): beam search for a greedy final of low
    # confidence; the padded window without prompt for a loop, a recited prompt, an early end.
    beam_rung: bool = True
    padded_rung: bool = True

    def without(self, *rules: str) -> PolicyOptions:
        """These options with ``rules`` (names in `RULES`) switched off."""
        unknown = [r for r in rules if r not in RULES]
        if unknown:
            raise ValueError(f"unknown rule(s) {', '.join(unknown)}; rules: {', '.join(RULES)}")
        changes: dict[str, object] = {}
        for rule in rules:
            changes.update(RULES[rule])
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def for_model(self, info: ModelInfo) -> PolicyOptions:
        """These options for a model: an English-only model's language is English (known from
        the start, so even the first final gets the English style prompt)."""
        if self.language is None and not info.multilingual:
            return dataclasses.replace(self, language="en")
        return self

    def __post_init__(self) -> None:
        if min(self.min_partial_audio_s, self.partial_interval_s, self.min_new_audio_s,
               self.first_words_step_s) < 0:
            raise ValueError("partial timings must be >= 0")
        if self.busy_factor < 1.0:
            raise ValueError("busy_factor must be >= 1 (a worker cannot be more than fully busy)")
        if self.max_lag_s <= 0 or self.max_in_flight < 1:
            raise ValueError("max_lag_s must be > 0 and max_in_flight >= 1")
        if not 0.0 < self.soft_no_speech <= 1.0:
            raise ValueError("soft_no_speech must be within (0, 1]")
        # DecodeOptions validates language, task and beam sizes.
        for beam_size in (self.partial_beam_size, self.commit_beam_size):
            DecodeOptions(language=self.language, task=self.task, beam_size=beam_size)
        if self.greedy_final_max_s < 0 or self.sentence_cut_s < 0 or self.commit_end_hold_s < 0:
            raise ValueError("greedy_final_max_s, sentence_cut_s and commit_end_hold_s must be "
                             ">= 0")
        for beam_size in (self.final_beam_size, self.careful_beam_size):
            DecodeOptions(language=self.language, task=self.task, beam_size=beam_size,
                          temperatures=self.final_temperatures)


# Each streaming rule by name, and the options that switch it off (`PolicyOptions.without`).
RULES: dict[str, dict[str, object]] = {
    "speculation": {"speculative_finals": False},
    "shorten_end_wait": {"shorten_end_wait": False},
    "extend_end_wait": {"extend_end_wait": False},
    "await_reading": {"await_reading": False},
    "sentence_cut": {"sentence_cut_s": 0.0},
    "replay": {"replay": False},
    "early_end": {"early_end": False},
    "first_words": {"first_words": False},
    "short_fallback": {"short_fallback": False},
    "beam_rung": {"beam_rung": False},
    "padded_rung": {"padded_rung": False},
}
