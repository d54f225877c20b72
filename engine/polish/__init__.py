"""AI polish: an optional pass of each dictated final (and of voice edits of a selection)
through the user's own OpenAI-compatible chat-completions server.

`guard` (pure) builds the messages, with the dictated text passed as delimited data and the
instruction in the system message, and checks each answer before it may be used; `client` is the
HTTP adapter (httpx, the only importer). Threads and the time budget live in the app
(app/polish.py): nothing here waits longer than the timeout it is given.
"""

from engine.polish.client import ChatClient, PolishError, Reply
from engine.polish.guard import (
    PRESETS,
    Verdict,
    check_edit,
    check_polish,
    edit_messages,
    polish_messages,
)

__all__ = ["PRESETS", "ChatClient", "PolishError", "Reply", "Verdict", "check_edit", "check_polish",
           "edit_messages", "polish_messages"]
