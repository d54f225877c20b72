"""The transcription server: one process, one model, many sessions, one port.

Every WebSocket connection gets a `ServerSession` (VAD -> segmenter -> streaming policy) and a
decode task that sends its requests to the shared `BatchScheduler`. Protocol v1 and
WhisperLive's share the port: the first frame says which (`engine.server.whisperlive`). The
same port answers HTTP (`engine.server.asgi`: Starlette on uvicorn): ``GET /health`` (200 once
the model is loaded, since the port only opens then, and 503 while draining), ``GET /metrics``
(the Prometheus text format, `engine.server.metrics`; /metrics.json or ``Accept:
application/json`` the JSON view), OpenAI's audio API (`engine.server.openai_api`) and the web
page (`engine.server.web`). `drain()` (``sottovoce serve`` on SIGTERM) stops accepting, lets
every session's finals finish, acknowledges them and closes with 1012 so the client
reconnects, through the load balancer, to another replica (docs/deploy.md).

Limits, each answered with an ``error{code}`` frame and a clean close, never a crash:
``max_sessions`` (code ``busy``, close 1013 "try again later"), ``max_frame_bytes``
(``too_large``), ``idle_timeout_s`` (``idle_timeout``: no frame either way for that long), a
per-connection token bucket on audio bytes and on frames (``rate_limited``), protocol
violations (``bad_message`` ...), and the sessions per client, idle-audio and lifetime limits
of `engine.server.limits`. An API key, when set, is required on every route but /health
(`engine.server.asgi` says how it may be sent); it is mandatory when the server binds
anything but loopback.
"""
from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from engine.errors import EngineError, missing_dependency
from engine.server.connection import Connection, KeyedBucket, TokenBucket, close_reason
from engine.server.keys import ApiKey, Keys, KeyUsage
from engine.server.limits import ClientSessions, SessionLimits
from engine.server.metrics import CONTENT_TYPE, Scrape, ServerMetrics
from engine.server.scheduler import BatchScheduler, SchedulerOptions
from engine.server.session import SessionOptions
from engine.server.whisperlive import WhisperLiveConnection
from engine.types import Runner, SpeechScorer
from engine.wire import protocol as p
from engine.wire.whisperlive_server import WlServerConnection, is_whisperlive_options

log = logging.getLogger(__name__)

