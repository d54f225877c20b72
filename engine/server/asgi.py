"""The server's HTTP stack: one ASGI application (Starlette) on uvicorn serves the HTTP routes and
both WebSocket protocols on one port.

The connection code (`engine.server.connection`, `engine.server.whisperlive`) was written
against the ``websockets`` server's connection object (``recv``/``send``/``close``,
``remote_address``, `ConnectionClosed` when the peer is gone); `AsgiSocket` gives a Starlette
WebSocket that shape, so the protocols did not change with the stack.

Keys: every route but ``/health`` (and the web page's static files, which hold no data) needs
``Authorization: Bearer <key>`` when the server has keys; WebSocket clients that cannot set a
header (browsers, WhisperLive's clients) may send ``?token=<key>`` or the subprotocols
``bearer, <key>``. A refused HTTP request gets 401; a refused WebSocket handshake gets an HTTP
401 before any frame. Keys are compared in constant time and never logged.

The only module that imports Starlette and uvicorn (lazily, through `build_app` and `serve`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from engine.server.keys import ApiKey, Keys

log = logging.getLogger(__name__)

BEARER_SUBPROTOCOL = "bearer"
UNAUTHORIZED = "unauthorized: send 'Authorization: Bearer <key>'\n"


class Refused(Exception):
    """A request without a valid key: the status and the text to answer with."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


def caller(keys: Keys, headers: Any, query: dict[str, str], subprotocols: list[str]
           ) -> ApiKey | None:
    """The key a request carries (None on an open server); raises `Refused` otherwise.
    ``Authorization: Bearer`` first, then the places browsers can put a token."""
    authorization = headers.getlist("authorization")
    if len(authorization) > 1:
        raise Refused(400, "bad request: send one Authorization header\n")
    if not keys:
        return None
    header = authorization[0] if authorization else ""
    scheme, _, token = header.partition(" ")
    candidates = [token.strip()] if header and scheme.lower() == "bearer" else []
    if not candidates:
        candidates = [query["token"]] if "token" in query else []
        if BEARER_SUBPROTOCOL in subprotocols:
            candidates += [s for s in subprotocols if s and s != BEARER_SUBPROTOCOL][:1]
    for candidate in candidates:
        key = keys.match(candidate)
        if key is not None:
            return key
    raise Refused(401, UNAUTHORIZED)


def connection_closed(code: int = 1006, reason: str = "") -> Exception:
    """The exception the connection code expects when the peer is gone."""
    from websockets.exceptions import ConnectionClosed
    from websockets.frames import Close

    return ConnectionClosed(Close(code, reason), None)


class AsgiSocket:
    """A Starlette WebSocket (accepted) as the connection code uses a ``websockets`` one."""

    def __init__(self, websocket: Any, key: ApiKey | None = None) -> None:
        self._ws = websocket
        self.key = key
        client = websocket.client
        self.remote_address = (client.host, client.port) if client else ("local", 0)
        self.close_code: int | None = None
        self.path = websocket.url.path
        self.headers = websocket.headers

    async def recv(self) -> str | bytes:
        from starlette.websockets import WebSocketDisconnected

        if self.close_code is not None:
            raise connection_closed(self.close_code)
        try:
            message = await self._ws.receive()
        except WebSocketDisconnected:
            self.close_code = self.close_code or 1006
            raise connection_closed(self.close_code) from None
        if message["type"] == "websocket.disconnect":
            self.close_code = int(message.get("code", 1006))
            raise connection_closed(self.close_code, message.get("reason") or "")
        if message.get("bytes") is not None:
            return bytes(message["bytes"])
        return str(message.get("text") or "")

    async def send(self, frame: str | bytes) -> None:
        from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

        if self.close_code is not None:
            raise connection_closed(self.close_code)
        try:
            if isinstance(frame, bytes):
                await self._ws.send_bytes(frame)
            else:
                await self._ws.send_text(frame)
        except (WebSocketDisconnect, WebSocketDisconnected, OSError):
            self.close_code = self.close_code or 1006
            raise connection_closed(self.close_code) from None

    async def close(self, code: int = 1000, reason: str = "") -> None:
        from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

        if self.close_code is not None:
            return
        self.close_code = code
        with contextlib.suppress(WebSocketDisconnect, WebSocketDisconnected, OSError,
                                 RuntimeError):
            await self._ws.close(code, reason)


WebSocketHandler = Callable[[AsgiSocket], Awaitable[None]]


async def accept(websocket: Any, keys: Keys, on_refused: Callable[[], None]
                 ) -> AsgiSocket | None:
    """Check the handshake's key and accept (echoing ``bearer``, never the key beside it:
    browsers close a socket whose handshake omits a subprotocol they offered); None, after an
    HTTP error answer, when refused."""
    from starlette.responses import PlainTextResponse

    offered = [s.strip() for s in websocket.scope.get("subprotocols", [])]
    try:
        key = caller(keys, websocket.headers, dict(websocket.query_params), offered)
    except Refused as refused:
        on_refused()
        await websocket.send_denial_response(
            PlainTextResponse(refused.text, status_code=refused.status))
        return None
    await websocket.accept(subprotocol=BEARER_SUBPROTOCOL if BEARER_SUBPROTOCOL in offered
                           else None)
    return AsgiSocket(websocket, key)


@dataclass
class Listening:
    """A running uvicorn server and the socket it listens on."""

    server: Any
    sock: socket.socket
    loop_task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def stop_listening(self) -> None:
        """Take no new connection; the open ones go on."""
        for server in getattr(self.server, "servers", []):
            server.close()

    async def shutdown(self) -> None:
        self.server.should_exit = True
        if self.loop_task is not None:
            self.loop_task.cancel()
        await self.server.shutdown(sockets=[self.sock])


async def serve(app: Any, host: str, port: int, *, max_message_bytes: int,
                tls: tuple[str, str] | None = None) -> Listening:
    """Start uvicorn with ``app`` on ``host:port`` (0: any free port) in this event loop,
    without taking over its signals (``sottovoce serve`` handles SIGTERM with a drain)."""
    import uvicorn

    config = uvicorn.Config(
        app, host=host, port=port, ws="websockets-sansio", ws_max_size=max_message_bytes,
        ws_max_queue=64, ws_ping_interval=20.0, ws_ping_timeout=20.0, lifespan="off",
        log_level="warning", access_log=False, server_header=False, date_header=False,
        ssl_certfile=tls[0] if tls else None, ssl_keyfile=tls[1] if tls else None,
        timeout_graceful_shutdown=5, proxy_headers=False)
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    sock = config.bind_socket()
    await server.startup(sockets=[sock])
    if server.should_exit:  # uvicorn could not start (it has logged why)
        sock.close()
        raise OSError(f"could not serve on {host}:{port}")
    listening = Listening(server, sock)
    listening.loop_task = asyncio.ensure_future(server.main_loop())
    return listening
