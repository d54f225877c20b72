"""An OpenAI-compatible chat-completions client (Ollama, llama.cpp's server, LM Studio, vLLM, a
cloud service): the one module importing ``httpx``. Blocking calls with a timeout, made on a
worker thread by the app (app/polish.py); every failure is a `PolishError` whose message says
what went wrong in words.

``base_url`` is the API root that ``/chat/completions`` and ``/models`` hang off, e.g.
``http://127.0.0.1:11434/v1`` (Ollama) or ``http://127.0.0.1:8080/v1`` (llama.cpp).

The server is not trusted: each request has a total deadline (connecting, sending, every read of
the headers and the body), so a server that trickles bytes forever cannot keep a thread; an answer
larger than MAX_BODY is refused; JSON nested too deeply for the parser is an error like any other
that is not a chat completion; and the server's text in an error (its body) is one clean line
with the API key and any Authorization value redacted (engine.core.sanitize).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from engine.core.sanitize import safe_message
from engine.errors import EngineError, missing_dependency

log = logging.getLogger(__name__)


class PolishError(EngineError):
    """The LLM server could not give an answer (down, too slow, an error, not OpenAI-like)."""


@dataclass(frozen=True)
class Reply:
    """The assistant's text; ``truncated``: it stopped at max_tokens (cut short)."""

    text: str
    truncated: bool = False


MAX_BODY = 4 * 1024 * 1024  # far above any chat completion or model list


def _httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise missing_dependency("httpx", "gui") from exc
    return httpx


_deadline = threading.local()  # .at: the time.monotonic() the current request must end by


def _left(timeout: float | None) -> float | None:
    """The socket timeout for one network operation: the operation's own, cut to what is left
    of the thread's request deadline; past the deadline, httpcore's own timeout error."""
    import httpcore

    at: float | None = getattr(_deadline, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the request's total deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream:
    """An httpcore network stream whose every read and write ends by the request's deadline."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data: bytes = self._stream.read(max_bytes, _left(timeout))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> _DeadlineStream:
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname,
                                                      _left(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend:
    """httpcore's network backend with `_DeadlineStream`s (httpx's own timeouts are per read:
    a byte every few seconds would never trip them)."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None, socket_options: Any = None) -> Any:
        return _DeadlineStream(self._backend.connect_tcp(host, port, _left(timeout),
                                                         local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> Any:
        return _DeadlineStream(self._backend.connect_unix_socket(path, _left(timeout),
                                                                 socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def _with_deadlines(client: Any) -> Any:
    """``client`` with every transport's connection pool (the direct one and those for proxies
    named in the environment) using `_DeadlineBackend`. httpx has no public way to give httpcore
    a network backend; tests/test_hardening_llm.py fails if this stops working (a trickling
    server's request must end at its deadline)."""
    for transport in [client._transport, *client._mounts.values()]:  # noqa: SLF001
        pool = getattr(transport, "_pool", None)
        if pool is not None:
            pool._network_backend = _DeadlineBackend(pool._network_backend)  # noqa: SLF001
    return client


class ChatClient:
    """One server and model. ``api_key``: sent as a Bearer token when given (from the keyring).
    Keeps one httpx.Client (its connections and TLS context: making those costs ~0.4 s, on every
    request otherwise); safe to share between threads, as httpx.Client is. `close()` ends it."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise PolishError(f"the LLM server URL must start with http:// or https:// "
                              f"(got {base_url!r})")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._secrets = (api_key,)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = _with_deadlines(_httpx().Client(headers=headers))

    def close(self) -> None:
        self._client.close()

    def _error(self, text: str) -> str:
        """The server's ``text`` fit for the log and the status bar (no escapes, no key)."""
        return safe_message(text, self._secrets, 200)

    def _request(self, method: str, path: str, timeout_s: float,
                 body: dict[str, Any] | None = None) -> Any:
        """The JSON the server answered, all of it within ``timeout_s`` (see the module's
        notes)."""
        httpx = _httpx()
        url = f"{self.base_url}{path}"
        _deadline.at = time.monotonic() + timeout_s
        try:
            status, content = self._fetch(httpx, method, url, timeout_s, body)
        except httpx.TimeoutException as exc:
            raise PolishError(f"no answer from {self.base_url} within {timeout_s:.1f} s") from exc
        except httpx.HTTPError as exc:
            raise PolishError(f"cannot reach {self.base_url} "
                              f"({self._error(str(exc))})") from exc
        finally:
            _deadline.at = None
        text = content.decode("utf-8", "replace")
        if status in (401, 403):
            raise PolishError(f"{self.base_url} refused the API key (HTTP {status})")
        if status >= 400:
            raise PolishError(f"{url} answered HTTP {status}: {self._error(text)}")
        try:
            return json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than json reads
            raise PolishError(f"{url} did not answer JSON (is it an OpenAI-compatible "
                              f"server?): {self._error(text[:80])}") from None

    def _fetch(self, httpx: Any, method: str, url: str, timeout_s: float,
               body: dict[str, Any] | None) -> tuple[int, bytes]:
        """The status and the body, read up to MAX_BODY bytes."""
        with self._client.stream(method, url, json=body,
                                 timeout=httpx.Timeout(timeout_s)) as reply:
            chunks, size = [], 0
            for chunk in reply.iter_bytes():
                size += len(chunk)
                if size > MAX_BODY:
                    raise PolishError(f"{url} answered more than {MAX_BODY // 2**20} MiB")
                chunks.append(chunk)
            return reply.status_code, b"".join(chunks)

    def complete(self, messages: list[dict[str, str]], timeout_s: float,
                 max_tokens: int = 512) -> Reply:
        """The assistant's reply to ``messages`` (temperature 0: the same text, the same answer)."""
        body = {"model": self.model, "messages": messages, "temperature": 0,
                "max_tokens": max_tokens, "stream": False}
        data = self._request("POST", "/chat/completions", timeout_s, body)
        try:
            choice = data["choices"][0]
            content = choice["message"]["content"]
            if not isinstance(content, (str, type(None))):
                raise TypeError("the content is not text")
            truncated = choice.get("finish_reason") == "length"
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise PolishError(f"{self.base_url} answered something that is not a chat "
                              f"completion ({type(exc).__name__})") from exc
        return Reply(content or "", truncated)

    def check(self, timeout_s: float = 5.0) -> str:
        """"Test connection": one line saying what the server offers, or PolishError. Lists the
        models and, when the server lists any, checks the configured one is among them."""
        data = self._request("GET", "/models", timeout_s)
        try:
            names = [safe_message(m["id"], limit=80) for m in data.get("data", [])
                     if isinstance(m["id"], str)]
        except (AttributeError, KeyError, TypeError) as exc:
            raise PolishError(f"{self.base_url}/models is not an OpenAI model list") from exc
        if self.model and names and self.model not in names:
            raise PolishError(f"{self.base_url} has no model {self.model!r} "
                              f"(it has: {', '.join(names[:8])})")
        return f"Connected to {self.base_url}: {len(names)} model(s) ({', '.join(names[:4])})"
