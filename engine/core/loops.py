"""Loop checks on a decoded final that the generic quality checks miss (sans-I/O, pure).

Short windows make Whisper repeat a word ("1 1 1 1 1 1"), say a phrase twice back to back,
recite a passage again, or recite its prompt instead of the audio. The streaming policy retries
a final that fails one of these once, on the padded window without a prompt.
"""

from __future__ import annotations

from engine.core.agreement import comparable

ECHO_WORDS = 6  # a final repeating this many words of its prompt in a row is suspect
# One word repeated back to back faster than anyone says it ("1 1 1 1 1 1", "three three" on
# a 1 s chunk), while "words, words, words, words" over 4 s is speech: a run counts as a loop
# when it has more than WORD_LOOP_PER_S words per second of audio, or >= WORD_LOOP_MAX at all.
# A false alarm only costs a retry on the padded window, whose text is then kept.
WORD_LOOP_PER_S = 1.5
WORD_LOOP_MAX = 8


def word_loop(text: str, seconds: float) -> set[str]:
    """Loops the generic checks miss: one word repeated faster than anyone speaks, a phrase of
    3+ words said twice back to back ("what are you what are you"), or 6+ words said twice."""
    words = [comparable(w) for w in text.split()]
    run = longest = 1
    for previous, word in zip(words, words[1:], strict=False):
        run = run + 1 if word and word == previous else 1
        longest = max(longest, run)
    if longest >= WORD_LOOP_MAX or (longest >= 2 and longest > WORD_LOOP_PER_S * seconds):
        return {"word_loop"}
    for n in range(3, len(words) // 2 + 1):
        for i in range(len(words) - 2 * n + 1):
            if words[i:i + n] == words[i + n:i + 2 * n]:
                return {"word_loop"}
    # A passage recited again further on (a long window's hallucination) repeats a 6-gram.
    grams = [tuple(words[i:i + ECHO_WORDS]) for i in range(len(words) - ECHO_WORDS + 1)]
    if len(set(grams)) < len(grams):
        return {"word_loop"}
    return set()


def prompt_echo(prompt: str | None, text: str) -> set[str]:
    """Short windows sometimes make Whisper recite its prompt instead of the audio."""
    if not prompt:
        return set()
    said = [comparable(w) for w in prompt.split()]
    grams = {tuple(said[i:i + ECHO_WORDS]) for i in range(len(said) - ECHO_WORDS + 1)}
    words = [comparable(w) for w in text.split()]
    if any(tuple(words[i:i + ECHO_WORDS]) in grams for i in range(len(words) - ECHO_WORDS + 1)):
        return {"prompt_echo"}
    return set()
