"""The native protocol link of `RemoteLiveEngine` (``ws://`` / ``wss://``).

The only client module importing ``websockets`` for the native protocol (lazily). One
`_Session` per connection: hello with ``offset`` = the last acknowledged position, then the
unacknowledged audio again, then live audio; ``ack`` lets the buffer forget; ``end`` once the
capture has finished and everything is sent; ``bye`` ends the stream. A dropped connection,
a refused handshake or a "busy" server is retried with exponential backoff; a wrong API key,
a certificate that fails verification or a protocol violation is not (retrying cannot fix them).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

from engine.core.sanitize import safe_message
from engine.errors import ConnectionLostError, EngineError, missing_dependency
from engine.events import EngineFailed, StateChanged
from engine.remote.link import LinkHost, Timing
from engine.wire import protocol as p

log = logging.getLogger(__name__)

MAX_FRAME_SAMPLES = 32_000  # resends are coalesced into frames of up to 2 s (64 KiB)
KEEPALIVE_S = 10.0  # well under the server's default 30 s idle timeout
RETRYABLE_ERRORS = (p.BUSY, p.IDLE_TIMEOUT, p.INTERNAL, p.RATE_LIMITED, p.SESSION_EXPIRED)


class FatalLinkError(EngineError):
    """Retrying cannot help (wrong key, bad certificate, protocol mismatch)."""


class NativeLink:
    def __init__(self, engine: LinkHost) -> None:
        self.engine = engine
        self.connections = 0

    async def run(self) -> EngineFailed | None:
        try:
            import websockets  # noqa: F401 - presence check
        except ImportError as exc:
            raise missing_dependency("websockets", "client") from exc
        o = self.engine.options
        failures = 0
        ending_since: float | None = None
        while True:
            try:
                progress = await self._connect_once()
                if progress is None:
                    return None  # bye: done
                failures = 0 if progress else failures + 1
            except FatalLinkError as exc:
                return EngineFailed(str(exc), recoverable=False)
            except (OSError, asyncio.TimeoutError, EngineError, _websocket_errors()) as exc:
                failures += 1
                log.info("connection to %s lost: %s", self.engine.endpoint.url, exc)
            if failures > o.max_reconnects:
                return EngineFailed(f"server {self.engine.endpoint.url} unreachable after "
                                    f"{failures} attempts", recoverable=False)
            if self.engine.buffer.closed:
                ending_since = ending_since or self.engine.now()
                if self.engine.now() - ending_since > o.end_timeout_s:
                    return EngineFailed("the server did not finish in time; the end of the "
                                        "recording was not transcribed", recoverable=False)
            delay = min(o.backoff_max_s, o.backoff_initial_s * 2 ** max(0, failures - 1))
            self.engine.emit(StateChanged("reconnecting", f"retrying in {delay:.1f} s"))
            await asyncio.sleep(delay)

    async def _connect_once(self) -> bool | None:
        """One connection. None when the server said bye; else whether any audio was acked."""
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidStatus

        headers = {"Authorization": f"Bearer {self.engine.api_key}"} if self.engine.api_key else {}
        acked_before = self.engine.buffer.acked
        try:
            ws = await connect(self.engine.endpoint.url, additional_headers=headers,
                               open_timeout=self.engine.options.connect_timeout_s,
                               max_size=1 << 20, ping_interval=20, ping_timeout=20)
        except ssl.SSLCertVerificationError as exc:
            # An OSError, so it would be retried for minutes; a bad certificate stays bad.
            raise FatalLinkError(
                f"the server's TLS certificate was rejected ({exc.verify_message or exc}); "
                f"check {self.engine.endpoint.url} or trust its certificate") from exc
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status in (401, 403):
                raise FatalLinkError("the server refused the API key (HTTP "
                                     f"{status}); set it in Settings") from exc
            raise ConnectionLostError(f"handshake refused with HTTP {status}") from exc
        async with ws:
            done = await self._converse(ws)
        if done:
            return None
        return self.engine.buffer.acked > acked_before

    async def _converse(self, ws: Any) -> bool:
        """One connection's conversation: True when the stream finished, False if it dropped."""
        self.connections += 1
        return await _Session(self, ws, self.connections).run()


