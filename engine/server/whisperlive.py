"""A WhisperLive client's connection: the same session, scheduler and limits as protocol v1,
with WhisperLive's frames on the wire.

`WhisperLiveConnection` is a `Connection` whose protocol hooks speak WhisperLive
(`engine.wire.whisperlive_server`): the options frame becomes a ``hello`` (language, prompt
from ``initial_prompt``, vocabulary from ``hotwords``, task, VAD thresholds), float32/int16/uint8 frames become
audio and ``END_OF_AUDIO`` becomes ``end`` (decode what is pending, send it, close). The
session's partials and finals become ``segments`` lists (`SegmentWindow`); limits end with
``ERROR`` (``DISCONNECT`` for the idle limit, as WhisperLive's time limit does).

WhisperLive clients never say where speech ends and stream files with no trailing silence, so a
stall mid-utterance (no audio for ``same_output_threshold`` x 100 ms, at least 0.5 s) closes the
utterance: WhisperLive completes a segment once its text has repeated that many times.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from engine.core.policy import Job
from engine.server.connection import Connection
from engine.server.session import SessionOptions
from engine.types import Transcript
from engine.wire import protocol as p
from engine.wire import whisperlive_server as wls

log = logging.getLogger(__name__)


class WhisperLiveConnection(Connection):
    def __init__(self, ws: Any, *args: Any, multilingual: bool, **kwargs: Any) -> None:
        super().__init__(ws, *args, **kwargs)
        self._wl = wls.WlServerConnection()
        self._multilingual = multilingual
        self._window = wls.SegmentWindow()
        self._options: wls.WlOptions | None = None
        self._detect_language = False

    # -- frames in ---------------------------------------------------------------------

    def _protocol_open(self) -> bool:
        return self._wl.state not in ("failed", "ended")

    def _audio_cost(self, frame: bytes) -> float:
        width = wls.AUDIO_FORMATS[self._options.audio_format if self._options else "float32"][1]
        return len(frame) / width * 2  # charged as 16-bit PCM, like protocol v1

    def _messages(self, frame: str | bytes) -> list[Any]:
        out: list[Any] = []
        for message in self._wl.receive(frame):
            if isinstance(message, wls.WlOptions):
                self._options = message
                out.append(self._hello(message))
            elif isinstance(message, wls.WlAudio):
                out.append(_FloatAudio(message.samples))
            elif isinstance(message, wls.WlEnd):
                out.append(p.End())
            else:
                out.append(message)
        return out

    def _hello(self, options: wls.WlOptions) -> p.Hello:
        language = options.language
        if not self._multilingual:  # as WhisperLive does for a ".en" model
            language = "en"
        return p.Hello(session_id=options.uid, language=language, prompt=options.prompt,
                       vocabulary=options.vocabulary)

    async def _dispatch(self, message: Any) -> bool:
        if isinstance(message, _FloatAudio):
            session = self._session
            assert session is not None  # audio comes only after the options
            await self._send(session.feed_samples(message.samples))
            self._withdraw_stale(session)
            self._wake.set()
            return False
        return await super()._dispatch(message)

    async def _on_hello(self, hello: p.Hello) -> None:
        options = self._options
        assert options is not None
        self._check_session(hello)
        warnings = list(options.warnings)
        session_options = self._session_options
        if options.model and options.model != self._model:
            warnings.append(f"model {options.model!r} is not loaded here: this server "
                            f"transcribes with {self._model!r} for every client")
        if options.language and hello.language != options.language:
            warnings.append(f"language {options.language!r} is not available: the model "
                            f"{self._model!r} is English-only")
        if options.task == "translate":
            if self._multilingual:
                session_options = replace(session_options, policy=replace(
                    session_options.policy, task="translate"))
            else:
                warnings.append(f"task 'translate' is not available: the model {self._model!r}"
                                " is English-only; transcribing")
        session_options = _with_vad(session_options, options.vad, warnings)
        self._window = wls.SegmentWindow(options.send_last_n_segments, options.word_timestamps)
        self._stall_s = max(0.5, options.same_output_threshold * 0.1)
        self._detect_language = hello.language is None
        frames = [self._wl.status("WARNING", w) for w in warnings]
        for warning in warnings:
            log.warning("WhisperLive client %s: %s", options.uid, warning)
        await self._send_frames([*frames, self._wl.ready(self._model)])
        self._start_session(hello, session_options)

    # -- frames out --------------------------------------------------------------------

    def _encode(self, message: p.ServerMessage) -> list[str]:
        if isinstance(message, p.Partial):
            text = " ".join(t for t in (message.committed.strip(), message.tentative.strip())
                            if t)
            return [self._wl.segments(self._window.partial(text, message.start, message.end))]
        if isinstance(message, p.Final):
            frames = []
            if self._detect_language and message.language:
                self._detect_language = False
                frames.append(self._wl.language(message.language, None))
            segments = self._window.final(message.text, message.start, message.end,
                                          message.words)
            return [*frames, self._wl.segments(segments)]
        if isinstance(message, p.Error):
            return self._closing_frames(message.code, message.message)
        return []  # ack, bye, ready: WhisperLive has no such messages

    def _closing_frames(self, code: str, message: str) -> list[str]:
        if code == p.IDLE_TIMEOUT:
            return [self._wl.disconnect()]
        return [self._wl.status("ERROR", message)]

    def _results(self, job: Job, transcript: Transcript | None,
                 messages: list[p.ServerMessage]) -> list[p.ServerMessage]:
        """``no_speech_thresh``: a final whose every segment the model thinks is not speech
        above the client's threshold is sent empty, as WhisperLive discards such segments."""
        options = self._options
        if options is None or transcript is None or not transcript.segments or min(
                s.no_speech_prob for s in transcript.segments) <= options.no_speech_thresh:
            return messages
        return [replace(m, text="", words=()) if isinstance(m, p.Final) else m
                for m in messages]


class _FloatAudio:
    """Audio as WhisperLive sends it (float samples), handed to the session unconverted."""

    def __init__(self, samples: Any) -> None:
        self.samples = samples


def _with_vad(options: SessionOptions, vad: dict[str, float],
              warnings: list[str]) -> SessionOptions:
    """faster-whisper's VAD options mapped onto the segmenter's (same Silero scores)."""
    if not vad:
        return options
    segmenter = options.segmenter
    changes: dict[str, Any] = {}
    if "threshold" in vad:
        changes["start_threshold"] = vad["threshold"]
        changes["end_threshold"] = vad.get("neg_threshold", max(0.01, vad["threshold"] - 0.15))
    if "min_silence_duration_ms" in vad:
        changes["min_silence_ms"] = int(vad["min_silence_duration_ms"])
    if "max_speech_duration_s" in vad:
        changes["max_ms"] = int(min(30.0, vad["max_speech_duration_s"]) * 1000)
    try:
        return replace(options, segmenter=replace(segmenter, **changes))
    except ValueError as exc:
        warnings.append(f"vad_parameters ignored: {exc}")
        return options