CLOSE_NORMAL = 1000
CLOSE_POLICY = 1008
CLOSE_TRY_LATER = 1013
BUSY_SNIFF_S = 1.0  # how long a full server waits for a first frame to answer in its protocol
# WhisperLive's WAIT carries minutes until a slot frees; sessions here have no time limit, so
# this is a nominal retry hint, not an estimate.
WAIT_MINUTES = 0.5


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_port(host: str, port: int) -> str:
    """``host:port`` with an IPv6 address in brackets (``[::1]:8765``), as URLs write it."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class ServerOptions:
    """Network, limits and security.

    ``rate_audio_x``: sustained audio rate allowed, in multiples of real time (a reconnecting
    client resends its backlog, so it is above 1); ``burst_audio_s`` is the bucket depth.
    """

    host: str = "127.0.0.1"
    port: int = 8765
    max_sessions: int = 16
    max_frame_bytes: int = 256 * 1024
    idle_timeout_s: float = 30.0
    rate_audio_x: float = 20.0
    burst_audio_s: float = 120.0
    rate_frames_per_s: float = 200.0
    api_key: str | None = None
    api_keys: tuple[ApiKey, ...] = ()  # more keys, each with its limits (`engine.server.keys`)
    tls_cert: str | None = None
    tls_key: str | None = None
    max_upload_bytes: int = 100 * 1024 * 1024  # OpenAI's file endpoints
    scheduler: SchedulerOptions = field(default_factory=SchedulerOptions)
    session: SessionOptions = field(default_factory=SessionOptions)
    limits: SessionLimits = field(default_factory=SessionLimits)  # per client, per session

    def __post_init__(self) -> None:
        if not is_loopback(self.host) and not (self.api_key or self.api_keys):
            raise ValueError(f"binding {self.host} (not loopback) requires an API key")
        if self.max_sessions < 1 or self.max_frame_bytes < 1024:
            raise ValueError("max_sessions must be >= 1 and max_frame_bytes >= 1024")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0-65535 (got {self.port})")
        # NaN compares false with everything: `nan <= 0` let --idle-timeout nan disable reaping.
        if not all(math.isfinite(x) and x > 0 for x in (
                self.idle_timeout_s, self.rate_audio_x, self.burst_audio_s,
                self.rate_frames_per_s)):
            raise ValueError("timeouts and rates must be finite numbers > 0")
        if self.max_upload_bytes < 1:
            raise ValueError("max_upload_bytes must be >= 1")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both a certificate and a key")


class TranscriptionServer:
    """`start()` binds and starts the inference thread; `close()` stops both."""

    def __init__(self, runner: Runner, options: ServerOptions | None = None, *,
                 scorer_factory: Callable[[], SpeechScorer] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options or ServerOptions()
        self.runner = runner
        self.scheduler = BatchScheduler(runner, self.options.scheduler)
        self._scorer_factory = scorer_factory or _default_scorer
        self.clients = ClientSessions(self.options.limits)  # every protocol's sessions
        self._clock = clock
        self._server: Any = None
        self._sessions = 0
        self.counters: dict[str, int] = {"connections": 0, "sessions": 0, "busy": 0,
                                         "errors": 0, "finals": 0, "unauthorized": 0,
                                         "whisperlive": 0, "realtime": 0, "files": 0}
        self.started_at = clock()
        self.prometheus = ServerMetrics(self._scrape)
        self.draining = False
        self._connections: set[Connection] = set()
        self.keys = Keys([*self.options.api_keys, *(
            [ApiKey("default", self.options.api_key)] if self.options.api_key else [])])
        self.usage = KeyUsage(clock)
        self._guarded = self.clients.guard(self._handle)
        self._realtime_guarded = self.clients.guard(self._serve_realtime)

    @property
    def port(self) -> int:
        if self._server is None:
            raise EngineError("server not started")
        return int(self._server.port)

    @property
    def active_sessions(self) -> int:
        return self._sessions

    async def start(self) -> None:
        try:
            from engine.server.asgi import serve
        except ImportError as exc:
            raise missing_dependency("starlette and uvicorn", "server") from exc
        o = self.options
        self.scheduler.start()
        tls = (o.tls_cert, o.tls_key) if o.tls_cert and o.tls_key else None
        try:
            self._server = await serve(self.app(), o.host, o.port,
                                       max_message_bytes=2 * o.max_frame_bytes, tls=tls)
        except BaseException:
            await asyncio.to_thread(self.scheduler.stop)
            raise
        log.info("serving on %s (tls=%s, batching=%s)", host_port(o.host, self.port),
                 o.tls_cert is not None, o.scheduler.max_batch > 1)

    async def close(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            await server.shutdown()
        await asyncio.to_thread(self.scheduler.stop)

    async def drain(self, timeout_s: float = 30.0) -> None:
        """Stop accepting; each live session gets its finals decoded, sent and acknowledged,
        then a 1012 close (the client resends the rest elsewhere); then `close()`. Sessions
        still busy after ``timeout_s`` are closed as `close()` does."""
        self.draining = True
        if self._server is not None:
            self._server.stop_listening()
        live = [asyncio.ensure_future(c.drain()) for c in list(self._connections)]
        log.info("draining %d session(s)", len(live))
        if live:
            _, late = await asyncio.wait(live, timeout=timeout_s)
            for task in late:
                task.cancel()
        await self.close()

    async def serve_forever(self) -> None:
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.close()

    # -- HTTP side ---------------------------------------------------------------------

    def app(self) -> Any:
        """The ASGI application: the HTTP routes and, on every other path, both WebSocket
        protocols (`engine.server.asgi`)."""
        from starlette.applications import Starlette
        from starlette.routing import Route, WebSocketRoute

        from engine.server import openai_api, web

        routes = [Route("/health", self._health), Route("/metrics", self._metrics),
                  Route("/metrics.json", self._metrics),
                  *openai_api.routes(self), *web.routes(),
                  WebSocketRoute("/v1/realtime", self._realtime),
                  WebSocketRoute("/{path:path}", self._websocket)]
        return Starlette(routes=routes)

    def authorize(self, request: Any) -> Any:
        """The caller's `ApiKey` (None on an open server); raises `Refused` when it has none."""
        from engine.server.asgi import Refused, caller

        try:
            return caller(self.keys, request.headers, dict(request.query_params), [])
        except Refused:
            self.counters["unauthorized"] += 1
            raise

    async def _health(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse(self.health(), status_code=503 if self.draining else 200)

    async def _metrics(self, request: Any) -> Any:
        from starlette.responses import JSONResponse, PlainTextResponse, Response

        from engine.server.asgi import Refused

        try:
            self.authorize(request)
        except Refused as refused:
            return PlainTextResponse(refused.text, status_code=refused.status)
        if request.url.path == "/metrics.json" or "application/json" in request.headers.get(
                "accept", ""):
            return JSONResponse(self.metrics())
        return Response(self.prometheus.render(), media_type=CONTENT_TYPE)

    async def _websocket(self, websocket: Any) -> None:
        from engine.server.asgi import accept

        ws = await accept(websocket, self.keys, self._refused)
        if ws is not None:
            await self._keyed(ws, self._guarded)

    async def _keyed(self, ws: Any, serve: Callable[[Any], Any]) -> None:
        """Serve ``ws`` within its key's stream limit."""
        refusal = self.usage.open_stream(ws.key)
        if refusal is not None:
            self.counters["busy"] += 1
            await _refuse(ws, p.BUSY, refusal, CLOSE_TRY_LATER)
            return
        try:
            await serve(ws)
        finally:
            self.usage.close_stream(ws.key)

    def _refused(self) -> None:
        self.counters["unauthorized"] += 1

    def health(self) -> dict[str, object]:
        return {"status": "draining" if self.draining else "ok", "ready": not self.draining,
                "model": self.runner.info.name, "device": self.runner.info.device,
                "sessions": self._sessions, "max_sessions": self.options.max_sessions,
                "protocol": p.PROTOCOL_VERSION}

    def metrics(self) -> dict[str, object]:
        return {**self.health(), "uptime_s": round(self._clock() - self.started_at, 1),
                "counters": dict(self.counters),
                "scheduler": {**self.scheduler.stats.as_dict(), "queued": self.scheduler.waiting},
                "batching": self.options.scheduler.max_batch > 1,
                "limits": self.clients.as_dict()}

    def _scrape(self) -> Scrape:
        """The server's own numbers for /metrics (`engine.server.metrics`)."""
        stats = self.scheduler.stats
        c = self.counters
        return Scrape(
            gauges={"sessions": self._sessions, "max_sessions": self.options.max_sessions,
                    "queue_depth": self.scheduler.waiting, "ready": int(not self.draining),
                    "uptime_seconds": round(self._clock() - self.started_at, 1),
                    "clients": self.clients.clients,
                    "max_sessions_per_client": self.options.limits.per_client},
            counters={"connections": c["connections"], "sessions": c["sessions"],
                      "finals": c["finals"], "batches": stats.batches,
                      "decode_requests": stats.requests, "withdrawn": stats.withdrawn,
                      "batch_decode_seconds": stats.decode_seconds},
            errors={"busy": c["busy"], "unauthorized": c["unauthorized"],
                    "internal": c["errors"], "batch_decode": stats.errors,
                    **{f"limit_{k}": v for k, v in self.clients.counters.items()}})

    # -- WebSocket side ----------------------------------------------------------------

    async def _handle(self, ws: Any) -> None:
        """Both protocols on one port: the first frame says which (`is_whisperlive_options`)."""
        from websockets.exceptions import ConnectionClosed

        self.counters["connections"] += 1
        o = self.options
        full = self._sessions >= o.max_sessions
        if not full:
            self._sessions += 1  # reserved before waiting: a slot is never promised twice
        try:
            try:
                # When full, wait only briefly: a v1 client may not speak before it is answered.
                first = await asyncio.wait_for(ws.recv(), BUSY_SNIFF_S if full
                                               else o.idle_timeout_s)
            except asyncio.TimeoutError:
                first = None
            except ConnectionClosed:
                return
            if full:
                self.counters["busy"] += 1
                await self._refuse_busy(ws, first)
            elif first is None:
                await _refuse(ws, p.IDLE_TIMEOUT, f"no frame for {o.idle_timeout_s:.0f} s",
                              CLOSE_NORMAL)
            else:
                await self._serve(ws, first)
        finally:
            if not full:
                self._sessions -= 1

    async def _refuse_busy(self, ws: Any, first: str | bytes | None) -> None:
        message = f"server busy: {self.options.max_sessions} sessions in use"
        if first is None or not is_whisperlive_options(first):
            await _refuse(ws, p.BUSY, message, CLOSE_TRY_LATER)
            return
        wl = WlServerConnection()
        wl.receive(first)  # for its uid
        await _close_with(ws, [wl.wait(WAIT_MINUTES)], CLOSE_TRY_LATER, message)

    async def _realtime(self, websocket: Any) -> None:
        """OpenAI's Realtime API, transcription sessions only (`engine.server.realtime`)."""
        from engine.server.asgi import accept

        ws = await accept(websocket, self.keys, self._refused)
        if ws is None:
            return
        if websocket.query_params.get("intent") != "transcription":
            await _refuse(ws, p.BAD_MESSAGE, "this server holds transcription sessions only: "
                          "connect with ?intent=transcription", CLOSE_POLICY)
            return
        await self._keyed(ws, self._realtime_guarded)

    async def _serve_realtime(self, ws: Any) -> None:
        from engine.server.realtime import RealtimeConnection

        if self._sessions >= self.options.max_sessions:
            self.counters["busy"] += 1
            await _refuse(ws, p.BUSY, f"server busy: {self.options.max_sessions} sessions in "
                          "use", CLOSE_TRY_LATER)
            return
        self._sessions += 1
        self.counters["realtime"] += 1
        try:
            await self._run(ws, RealtimeConnection(
                ws, self.scheduler, multilingual=self.runner.info.multilingual,
                beta="realtime=v1" in ws.headers.get("openai-beta", ""),
                **self._connection_kwargs(ws, None)))
        finally:
            self._sessions -= 1

    def _connection_kwargs(self, ws: Any, first: str | bytes | None) -> dict[str, Any]:
        o = self.options
        return dict(
            session_options=replace(o.session, policy=o.session.policy.for_model(self.runner.info)),
            scorer=self._scorer_factory(),
            clock=self._clock, max_frame_bytes=o.max_frame_bytes, idle_timeout_s=o.idle_timeout_s,
            audio_bucket=KeyedBucket(rate=o.rate_audio_x * 32_000,
                                     depth=o.burst_audio_s * 32_000, clock=self._clock,
                                     usage=self.usage, key=ws.key),
            frame_bucket=TokenBucket(rate=o.rate_frames_per_s, depth=o.rate_frames_per_s * 2,
                                     clock=self._clock),
            model=self.runner.info.name, languages=self.runner.info.languages,
            counters=self.counters, metrics=self.prometheus, first_frame=first)

    async def _serve(self, ws: Any, first: str | bytes) -> None:
        kwargs = self._connection_kwargs(ws, first)
        connection: Connection
        if is_whisperlive_options(first):
            self.counters["whisperlive"] += 1
            connection = WhisperLiveConnection(ws, self.scheduler,
                                               multilingual=self.runner.info.multilingual,
                                               **kwargs)
        else:
            connection = Connection(ws, self.scheduler, **kwargs)
        await self._run(ws, connection)

    async def _run(self, ws: Any, connection: Connection) -> None:
        self._connections.add(connection)
        try:
            await connection.run()
        except Exception:  # noqa: BLE001 - a connection's top: log, never take the server down
            self.counters["errors"] += 1
            log.exception("connection failed")
            await _refuse(ws, p.INTERNAL, "internal server error", CLOSE_POLICY)
        finally:
            self._connections.discard(connection)


async def _refuse(ws: Any, code: str, message: str, close_code: int) -> None:
    await _close_with(ws, [p.encode_server(p.Error(code=code, message=message))], close_code,
                      message)


async def _close_with(ws: Any, frames: list[str], close_code: int, reason: str) -> None:
    from websockets.exceptions import ConnectionClosed

    try:
        for frame in frames:
            await ws.send(frame)
        await ws.close(close_code, close_reason(reason))
    except ConnectionClosed:
        pass


class ServerThread:
    """Runs a `TranscriptionServer` on its own event loop in a background thread (tests,
    benchmarks, an in-app server). `start()` returns once the port is bound."""

    def __init__(self, server: TranscriptionServer) -> None:
        self.server = server
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: Any = None
        self._stopped: asyncio.Event | None = None

    @property
    def port(self) -> int:
        return self.server.port

    def start(self, timeout: float = 30.0) -> None:
        import threading

        ready = threading.Event()
        errors: list[BaseException] = []

        async def main() -> None:
            self._stopped = asyncio.Event()
            try:
                await self.server.start()
            except BaseException as exc:  # noqa: BLE001 - handed to the starting thread
                errors.append(exc)
                ready.set()
                return
            ready.set()
            await self._stopped.wait()
            await self.server.close()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(main())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="sottovoce-server", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise EngineError("server did not start in time")
        if errors:
            raise errors[0]

    def stop(self, timeout: float = 15.0) -> None:
        if self._loop is None or self._stopped is None or self._thread is None:
            return
        self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(timeout)
        self._thread = None


def _default_scorer() -> SpeechScorer:
    """Silero per session (its state is the session's), the energy detector without it."""
    from engine.vad import default_scorer

    return default_scorer()
