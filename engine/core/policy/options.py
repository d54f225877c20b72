"""The streaming policy's options, and its rules by name (`RULES`, docs/streaming-rules.md)."""

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
    # Until the first words show, a partial is tried again once this much more audio is in
    # (a decode of under a second of audio takes ~40 ms here), so the first words appear
    # about when Whisper can first read them.
    first_words_step_s: float = 0.1
    busy_factor: float = 2.0
    max_lag_s: float = 1.5
    max_in_flight: int = 1
    partial_beam_size: int = 1
    # Greedy finals up to greedy_final_max_s: on the 26 English clips (bench/streaming.py,
    # tiny.en int8, 2-core CPU) beam 1/2/3/5 on every final gave 45/49/47/45 errors in 415
    # words, and a greedy 2-5 s final takes 0.58x the time of a beam-5 one (interleaved).
    # Longer finals (beam 5 there: 42 errors), retries of a final that failed a loop check and
    # soft utterances (rare, and the hard cases) take careful_beam_size.
    final_beam_size: int = 1
    greedy_final_max_s: float = 5.0
    careful_beam_size: int = 5
    # One sampled fallback, not faster-whisper's six: a long fallback chain costs seconds, and
    # a looping final is retried by this policy anyway (padded window, no prompt).
    final_temperatures: tuple[float, ...] = (0.0, 0.4)
    short_context: bool = True
    # Longer utterances take the padded window: it costs at most ~2x there, and a long short
    # window is where the fast path hallucinates most.
    short_context_max_s: float = 10.0
    retry_on_loop: bool = True
    # How a decode on the padded 30 s window (a fallback or retry of a final) encodes the window
    # after the audio (`DecodeRequest.padding`). "silence" cut those decodes from 550-950 ms to
    # ~150-300 ms here (bench/streaming.py --padding, one sitting: p95 of 2-5 s finals 309 vs
    # 755 ms, of end of speech -> final 1239 vs 1902 ms) for one word more wrong in 415 (42 vs
    # 41 errors; the padded-path clips alone, 9.6 vs 9.4 %): quality first, so "encoded".
    padding: Literal["encoded", "silence"] = "encoded"
    # Decode the final while the end is still being confirmed (engine.core.policy.speculation).
    speculative_finals: bool = True
    # A long utterance ends at a sentence end even when the speaker goes on after a short
    # pause: once its speculative final covers this much audio, speech resuming does not throw
    # that decode away; if it reads as a finished sentence and the next partial, which heard
    # what followed, ends a sentence there too (Whisper ends any audio it is given with a
    # period; with the words after the pause it punctuates it as the sentence reads), the
    # utterance is cut where it paused (a `CutAt` hint; the stream core does this in VAD mode
    # only) and the rest starts the next one. A fluent speaker pauses 100-450 ms between
    # sentences, under the 500 ms that ends an utterance: without this, their utterances ran to
    # the segmenter's 30 s limit, were split mid-sentence ("... in fourteen fifty-five. Has
    # never been surpassed"), their finals came 6-15 s after the words, and every partial past
    # 10 s took the padded window. 0: off.
    sentence_cut_s: float = 8.0
    # Continuous speech (a lecture, a video, a meeting rarely pauses for 500 ms): words are
    # made final while their utterance is still being spoken, once two successive partials
    # agree on them and on every word before them (LocalAgreement-2, as whisper_streaming;
    # three for a word of probability under COMMIT_MIN_PROB; never a number last, nor while
    # an earlier utterance's final is still to come: `Commits._commit`).
    # Partials then ask for word times and take the prompt a final would; the agreed words
    # are emitted as the final of a piece of the utterance (SpeechEnded, FinalText; its text
    # joins the prompt), the rest goes on as the next utterance (SpeechStarted, a new id)
    # whose decodes start at the sentence the commit point is in (COMMIT_WINDOW_S) and never
    # repeat a committed word (`_beyond`); the finals' prompt gets the committed text that
    # leaves the window. A word said again and again is left to the final (`word_loop`).
    # Replaces the sentence cut. The stream core turns it off in push-to-talk, whose text
    # lands at the release. Off by default (dictation: its text lands when the utterance
    # ends); captions with one source turn it on (app.captions) and show the pieces of a
    # sentence as one line (engine.core.captions.continues). On the 231 s reading a word is
    # final ~1.4 s after it is spoken (~6 s off) at 0-0.5 points more WER than offline with
    # commit_beam_size 3 (README: Captions); `bench/streaming.py --commit` measures it.
    commit_stable: bool = False
    # Committing early, a partial's words become final text, so partials are decoded with this
    # beam then (partial_beam_size otherwise). The 231 s reading (bench/streaming.py --commit
    # --commit-beam N, 2-3 runs each, 3 December; offline 4.9 %): beam 1 6.0 / 5.8 / 6.0 %
    # WER, word lag p50 1.26 / 1.25 / 1.22 s; beam 3 4.9 / 5.4 %, 1.37 / 1.39 s; beam 5
    # 5.2 / 5.6 %, 1.62 / 1.53 s. Greedy reads "then" for "than" and drops a "the" that two
    # greedy partials in a row agree on; a beam-3 partial costs more, so they come less often.
    commit_beam_size: int = 3
    # An utterance only the segmenter's soft path heard (energy and a weak VAD score) keeps
    # a decoded segment only if the model agrees there is speech: no-speech probability below
    # this, whatever its log-probability (falsetto scores 0.2-0.4, a cough or a door higher).
    soft_no_speech: float = 0.5
    # The user's vocabulary (names, jargon) every decode is biased towards, in priority order
    # (`engine.core.hotwords`); `StreamingPolicy.set_vocabulary` changes it while running.
    vocabulary: tuple[str, ...] = ()
    prompt: PromptOptions = field(default_factory=PromptOptions)
    # A final ends its sentence (engine.core.form): push-to-talk yes (one dictation, one
    # sentence or more), VAD no (set by the stream core: it cuts sentences at pauses).
    end_sentences: bool = True
    quality: QualityThresholds = field(default_factory=QualityThresholds)
    # Rule switches (docs/streaming-rules.md: each rule's trigger, effect, measured effect and
    # the test that pins it); `without` turns rules off by name (`RULES`), as
    # `bench/streaming.py --ablate RULE` does. VAD-mode pause hints to the segmenter, from how
    # the speculative final reads: shorter wait when it reads finished (shorten_end_wait), longer when
    # it reads as going on (extend_end_wait), and no end while it is being decoded (await_reading).
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
        if self.greedy_final_max_s < 0 or self.sentence_cut_s < 0:
            raise ValueError("greedy_final_max_s and sentence_cut_s must be >= 0")
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
