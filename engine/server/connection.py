"""One WebSocket connection on the server: frames -> protocol -> session -> scheduler -> frames.

Two tasks per connection: the receive loop (this coroutine) feeds audio to the session and
enforces the limits; the decode task sends the session's requests to the scheduler one at a
time (the policy keeps at most one in flight, so a slow server decodes less often rather than
queueing) and sends back what they produce; finals go to the scheduler as urgent. When audio
ends the utterance of a partial that is still queued, the receive loop withdraws that partial:
its text would be thrown away, and the final cannot be asked for while it is out. ``end`` waits
for the decode task to drain, then sends the last ``ack`` and ``bye``.

The wire format sits behind a few hooks (``_messages``, ``_encode``, ``_on_hello``...):
`engine.server.whisperlive` overrides them to serve WhisperLive clients with all the rest.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Any

from engine.core.policy import Job
from engine.errors import EngineError
from engine.server.metrics import ServerMetrics
from engine.server.scheduler import BatchScheduler, Ticket
from engine.server.session import ServerSession, SessionOptions, language_problem
from engine.types import SpeechScorer, Transcript
from engine.wire import protocol as p

log = logging.getLogger(__name__)

CLOSE_NORMAL = 1000
CLOSE_POLICY = 1008
CLOSE_TOO_BIG = 1009
CLOSE_SERVICE_RESTART = 1012  # the server is going away on purpose: reconnect (elsewhere)


CLOSE_REASON_BYTES = 120  # RFC 6455: a close reason is at most 123 bytes of UTF-8


def close_reason(message: str) -> str:
    """``message`` cut to fit a close frame, by bytes and on a character boundary: cutting by
    characters let a client's echoed non-ASCII value overflow the frame and crash the close."""
    return message.encode("utf-8")[:CLOSE_REASON_BYTES].decode("utf-8", "ignore")


