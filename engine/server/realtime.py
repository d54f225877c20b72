"""OpenAI's Realtime API for transcription sessions (``/v1/realtime?intent=transcription``) on
the same session, scheduler and limits as protocol v1.

`RealtimeConnection` is a `Connection` whose protocol hooks speak the Realtime events: the
session starts when the socket opens (``session.created``, or ``transcription_session.created``
for the beta event names), ``session.update`` / ``transcription_session.update`` set the
language and prompt (before the first audio; later changes are refused with an ``error``
event), ``input_audio_buffer.append`` carries base64 PCM16 at the format's rate (24 kHz by
default, as the API sends it), resampled to 16 kHz, and ``input_audio_buffer.commit`` closes
the utterance in flight. The server's VAD finds the turns (``server_vad``), as for our
protocol: each utterance is one conversation item, announced by
``input_audio_buffer.speech_started`` at its first text; the stable (committed) words of its
partials go out as ``conversation.item.input_audio_transcription.delta`` events, and its final
as ``speech_stopped``, ``committed`` and ``...input_audio_transcription.completed`` with the
whole text (which may revise what the deltas said, as OpenAI's own completion may).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from itertools import count
from typing import Any

import numpy as np

from engine.server.connection import CLOSE_POLICY, Connection, _Closing
from engine.wire import protocol as p

log = logging.getLogger(__name__)

RATES = (8000, 16000, 24000, 44100, 48000)


class RealtimeConnection(Connection):
    def __init__(self, ws: Any, *args: Any, multilingual: bool, beta: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(ws, *args, **kwargs)
        self._multilingual = multilingual
        self._beta = beta  # the beta event names (transcription_session.*)
        self._rate = 24000
        self._language: str | None = None if multilingual else "en"
        self._prompt: str | None = None
        self._resampler: Any = None
        self._events = count(1)
        self._sent: dict[int, str] = {}  # utterance -> the text its deltas have said

    # -- frames in ---------------------------------------------------------------------

    async def run(self) -> None:
        await self._send_frames([self._event(self._name("created"), session=self._config())])
        await super().run()

    def _messages(self, frame: str | bytes) -> list[Any]:
        if isinstance(frame, bytes):
            return [_Problem("binary frames are not part of the Realtime API: send "
                             "input_audio_buffer.append events")]
        try:
            event = json.loads(frame)
            kind = event["type"]
        except (ValueError, KeyError, TypeError):
            return [_Problem("each frame must be a JSON event with a 'type'")]
        if kind in ("session.update", "transcription_session.update"):
            return [_Update(event.get("session") or {})]
        if kind == "input_audio_buffer.append":
            return [self._audio(event.get("audio"))]
        if kind == "input_audio_buffer.commit":
            return [p.Flush()] if self._session is not None else []
        if kind == "input_audio_buffer.clear":
            return [_Reply("input_audio_buffer.cleared")]
        return [_Problem(f"event type {kind!r} is not supported by this transcription server")]

    def _audio(self, data: Any) -> Any:
        try:
            pcm = base64.b64decode(str(data), validate=True)
        except (binascii.Error, ValueError):
            return _Problem("input_audio_buffer.append needs base64 audio")
        if len(pcm) % 2:
            return _Problem("PCM16 audio needs an even number of bytes")
        if not self._audio_bucket.take(len(pcm) * 16000 / self._rate):
            raise _Closing(p.RATE_LIMITED, "too much audio too fast", CLOSE_POLICY)
        samples = np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0
        if self._rate != 16000:
            if self._resampler is None:
                from engine.audio.resample import StreamResampler

                self._resampler = StreamResampler(self._rate)
            samples = self._resampler.process(samples)
        return _Samples(samples)

    async def _dispatch(self, message: Any) -> bool:
        if isinstance(message, _Problem):
            await self._send_frames([self._error(message.text)])
            return False
        if isinstance(message, _Reply):
            await self._send_frames([self._event(message.kind)])
            return False
        if isinstance(message, _Update):
            await self._update(message.session)
            return False
        if self._session is None:
            hello = p.Hello(session_id=f"realtime-{id(self):x}", language=self._language,
                            prompt=self._prompt)
            self._check_session(hello)
            self._start_session(hello)
        session = self._session
        assert session is not None
        if isinstance(message, _Samples):
            await self._send(session.feed_samples(message.samples))
            self._withdraw_stale(session)
            self._wake.set()
            return False
        return await super()._dispatch(message)

    async def _update(self, update: dict[str, Any]) -> None:
        audio = update.get("audio", {}).get("input", {}) if isinstance(
            update.get("audio"), dict) else {}
        transcription = audio.get("transcription") or update.get(
            "input_audio_transcription") or {}
        fmt = audio.get("format") or update.get("input_audio_format")
        language = (transcription.get("language") or "").strip().lower() or None
        prompt = transcription.get("prompt") or None
        rate = fmt.get("rate", 24000) if isinstance(fmt, dict) else 24000
        if fmt not in (None, "pcm16") and not (isinstance(fmt, dict) and fmt.get("type") in (
                None, "audio/pcm") and rate in RATES):
            await self._send_frames([self._error(
                "only PCM16 audio is supported (format audio/pcm at 8, 16, 24, 44.1 or 48 kHz)",
                param="session.audio.input.format")])
            return
        if self._session is not None and (language, prompt, rate) != (
                self._language, self._prompt, self._rate):
            await self._send_frames([self._error(
                "the language, prompt and audio format are set before the first audio")])
            return
        if not self._multilingual and language not in (None, "en"):
            await self._send_frames([self._error(
                f"language {language!r} is not available: the model {self._model!r} is "
                "English-only", param="session.audio.input.transcription.language")])
            return
        self._language = language if self._multilingual else "en"
        self._prompt, self._rate = prompt, int(rate)
        await self._send_frames([self._event(self._name("updated"), session=self._config())])

    # -- frames out --------------------------------------------------------------------

    def _encode(self, message: p.ServerMessage) -> list[str]:
        if isinstance(message, p.Partial):
            return self._deltas(message.utterance_id, message.start, message.committed)
        if isinstance(message, p.Final):
            item = self._item(message.utterance_id)
            frames = self._deltas(message.utterance_id, message.start, message.text)
            self._sent.pop(message.utterance_id, None)
            return [*frames,
                    self._event("input_audio_buffer.speech_stopped", item_id=item,
                                audio_end_ms=message.end // 16),
                    self._event("input_audio_buffer.committed", item_id=item,
                                previous_item_id=None),
                    self._event("conversation.item.input_audio_transcription.completed",
                                item_id=item, content_index=0, transcript=message.text.strip())]
        if isinstance(message, p.Error):
            return self._closing_frames(message.code, message.message)
        return []  # ready, ack, bye: the Realtime API has no such events

    def _deltas(self, utterance: int, start: int, text: str) -> list[str]:
        """The words ``text`` adds to what this item's deltas said (none when it revises
        them: a delta cannot take words back; the completion has the whole text)."""
        frames = []
        said = self._sent.get(utterance)
        if said is None:
            said = self._sent[utterance] = ""
            frames.append(self._event("input_audio_buffer.speech_started",
                                      item_id=self._item(utterance), audio_start_ms=start // 16))
        text = text.strip()
        if text.startswith(said) and len(text) > len(said):
            delta = text[len(said):]
            self._sent[utterance] = text
            frames.append(self._event("conversation.item.input_audio_transcription.delta",
                                      item_id=self._item(utterance), content_index=0,
                                      delta=delta if said else delta.lstrip()))
        return frames

    def _closing_frames(self, code: str, message: str) -> list[str]:
        return [self._error(message, code=code)]

    def _error(self, message: str, *, code: str | None = None, param: str | None = None) -> str:
        return self._event("error", error={"type": "invalid_request_error", "code": code,
                                           "message": message, "param": param})

    def _event(self, kind: str, **fields: Any) -> str:
        return json.dumps({"type": kind, "event_id": f"event_{next(self._events)}", **fields})

    def _name(self, what: str) -> str:
        return f"transcription_session.{what}" if self._beta else f"session.{what}"

    def _item(self, utterance: int) -> str:
        return f"item_{id(self):x}_{utterance}"

    def _config(self) -> dict[str, Any]:
        transcription = {"model": self._model, "language": self._language,
                         "prompt": self._prompt or ""}
        return {"type": "transcription", "object": "realtime.transcription_session",
                "audio": {"input": {"format": {"type": "audio/pcm", "rate": self._rate},
                                    "transcription": transcription,
                                    "turn_detection": {"type": "server_vad"}}}}


class _Problem:
    def __init__(self, text: str) -> None:
        self.text = text


class _Reply:
    def __init__(self, kind: str) -> None:
        self.kind = kind


class _Update:
    def __init__(self, session: dict[str, Any]) -> None:
        self.session = session


class _Samples:
    def __init__(self, samples: Any) -> None:
        self.samples = samples
