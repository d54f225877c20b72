"""AI polish in the app: each request to the LLM server runs on a worker thread, under a time
budget kept on the GUI thread, and its outcome is delivered in order.

- `Polisher.polish(raw, preset, custom, deliver)`: a dictated final. `deliver(Outcome)` is
  called on the GUI thread, exactly once, with the text to insert: the server's answer when it
  came within the budget and passed the guard (engine.polish.guard.check_polish), else the raw
  text and the reason. Past the budget the raw text is delivered at once and the late answer,
  when it comes, is logged and dropped: it is never inserted afterwards.
- `Polisher.edit(selection, command, deliver)`: a voice edit of a selection, under the same
  budget; its outcome is ``ok`` only for an answer that passed `check_edit`.
- Outcomes are delivered in the order the requests were made (a quick second final never
  overtakes a slow first one), each with its stages (``polish_sent`` and ``polish_done`` /
  ``polish_rejected`` / ``polish_failed`` / ``polish_timeout``, time.monotonic seconds) for the
  latency breakdown.

The API key is read from the OS keyring on the worker thread (a Secret Service call may block),
under the account ``api-key:llm:<url>`` (engine.remote.secrets).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QTimer, Signal

from engine.polish import ChatClient, PolishError, Reply, Verdict, check_edit, check_polish
from engine.polish.guard import edit_messages, max_tokens, polish_messages, words
from ui.qt_compat import emit

log = logging.getLogger(__name__)


LATE_WAIT_S = 5.0  # how long a request's socket waits past its budget


def key_account(url: str) -> str:
    """The keyring name the LLM server's API key is kept under (engine.remote.secrets)."""
    return f"llm:{url}"


def load_key(url: str) -> str | None:
    """The stored API key for the LLM server, or None (none stored, or no keyring)."""
    from engine.remote.secrets import KeyringUnavailableError, load_api_key

    try:
        return load_api_key(key_account(url))
    except KeyringUnavailableError as exc:
        log.info("no keyring for the LLM server's API key: %s", exc)
        return None


@dataclass(frozen=True)
class Outcome:
    """What to use for one request. ``ok``: ``text`` is the server's checked answer; else
    ``text`` is the raw text and ``reason`` says why (a guard cause, "timeout", "error")."""

    text: str
    ok: bool
    reason: str = ""
    detail: str = ""
    llm_ms: float = 0.0
    stages: tuple[tuple[str, float], ...] = ()

    def describe(self) -> str:
        """One line for the status bar and the latency meter."""
        if self.ok:
            return f"AI polish +{self.llm_ms:.0f} ms"
        return f"AI polish skipped ({self.reason}: {self.detail}); raw text used"


@dataclass
class _Job:
    seq: int
    raw: str
    check: Callable[[Reply], Verdict]
    deliver: Callable[[Outcome], None]
    sent_at: float
    outcome: Outcome | None = None
    timer: QTimer | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ServerConfig:
    url: str
    model: str
    budget_s: float