class TokenBucket:
    """Classic token bucket: ``rate`` tokens per second, at most ``depth`` saved up."""

    reason = "too much data too fast"  # what a refusal says

    def __init__(self, rate: float, depth: float, clock: Callable[[], float]) -> None:
        self._rate = rate
        self._depth = depth
        self._tokens = depth
        self._clock = clock
        self._last = clock()

    def take(self, amount: float) -> bool:
        now = self._clock()
        self._tokens = min(self._depth, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if amount > self._tokens:
            return False
        self._tokens -= amount
        return True


class KeyedBucket(TokenBucket):
    """A connection's audio bucket that also charges its API key's audio budget
    (`engine.server.keys.KeyUsage`); ``reason`` says which of the two refused."""

    def __init__(self, rate: float, depth: float, clock: Callable[[], float], usage: Any,
                 key: Any) -> None:
        super().__init__(rate, depth, clock)
        self._usage, self._key = usage, key

    def take(self, amount: float) -> bool:
        if not super().take(amount):
            self.reason = TokenBucket.reason
            return False
        refusal = self._usage.take_audio(self._key, amount / 32_000)  # 16-bit bytes
        if refusal is not None:
            self.reason = refusal
            return False
        return True


class _Closing(Exception):
    """Raised inside the receive loop to end the connection with an error frame."""

    def __init__(self, code: str, message: str, close_code: int) -> None:
        super().__init__(message)
        self.code, self.message, self.close_code = code, message, close_code


class Connection:
    def __init__(self, ws: Any, scheduler: BatchScheduler, *, session_options: SessionOptions,
                 scorer: SpeechScorer, clock: Callable[[], float], max_frame_bytes: int,
                 idle_timeout_s: float, audio_bucket: TokenBucket, frame_bucket: TokenBucket,
                 model: str, counters: dict[str, int],
                 first_frame: str | bytes | None = None,
                 metrics: ServerMetrics | None = None,
                 languages: tuple[str, ...] = ()) -> None:
        self._ws = ws
        self._first_frame = first_frame  # read by the server to tell the protocols apart
        self._scheduler = scheduler
        self._session_options = session_options
        self._scorer = scorer
        self._clock = clock
        self._max_frame = max_frame_bytes
        self._idle = idle_timeout_s
        self._audio_bucket = audio_bucket
        self._frame_bucket = frame_bucket
        self._model = model
        self._languages = languages  # what the model decodes (ModelInfo.languages)
        self._counters = counters
        self._protocol = p.ServerConnection()
        self._session: ServerSession | None = None
        self._wake = asyncio.Event()
        self._decoder: asyncio.Task[None] | None = None
        self._queued: tuple[Job, Ticket] | None = None  # the request out, if any
        self._ending = False
        # No frame for this long while an utterance is open closes it (WhisperLive clients
        # never say where speech ends); None: only silence, ``flush`` or ``end`` close one.
        self._stall_s: float | None = None
        self._draining = False
        self._metrics = metrics or ServerMetrics()
        self._sent_at = -math.inf  # (loop time) when the last frame went out

    async def run(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            await self._receive_loop()
        except _Closing as closing:
            self._metrics.error(closing.code)
            await self._send_frames(self._closing_frames(closing.code, closing.message))
            await self._ws.close(closing.close_code, close_reason(closing.message))
        except ConnectionClosed:
            log.info("client went away")
        finally:
            self._stop_decoding()

    def _stop_decoding(self) -> None:
        if self._queued is not None:  # nobody will read it: do not spend a decode on it
            self._scheduler.withdraw(self._queued[1])
        if self._decoder is not None and not self._decoder.done():
            self._decoder.cancel()

    async def _receive_loop(self) -> None:
        while self._protocol_open():
            frame = await self._next_frame()
            size = len(frame)
            if size > self._max_frame:
                raise _Closing(p.TOO_LARGE, f"frame of {size} bytes; the limit is "
                               f"{self._max_frame}", CLOSE_TOO_BIG)
            if not self._frame_bucket.take(1) or (
                    isinstance(frame, bytes) and not self._audio_bucket.take(
                        self._audio_cost(frame))):
                raise _Closing(p.RATE_LIMITED, self._audio_bucket.reason if isinstance(
                    frame, bytes) else "too much data too fast", CLOSE_POLICY)
            for message in self._messages(frame):
                if await self._dispatch(message):
                    return

    async def _next_frame(self) -> str | bytes:
        """The next frame. The idle limit ends the connection when neither side has sent a
        frame for that long: a client waiting for the results of the audio it sent is not idle
        (WhisperLive's client sends END_OF_AUDIO only 15 s after the last result it got, and a
        busy server's last result may come seconds after the last audio), nor is one whose
        decode is still out (a final took over 30 s on a 2-core machine at load 14). A stall
        (no frame while an utterance is open) closes the utterance."""
        if self._first_frame is not None:
            frame, self._first_frame = self._first_frame, None
            return frame
        loop = asyncio.get_running_loop()
        started = loop.time()
        while True:
            left = max(started, self._sent_at) + self._idle - loop.time()
            if left <= 0 and self._queued is not None:
                left = self._idle  # the server owes the client a result: look again later
            elif left <= 0:
                raise _Closing(p.IDLE_TIMEOUT, f"no frame for {self._idle:.0f} s", CLOSE_NORMAL)
            session = self._session
            stall = self._stall_s if session is not None and session.speaking else None
            if stall is not None and stall >= left:
                stall = None
            try:
                received: str | bytes = await asyncio.wait_for(self._ws.recv(), stall or left)
                return received
            except asyncio.TimeoutError:
                pass
            if stall is not None and session is not None:  # stalled mid-utterance: decode
                await self._send(session.flush())
                self._withdraw_stale(session)
                self._wake.set()

    # -- protocol hooks (native v1 here; `engine.server.whisperlive` overrides them) -------

    def _protocol_open(self) -> bool:
        return self._protocol.state not in ("closed", "failed")

    def _audio_cost(self, frame: bytes) -> float:
        """Token-bucket cost of an audio frame, in bytes of 16-bit PCM."""
        return len(frame)

    def _messages(self, frame: str | bytes) -> list[Any]:
        if isinstance(frame, bytes):
            return self._protocol.receive_bytes(frame)
        return self._protocol.receive_text(frame)

    async def _on_hello(self, hello: p.Hello) -> None:
        self._check_session(hello)
        await self._send([p.Ready(session_id=hello.session_id, model=self._model,
                                  offset=hello.offset)])
        self._start_session(hello)

    def _check_session(self, hello: p.Hello) -> None:
        """Refuse, before ``ready``, a session the model cannot serve (its language): that
        client gets ``bad_message`` and the close, and no decode of another session fails."""
        problem = language_problem(hello.language, self._model, self._languages)
        if problem is not None:
            raise _Closing(p.BAD_MESSAGE, problem, CLOSE_POLICY)

    def _encode(self, message: p.ServerMessage) -> list[str]:
        return [p.encode_server(message)]

    def _closing_frames(self, code: str, message: str) -> list[str]:
        return [p.encode_server(p.Error(code=code, message=message))]

    def _results(self, job: Job, transcript: Transcript | None,
                 messages: list[p.ServerMessage]) -> list[p.ServerMessage]:
        """What a decode's messages become before they are sent (a hook: no change here)."""
        return messages

    async def _dispatch(self, message: Any) -> bool:
        """Act on one client message; True when the connection is finished."""
        if isinstance(message, p.ProtocolViolation):
            raise _Closing(message.code, message.message, CLOSE_POLICY)
        if isinstance(message, p.Hello):
            await self._on_hello(message)
            return False
        session = self._session
        assert session is not None  # the protocol object refuses everything before hello
        if self._draining and not isinstance(message, p.Cancel):
            return False  # not acknowledged: the client sends it again to another replica
        if isinstance(message, p.Audio):
            self._metrics.received(len(message.samples) / 16_000)
            await self._send(session.feed(message))
            self._withdraw_stale(session)
            self._wake.set()
        elif isinstance(message, p.Flush):
            await self._send(session.flush())
            self._withdraw_stale(session)
            self._wake.set()
        elif isinstance(message, p.Vocabulary):
            session.set_vocabulary(message.terms)
        elif isinstance(message, p.End):
            await self._finish(session)
            return True
        else:  # Cancel
            session.cancel()
            self._stop_decoding()
            await self._send([p.Bye(upto=session.position)])
            await self._ws.close(CLOSE_NORMAL, "cancelled")
            return True
        return False

    def _start_session(self, hello: p.Hello, options: SessionOptions | None = None) -> None:
        self._session = ServerSession(hello, options or self._session_options, self._scorer,
                                      self._clock)
        self._counters["sessions"] += 1
        self._decoder = asyncio.create_task(self._decode_loop(self._session))
        log.info("session %s opened at %d", hello.session_id, hello.offset)

    def _withdraw_stale(self, session: ServerSession) -> None:
        if self._queued is not None and session.is_stale(self._queued[0]):
            self._scheduler.withdraw(self._queued[1])  # a no-op once it is decoding

    async def _finish(self, session: ServerSession) -> None:
        await self._send(session.flush())
        self._withdraw_stale(session)
        self._ending = True
        self._wake.set()
        if self._decoder is not None:
            await self._decoder
        upto = session.final_ack()
        await self._send([p.Ack(upto=upto), p.Bye(upto=upto)])
        await self._ws.close(CLOSE_NORMAL, "bye")

    async def drain(self) -> None:
        """The server is shutting down: take no more audio, finish the finals of what was
        heard (as ``end`` does), acknowledge it, and close with 1012 instead of ``bye``: the
        client reconnects (to another replica) and resends only what is not acknowledged."""
        self._draining = True
        session = self._session
        if session is not None:
            await self._send(session.flush())
            upto = session.position
            self._withdraw_stale(session)
            self._ending = True
            self._wake.set()
            if self._decoder is not None:
                await self._decoder
            await self._send([p.Ack(upto=upto)])
        await self._ws.close(CLOSE_SERVICE_RESTART, "server draining: reconnect")

    async def _decode_loop(self, session: ServerSession) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while (request := session.next_request()) is not None:
                try:
                    ticket = self._scheduler.submit(request.request,
                                                    urgent=request.kind == "final")
                    self._queued = (request, ticket)
                    transcript = await ticket.future
                except EngineError as exc:
                    self._metrics.error("decode_failed")
                    messages = self._results(request, None,
                                             session.on_failure(request, str(exc)))
                else:
                    self._metrics.observe_decode(request.kind, transcript.decode_ms / 1000,
                                                 len(request.request.audio) / 16_000)
                    messages = self._results(request, transcript,
                                             session.on_result(request, transcript))
                finally:
                    self._queued = None
                self._counters["finals"] += sum(isinstance(m, p.Final) for m in messages)
                await self._send(messages)
            if self._ending and session.idle:
                return

    async def _send(self, messages: list[p.ServerMessage]) -> None:
        await self._send_frames([frame for m in messages for frame in self._encode(m)])

    async def _send_frames(self, frames: list[str]) -> None:
        from websockets.exceptions import ConnectionClosed

        for frame in frames:
            try:
                await self._ws.send(frame)
            except ConnectionClosed:
                return
            self._sent_at = asyncio.get_running_loop().time()
