"""An OpenAI-compatible chat-completions client (Ollama, llama.cpp's server, LM Studio, vLLM, a
cloud service): the one module importing ``httpx``. Blocking calls with a timeout, made on a
worker thread by the app (app/polish.py); every failure is a `PolishError` whose message says
what went wrong in words.

``base_url`` is the API root that ``/chat/completions`` and ``/models`` hang off, e.g.
``http://127.0.0.1:11434/v1`` (Ollama) or ``http://127.0.0.1:8080/v1`` (llama.cpp).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from engine.errors import EngineError, missing_dependency

log = logging.getLogger(__name__)


class PolishError(EngineError):
    """The LLM server could not give an answer (down, too slow, an error, not OpenAI-like)."""


@dataclass(frozen=True)
class Reply:
    """The assistant's text; ``truncated``: it stopped at max_tokens (cut short)."""

    text: str
    truncated: bool = False


def _httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise missing_dependency("httpx", "gui") from exc
    return httpx


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
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = _httpx().Client(headers=headers)

    def close(self) -> None:
        self._client.close()

    def _request(self, method: str, path: str, timeout_s: float,
                 body: dict[str, Any] | None = None) -> Any:
        httpx = _httpx()
        url = f"{self.base_url}{path}"
        try:
            reply = self._client.request(method, url, json=body,
                                         timeout=httpx.Timeout(timeout_s))
        except httpx.TimeoutException as exc:
            raise PolishError(f"no answer from {self.base_url} within {timeout_s:.1f} s") from exc
        except httpx.HTTPError as exc:
            raise PolishError(f"cannot reach {self.base_url} ({exc})") from exc
        if reply.status_code in (401, 403):
            raise PolishError(f"{self.base_url} refused the API key (HTTP {reply.status_code})")
        if reply.status_code >= 400:
            raise PolishError(f"{url} answered HTTP {reply.status_code}: {reply.text[:200]}")
        try:
            return reply.json()
        except ValueError as exc:
            raise PolishError(f"{url} did not answer JSON (is it an OpenAI-compatible "
                              f"server?): {reply.text[:80]!r}") from exc

    def complete(self, messages: list[dict[str, str]], timeout_s: float,
                 max_tokens: int = 512) -> Reply:
        """The assistant's reply to ``messages`` (temperature 0: the same text, the same answer)."""
        body = {"model": self.model, "messages": messages, "temperature": 0,
                "max_tokens": max_tokens, "stream": False}
        data = self._request("POST", "/chat/completions", timeout_s, body)
        try:
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise PolishError(f"{self.base_url} answered something that is not a chat "
                              f"completion: {str(data)[:80]}") from exc
        return Reply(str(content or ""), choice.get("finish_reason") == "length")

    def check(self, timeout_s: float = 5.0) -> str:
        """"Test connection": one line saying what the server offers, or PolishError. Lists the
        models and, when the server lists any, checks the configured one is among them."""
        data = self._request("GET", "/models", timeout_s)
        try:
            names = [str(m["id"]) for m in data.get("data", [])]
        except (AttributeError, KeyError, TypeError) as exc:
            raise PolishError(f"{self.base_url}/models is not an OpenAI model list") from exc
        if self.model and names and self.model not in names:
            raise PolishError(f"{self.base_url} has no model {self.model!r} "
                              f"(it has: {', '.join(names[:8])})")
        return f"Connected to {self.base_url}: {len(names)} model(s) ({', '.join(names[:4])})"