class Polisher(QObject):
    """Lives on the GUI thread. ``config()`` is read at each request (the settings of now)."""

    _answered = Signal(int, object)  # (job, str answer or PolishError) from a worker thread

    def __init__(self, config: Callable[[], ServerConfig],
                 key: Callable[[str], str | None] = load_key,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.config = config
        self.key = key
        self._jobs: deque[_Job] = deque()
        self._seq = 0
        self._expired: dict[int, float] = {}  # job -> when it was sent, for its late answer
        self.late_answers = 0  # answers that came after their budget (dropped)
        self._clients: dict[tuple[str, str, str | None], ChatClient] = {}  # kept: warm sockets
        self._keys: dict[str, str | None] = {}  # API key by server URL, read once
        self._clients_lock = threading.Lock()  # the worker threads share them
        self._answered.connect(self._on_answer)

    @property
    def pending(self) -> int:
        return len(self._jobs)

    def polish(self, raw: str, preset: str, custom: str,
               deliver: Callable[[Outcome], None]) -> None:
        self._submit(polish_messages(raw, preset, custom), raw,
                     lambda reply: check_polish(raw, reply.text, preset, reply.truncated, custom),
                     max_tokens(raw, preset), deliver)

    def edit(self, selection: str, command: str, deliver: Callable[[Outcome], None]) -> None:
        tokens = 4 * len(words(selection)) + 128
        self._submit(edit_messages(selection, command), selection,
                     lambda reply: check_edit(selection, reply.text, reply.truncated), tokens,
                     deliver)

    def _submit(self, messages: list[dict[str, str]], raw: str,
                check: Callable[[Reply], Verdict], tokens: int,
                deliver: Callable[[Outcome], None]) -> None:
        config = self.config()
        self._seq += 1
        job = _Job(self._seq, raw, check, deliver, time.monotonic())
        self._jobs.append(job)
        job.timer = QTimer(self)
        job.timer.setSingleShot(True)
        job.timer.timeout.connect(lambda: self._expire(job))
        job.timer.start(int(config.budget_s * 1000))
        threading.Thread(target=self._ask, args=(job.seq, config, messages, tokens),
                         name="sottovoce-polish", daemon=True).start()

    def _ask(self, seq: int, config: ServerConfig, messages: list[dict[str, str]],
             tokens: int) -> None:
        """Worker thread: one request, its answer (or its error) back to the GUI thread."""
        result: Reply | PolishError
        try:
            client = self._client(config)
            # The socket gives up some time after the budget: the thread always ends, the GUI
            # thread's timer has delivered the raw text long before, and a late answer shows
            # in the log (how late) instead of as a timeout.
            result = client.complete(messages, config.budget_s + LATE_WAIT_S, tokens)
        except PolishError as exc:
            result = exc
        except Exception as exc:  # noqa: BLE001 - the thread's top: report, never die silently
            log.exception("AI polish request failed")
            result = PolishError(f"internal error: {exc}")
        emit(self._answered, seq, result)

    def prepare(self) -> None:
        """Read the API key and make the client now, on a worker thread (a keyring lookup and
        a new client take a noticeable share of a 2 s budget): the controller calls this at the
        push-to-talk press, so the final's request goes out at once."""
        config = self.config()

        def work() -> None:
            try:
                self._client(config)
            except PolishError as exc:
                log.warning("AI polish: %s", exc)
        threading.Thread(target=work, name="sottovoce-polish-prepare", daemon=True).start()

    def _client(self, config: ServerConfig) -> ChatClient:
        """Worker thread: the client for this server and model, with its key (each made once,
        until `close`)."""
        with self._clients_lock:
            if config.url not in self._keys:
                self._keys[config.url] = self.key(config.url)
            name = (config.url, config.model, self._keys[config.url])
            if name not in self._clients:
                self._clients[name] = ChatClient(*name)
            return self._clients[name]

    def close(self) -> None:
        """Forget the clients and keys (the settings changed, or the app quits)."""
        with self._clients_lock:
            self._keys.clear()
            for client in self._clients.values():
                client.close()
            self._clients.clear()

    def _find(self, seq: int) -> _Job | None:
        return next((job for job in self._jobs if job.seq == seq), None)

    def _on_answer(self, seq: int, result: object) -> None:
        job = self._find(seq)
        now = time.monotonic()
        if job is None or job.outcome is not None:
            sent_at = self._expired.pop(seq, now)
            self.late_answers += 1
            log.info("AI polish: a late answer (after %.0f ms) was dropped: %.80s",
                     1000 * (now - sent_at), result)
            return
        ms = 1000 * (now - job.sent_at)
        sent = ("polish_sent", job.sent_at)
        if isinstance(result, PolishError):
            job.outcome = Outcome(job.raw, False, "error", str(result), ms,
                                  (sent, ("polish_failed", now)))
        else:
            assert isinstance(result, Reply)
            verdict = job.check(result)
            if verdict.ok:
                job.outcome = Outcome(verdict.text, True, llm_ms=ms,
                                      stages=(sent, ("polish_done", now)))
            else:
                log.info("AI polish answer rejected (%s): %r", verdict.cause, result.text[:200])
                job.outcome = Outcome(job.raw, False, verdict.cause, verdict.detail, ms,
                                      (sent, ("polish_rejected", now)))
        self._flush()

    def _expire(self, job: _Job) -> None:
        if job.outcome is not None:
            return
        now = time.monotonic()
        budget = now - job.sent_at
        self._expired[job.seq] = job.sent_at
        job.outcome = Outcome(job.raw, False, "timeout", f"no answer within {budget:.1f} s",
                              1000 * budget, (("polish_sent", job.sent_at),
                                              ("polish_timeout", now)))
        self._flush()

    def _flush(self) -> None:
        """Deliver the finished outcomes at the head of the queue, in request order."""
        while self._jobs and self._jobs[0].outcome is not None:
            job = self._jobs.popleft()
            if job.timer is not None:
                job.timer.stop()
                job.timer.deleteLater()
            outcome = job.outcome
            assert outcome is not None
            if outcome.ok:
                log.info("AI polish: %s", outcome.describe())
            else:
                log.warning("AI polish: %s", outcome.describe())
            job.deliver(outcome)


class ConnectionTest(QObject):
    """The settings' "Test connection" button: the check runs on a worker thread and its one
    line comes back through ``done`` on the GUI thread."""

    done = Signal(str)

    def run(self, url: str, model: str, key: str | None) -> None:
        def work() -> None:
            try:
                client = ChatClient(url, model, key or load_key(url))
                try:
                    line = client.check()
                finally:
                    client.close()
            except PolishError as exc:
                line = f"Failed: {exc}"
            emit(self.done, line)

        threading.Thread(target=work, name="sottovoce-polish-test", daemon=True).start()