class _Session:
    def __init__(self, link: NativeLink, ws: Any, index: int) -> None:
        self.link = link
        self.engine = link.engine
        self.ws = ws
        self.index = index
        self.protocol = p.ClientConnection()
        self.vocabulary: tuple[str, ...] = ()  # the last one sent on this connection
        self.gave_up = False  # the server did not answer ``end`` in time
        self._deadline: asyncio.TimerHandle | None = None
        self._closing: asyncio.Future[None] | None = None

    async def run(self) -> bool:
        """True when the stream finished with bye; False when the connection dropped."""
        offset = self.engine.buffer.acked
        o = self.engine.options
        self.vocabulary = self.engine.vocabulary
        hello = p.Hello(session_id=self.engine.session_id, language=o.language,
                        prompt=o.prompt, offset=offset, vocabulary=self.vocabulary)
        self.engine.send_log.rewind(offset)
        await self.ws.send(self.protocol.hello(hello))
        sender = asyncio.create_task(self._send_loop(offset))
        try:
            async for frame in self.ws:
                messages = (self.protocol.receive_text(frame) if isinstance(frame, str)
                            else self.protocol.receive_bytes(frame))
                for message in messages:
                    if self._handle(message):
                        return True
            if self.gave_up:
                raise FatalLinkError("the server did not finish in time; the end of the "
                                     "recording was not transcribed")
            return False
        finally:
            sender.cancel()
            if self._deadline is not None:
                self._deadline.cancel()

    async def _send_loop(self, position: int) -> None:
        buffer = self.engine.buffer
        sent_flushes: set[int] = set()
        end_sent = False
        while True:
            if self.engine.vocabulary != self.vocabulary:
                self.vocabulary = self.engine.vocabulary
                await self.ws.send(self.protocol.vocabulary(self.vocabulary))
            while (piece := buffer.read(position, MAX_FRAME_SAMPLES)) is not None:
                start, samples = piece
                if start != position:
                    log.warning("audio %d..%d was dropped before it was sent", position, start)
                    # The protocol has no gaps: the server sees the later audio as contiguous.
                await self.ws.send(self.protocol.audio(samples))
                position = start + len(samples)
                self.engine.send_log.sent(position, self.engine.now())
                for flush in buffer.flushes_after(0):
                    if flush <= position and flush not in sent_flushes:
                        sent_flushes.add(flush)
                        await self.ws.send(self.protocol.flush())
            if buffer.closed and position >= buffer.end and not end_sent:
                end_sent = True
                await self.ws.send(self.protocol.end())
                # A server that never answers must not hold the stop forever.
                self._deadline = asyncio.get_running_loop().call_later(
                    self.engine.options.end_timeout_s, self._give_up)
            try:
                await asyncio.wait_for(self.engine.wait_for_audio(), KEEPALIVE_S)
            except asyncio.TimeoutError:
                # Push-to-talk sends nothing between presses; keep the server's idle timer
                # from closing a session the user still holds.
                await self.ws.send(self.protocol.keepalive())

    def _give_up(self) -> None:
        self.gave_up = True
        self._closing = asyncio.ensure_future(self.ws.close())  # ends the receive loop

    def _handle(self, message: p.ServerMessage | p.ProtocolViolation) -> bool:
        engine = self.engine
        if isinstance(message, p.Ready):
            engine.emit(StateChanged("ready", safe_message(message.model, limit=80)))
        elif isinstance(message, p.Ack):
            engine.buffer.ack(message.upto)
        elif isinstance(message, p.Partial):
            engine.on_partial(engine.utterance(self.index, message.utterance_id),
                              message.committed, message.tentative, message.start,
                              self._timing(message.trigger, message.server_ms, 0.0,
                                           message.end - message.start))
        elif isinstance(message, p.Final):
            engine.on_final(engine.utterance(self.index, message.utterance_id), message.text,
                            message.words, message.start, message.end,
                            self._timing(message.trigger, message.server_ms,
                                         message.decode_ms, message.end - message.start),
                            message.language)
        elif isinstance(message, p.Bye):
            engine.buffer.ack(message.upto)
            return True
        elif isinstance(message, p.Error):
            if message.code in RETRYABLE_ERRORS:
                raise ConnectionLostError(
                    f"server: {safe_message(message.code, limit=40)}: {safe_message(message.message)}")
            raise FatalLinkError(f"server error {safe_message(message.code, limit=40)}: "
                                 f"{safe_message(message.message)}")
        else:
            raise FatalLinkError(f"protocol error from the server: {safe_message(message.message)}")
        return False

    def _timing(self, trigger: int, server_ms: float, decode_ms: float, samples: int) -> Any:
        sent_at = self.engine.send_log.time_of(trigger)
        rtt = (self.engine.now() - sent_at) * 1000 if sent_at is not None else server_ms
        return Timing(rtt_ms=max(rtt, 0.0), server_ms=server_ms, decode_ms=decode_ms,
                      audio_ms=samples * 1000 / 16_000)


def _websocket_errors() -> type[Exception]:
    from websockets.exceptions import WebSocketException

    return WebSocketException
