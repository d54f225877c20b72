"""The WhisperLive link of `RemoteLiveEngine` (``whisperlive://host:port``).

WhisperLive has no acknowledgements and no resume: a completed segment is the only proof that
audio was transcribed, so its end acts as our ``ack`` (the buffer keeps everything after it),
and a reconnect opens a new WhisperLive client (new uid) and resends from there, shifting the
new connection's times by that offset.

End of stream: WhisperLive stops transcribing as soon as it reads ``END_OF_AUDIO`` (the tail
still in its buffer is lost), so after the last sample we wait until its output settles — the
last segment completed, or no new text for ``settle_s`` — and only then send ``END_OF_AUDIO``;
the still-uncompleted text becomes the last final. `sottovoce serve` (its ``SERVER_READY`` says
``server: "sottovoce"``) decodes what it has after ``END_OF_AUDIO`` and then closes, so there
the link reads on until the close (at most ``settle_s``) instead of waiting beforehand.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

from engine.core.sanitize import safe_message
from engine.errors import ConnectionLostError
from engine.events import StateChanged
from engine.remote.link import LinkHost, Timing
from engine.remote.native import MAX_FRAME_SAMPLES, FatalLinkError, NativeLink
from engine.wire import whisperlive_protocol as wl
from engine.wire.protocol import ProtocolViolation, pcm16_to_float

log = logging.getLogger(__name__)

SETTLE_S = 4.0


class WhisperLiveLink(NativeLink):
    """Reuses `NativeLink`'s reconnect loop; only one connection's conversation differs."""

    def __init__(self, engine: LinkHost, *, model: str = "tiny.en",
                 use_vad: bool = False, settle_s: float = SETTLE_S) -> None:
        super().__init__(engine)
        self.model = model
        self.use_vad = use_vad
        self.settle_s = settle_s

    async def _converse(self, ws: Any) -> bool:
        self.connections += 1
        return await _WlSession(self, ws, self.connections).run()


class _WlSession:
    def __init__(self, link: WhisperLiveLink, ws: Any, index: int) -> None:
        self.link = link
        self.engine = link.engine
        self.ws = ws
        self.index = index
        self.protocol = wl.WhisperLiveConnection(uuid.uuid4().hex)
        self.offset = self.engine.buffer.acked
        self.tracker = wl.SegmentTracker(self.offset)
        self.ready = asyncio.Event()
        self.ours = False  # the server is `sottovoce serve` (see the module notes)
        self.closed = asyncio.Event()
        self.activity = asyncio.Event()
        self.segment_id = 0
        self.ending = False

    async def run(self) -> bool:
        o = self.engine.options
        self.engine.send_log.rewind(self.offset)
        # faster-whisper's hotwords, one string: WhisperLive servers that do not know the key
        # ignore it, `sottovoce serve` takes it as the session's vocabulary. There is no update
        # message: a vocabulary set while connected applies from the next connection.
        vocabulary = self.engine.vocabulary
        extra = {"hotwords": ", ".join(vocabulary)} if vocabulary else {}
        await self.ws.send(self.protocol.options(language=o.language, model=self.link.model,
                                                 use_vad=self.link.use_vad, **extra))
        receiver = asyncio.create_task(self._receive_loop())
        sender = asyncio.create_task(self._send_loop())
        try:
            done, _ = await asyncio.wait({receiver, sender},
                                         return_when=asyncio.FIRST_COMPLETED)
            # Whichever finished first decides; its exception (if any) propagates from here.
            return bool((sender if sender in done else receiver).result())
        finally:
            receiver.cancel()
            sender.cancel()

    async def _receive_loop(self) -> bool:
        async for frame in self.ws:
            if not isinstance(frame, str):
                raise FatalLinkError("WhisperLive sent a binary frame")
            for message in self.protocol.receive_text(frame):
                self._handle(message)
        self.closed.set()
        if self.ending:
            await asyncio.Event().wait()  # the send loop finishes the stream; never first
        raise ConnectionLostError("WhisperLive closed the connection")

    async def _send_loop(self) -> bool:
        await self.ready.wait()
        buffer = self.engine.buffer
        position = self.offset
        while True:
            while (piece := buffer.read(position, MAX_FRAME_SAMPLES // 8)) is not None:
                start, samples = piece
                await self.ws.send(self.protocol.audio(pcm16_to_float(samples)))
                position = start + len(samples)
                self.engine.send_log.sent(position, self.engine.now())
            if buffer.closed and position >= buffer.end:
                if self.ours:  # it finishes after END_OF_AUDIO: read its last words
                    self.ending = True
                    await self.ws.send(self.protocol.end())
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self.closed.wait(), self.link.settle_s)
                else:
                    await self._settle()
                    await self.ws.send(self.protocol.end())
                last = self.tracker.finish()
                if last is not None:
                    self._final(last)
                buffer.ack(buffer.end)
                return True
            await self.engine.wait_for_audio()

    async def _settle(self) -> None:
        """Wait until WhisperLive has had its say about the audio already sent."""
        while self.tracker.pending is not None or not self.activity.is_set():
            self.activity.clear()
            try:
                await asyncio.wait_for(self.activity.wait(), self.link.settle_s)
            except asyncio.TimeoutError:
                return

    def _handle(self, message: wl.WlMessage | ProtocolViolation) -> None:
        engine = self.engine
        if isinstance(message, wl.WlReady):
            self.ours = message.server == "sottovoce"
            name = "sottovoce serve" if self.ours else "WhisperLive"
            engine.emit(StateChanged("ready", f"{name} ({safe_message(message.backend, limit=40)})"))
            self.ready.set()
        elif isinstance(message, wl.WlWait):
            raise ConnectionLostError(f"WhisperLive is full; wait {message.minutes:.1f} min")
        elif isinstance(message, wl.WlStatus):
            if message.status == "ERROR":
                raise FatalLinkError(f"WhisperLive error: {safe_message(message.message)}")
            log.warning("WhisperLive: %s", safe_message(message.message))
        elif isinstance(message, wl.WlDisconnect):
            raise ConnectionLostError("WhisperLive disconnected us (time limit)")
        elif isinstance(message, wl.WlSegments):
            self.activity.set()
            finals, partial = self.tracker.update(message.segments)
            for final in finals:
                self._final(final)
            if partial is not None:
                uid = engine.utterance(self.index, self.segment_id)
                engine.on_partial(uid, "", partial.text, partial.start,
                                  self._timing(partial.end, partial.end - partial.start))
        elif isinstance(message, ProtocolViolation):
            raise FatalLinkError(message.message)

    def _final(self, final: wl.TrackedFinal) -> None:
        engine = self.engine
        uid = engine.utterance(self.index, self.segment_id)
        self.segment_id += 1
        engine.on_final(uid, final.text, (), final.start, final.end,
                        self._timing(final.end, final.end - final.start), None)
        engine.buffer.ack(final.end)

    def _timing(self, end: int, samples: int) -> Timing:
        sent_at = self.engine.send_log.time_of(end)
        rtt = (self.engine.now() - sent_at) * 1000 if sent_at is not None else 0.0
        # WhisperLive does not report its own time: network and decode cannot be told apart.
        return Timing(rtt_ms=max(rtt, 0.0), server_ms=None, decode_ms=0.0,
                      audio_ms=samples * 1000 / 16_000)
