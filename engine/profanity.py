"""The profanity mask for captions (off by default): the only module importing
`better_profanity` (a maintained word list with leetspeak variants). Each listed word becomes "****"."""

from __future__ import annotations

import threading
from collections.abc import Callable

from engine.errors import missing_dependency

_LOCK = threading.Lock()


def profanity_mask() -> Callable[[str], str]:
    """A function masking profanity in a text; loads the word list once (call it early)."""
    try:
        from better_profanity import profanity
    except ImportError as exc:
        raise missing_dependency("better-profanity", "client") from exc
    with _LOCK:
        if not profanity.CENSOR_WORDSET:
            profanity.load_censor_words()

    def mask(text: str) -> str:
        return str(profanity.censor(text, "*")) if text else text

    return mask
