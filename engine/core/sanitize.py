"""Text from a model or a server made safe to type, paste, print or show (pure: no I/O).

A model's answer, a remote server's transcript or an HTTP error body is someone else's text: typed
into a terminal, an escape sequence clears the screen or retitles the window, an OSC 52 sequence
writes the clipboard, a DEL or backspace erases what the user typed, and a bidi override makes
text read differently from what it is. `clean` removes all of that:

- ESC sequences whole (CSI ``ESC [``, OSC ``ESC ]`` up to BEL or ST, DCS/SOS/PM/APC up to ST, and
  two-character escapes), and their 8-bit C1 forms;
- every other C0/C1 control character and DEL;
- invisible format characters (Unicode category Cf: bidi embeddings, overrides and isolates,
  zero-width spaces, word joiners, tag characters), except the zero-width joiner and non-joiner
  that emoji and some scripts need; lone surrogates, which cannot be encoded.

Line breaks (``\\n``, ``\\r\\n``, ``\\r``, U+2028/U+2029) become ``\\n`` where the caller allows
them and a space where not; a tab stays a tab only where allowed, else a space. Printable text is
never changed. `clean` is idempotent. `one_line` is the form for a log line or the status bar,
and `redact` takes API keys and Authorization values out of a server's error text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

# ESC (or its 8-bit C1 introducer) and what follows it, as a terminal would consume it. A string
# sequence (OSC, DCS, SOS, PM, APC) with no terminator runs to the end of the text: a terminal
# would swallow the rest as well.
_ST = r"(?:\x1b\\|\x9c|\x07)"
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI: parameters, intermediates, final byte
    rf"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[\s\S]*?(?:{_ST}|$)"  # OSC, DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?",  # any other escape (nF, Fp, Fe, Fs), or a lone ESC
)
_LINE_BREAK = re.compile(r"\r\n|[\r\n\u2028\u2029]")
_KEPT_FORMAT = frozenset("\u200c\u200d")  # ZWNJ, ZWJ: emoji sequences, Persian, Indic scripts
_DROPPED_CATEGORIES = frozenset(("Cc", "Cf", "Cs"))
REDACTED = "[redacted]"
# Header-like secrets in a server's error text: "Authorization: Bearer x", "api_key": "x", ...
_SECRET_FIELD = re.compile(
    r"""(?P<name>(?:proxy-)?authorization|x-api-key|api[_-]?key|access[_-]?token|"""
    r"""bearer)(?P<sep>["']?\s*[:=]?\s*["']?)(?P<scheme>(?:bearer|basic|token)\s+)?"""
    r"""(?P<value>[^\s"',;}]+)""", re.IGNORECASE)


def _kept(char: str, tabs: bool) -> bool:
    if char == "\t":
        return tabs
    if char in _KEPT_FORMAT:
        return True
    return unicodedata.category(char) not in _DROPPED_CATEGORIES


def clean(text: str, *, newlines: bool = False, tabs: bool = False) -> str:
    """``text`` without escape sequences, control and invisible format characters (see the
    module's notes). ``newlines``/``tabs``: keep line breaks (as ``\\n``) / tabs; else each
    becomes a space."""
    text = _SEQUENCE.sub("", text)
    text = _LINE_BREAK.sub("\n" if newlines else " ", text)
    if text.isprintable():  # the usual case: nothing left to look at, character by character
        return text
    return "".join(
        char if char == "\n" or _kept(char, tabs) else (" " if char == "\t" else "")
        for char in text)


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` cleaned for one line of a log or the status bar: runs of whitespace become one
    space; at most ``limit`` characters (an ellipsis marks the cut)."""
    line = " ".join(clean(text).split())
    if limit is not None and len(line) > limit:
        return line[:max(0, limit - 1)] + "…"
    return line


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with each of ``secrets`` (an API key) and any Authorization / API-key header or
    field value replaced by ``[redacted]``: a server that echoes the request's headers in its
    error body must not put the key in the log or on screen."""
    for secret in secrets:
        if secret and len(secret) >= 4:  # a 1-3 character "key" would redact ordinary words
            text = text.replace(secret, REDACTED)

    def hide(match: re.Match[str]) -> str:
        if not match.group("sep").strip() and not match.group("scheme") \
                and match.group("name").lower() != "bearer":
            return match.group(0)  # "the API key was refused": a mention, not a value
        return (f"{match.group('name')}{match.group('sep')}{match.group('scheme') or ''}"
                f"{REDACTED}")
    return _SECRET_FIELD.sub(hide, text)


def safe_message(text: str, secrets: Iterable[str | None] = (), limit: int | None = 200) -> str:
    """A server's error text, fit for stderr, the log and the status bar: one clean line, at
    most ``limit`` characters, secrets redacted (before the cut, so no key is cut in half).
    Redacted before cleaning too: an escape sequence's end could take a key's first letter."""
    return one_line(redact(clean(redact(text, secrets)), secrets), limit)
