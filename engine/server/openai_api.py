"""OpenAI's audio API on the server: ``POST /v1/audio/transcriptions``,
``POST /v1/audio/translations`` and ``GET /v1/models``, as OpenAI documents them, so the
official SDKs and the many apps built on them work with a ``base_url`` pointing here.

A file goes through the long-file pipeline (`engine.files.transcribe_file`: VAD chunks,
batched decodes, the hallucination checks and retries, stitching) on the server's model, its
decodes queued as file work in the scheduler (`SchedulerRunner`), so live sessions keep their
latency while files are transcribed. ``stream=true`` sends the text as it is decoded, as
server-sent events (``transcript.text.delta`` per segment, then ``transcript.text.done``).

``model``: the server's own model name, or one of OpenAI's names (``whisper-1``...), which
stand for it; any other name is refused with 404 ``model_not_found``. Errors have OpenAI's
shape (``{"error": {"message", "type", "param", "code"}}``) and status codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from engine.errors import AudioDecodeError, EngineError
from engine.languages import language_name
from engine.types import DecodeOptions, Segment, Transcript

log = logging.getLogger(__name__)

# OpenAI's model names that clients send as a matter of course; they stand for the server's
# model (whatever it is), so an app hard-wired to one of them works unchanged.
OPENAI_NAMES = ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe")
FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
DEFAULT_MAX_UPLOAD_BYTES = 100 * 1024 * 1024


class ApiError(Exception):
    """An error answered in OpenAI's shape."""

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 code: str | None = None, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = (
            status, message, param, code, kind)

    def response(self) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse({"error": {"message": self.message, "type": self.kind,
                                       "param": self.param, "code": self.code}},
                            status_code=self.status)


@dataclass(frozen=True)
class FileRequest:
    """One transcription or translation request, checked."""

    task: str
    model: str
    response_format: str = "json"
    language: str | None = None
    prompt: str | None = None
    temperature: float | None = None
    words: bool = False
    stream: bool = False
    granularities: tuple[str, ...] = field(default=())

    def decode_options(self, multilingual: bool) -> DecodeOptions:
        temperatures = (self.temperature,) if self.temperature else DecodeOptions().temperatures
        return DecodeOptions(
            language=self.language if multilingual else "en",
            prompt=self.prompt or None, temperatures=temperatures,
            task=self.task if multilingual else "transcribe",
            word_timestamps=self.words or self.response_format in ("srt", "vtt"))


def parse_request(form: Any, task: str, server_model: str) -> FileRequest:
    """The form's fields as a `FileRequest`; `ApiError` (400/404) for a bad one."""
    model = str(form.get("model") or "").strip()
    if not model:
        raise ApiError(400, "you must provide a model parameter", param="model")
    if model not in (server_model, *OPENAI_NAMES):
        raise ApiError(404, f"the model '{model}' does not exist here; this server has "
                       f"'{server_model}' (also reachable as {', '.join(OPENAI_NAMES)})",
                       param="model", code="model_not_found")
    fmt = str(form.get("response_format") or "json")
    if fmt not in FORMATS:
        raise ApiError(400, f"response_format must be one of {', '.join(FORMATS)}",
                       param="response_format")
    granularities = tuple(str(g) for g in form.getlist("timestamp_granularities[]"))
    if any(g not in ("word", "segment") for g in granularities):
        raise ApiError(400, "timestamp_granularities[] takes 'word' and 'segment'",
                       param="timestamp_granularities[]")
    if granularities and fmt != "verbose_json":
        raise ApiError(400, "timestamp_granularities[] needs response_format=verbose_json",
                       param="timestamp_granularities[]")
    language = str(form.get("language") or "").strip().lower() or None
    if language is not None and (not language.isalpha() or len(language) > 3):
        raise ApiError(400, f"language must be an ISO-639-1 code such as 'en', not "
                       f"'{language}'", param="language")
    temperature = _number(form.get("temperature"), "temperature", 0.0, 1.0)
    stream = str(form.get("stream") or "false").lower() in ("true", "1")
    if stream and fmt not in ("json", "text"):
        raise ApiError(400, "stream=true sends text deltas: use response_format json or text",
                       param="stream")
    return FileRequest(task=task, model=model, response_format=fmt,
                       language=language if task == "transcribe" else None,
                       prompt=str(form.get("prompt") or "") or None, temperature=temperature,
                       words="word" in granularities, stream=stream,
                       granularities=granularities)


def _number(value: Any, name: str, low: float, high: float) -> float | None:
    if value in (None, ""):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ApiError(400, f"{name} must be a number", param=name) from None
    if not low <= number <= high:
        raise ApiError(400, f"{name} must be between {low:g} and {high:g}", param=name)
    return number


def render(request: FileRequest, transcript: Transcript) -> Any:
    """The response in the requested format."""
    from starlette.responses import JSONResponse, PlainTextResponse

    from engine.wire.export import to_srt, to_vtt

    fmt = request.response_format
    if fmt == "text":
        return PlainTextResponse(transcript.text + "\n")
    if fmt == "srt":
        return PlainTextResponse(to_srt(transcript))
    if fmt == "vtt":
        return PlainTextResponse(to_vtt(transcript), media_type="text/vtt")
    if fmt == "json":
        return JSONResponse({"text": transcript.text, "usage": usage(transcript)})
    return JSONResponse(verbose(request, transcript))


def usage(transcript: Transcript) -> dict[str, object]:
    return {"type": "duration", "seconds": round(transcript.duration / 16_000, 3)}


def verbose(request: FileRequest, transcript: Transcript) -> dict[str, object]:
    """OpenAI's ``verbose_json``: the language by name, the duration, the segments with
    their quality figures and, when asked for, the words."""
    body: dict[str, object] = {
        "task": request.task, "language": language_name(transcript.language or "en").lower(),
        "duration": round(transcript.duration / 16_000, 3), "text": transcript.text,
        "segments": [_segment(i, s) for i, s in enumerate(transcript.segments)],
        "usage": usage(transcript)}
    if request.words:
        body["words"] = [{"word": w.text.strip(), "start": round(w.start_s, 3),
                          "end": round(w.end_s, 3)} for w in transcript.words]
    return body


def _segment(index: int, s: Segment) -> dict[str, object]:
    return {"id": index, "seek": 0, "start": round(s.start_s, 3), "end": round(s.end_s, 3),
            "text": s.text, "tokens": [], "temperature": s.temperature,
            "avg_logprob": s.avg_logprob, "compression_ratio": s.compression_ratio,
            "no_speech_prob": s.no_speech_prob}


async def limited_body(receive: Callable[[], Awaitable[dict[str, Any]]], limit: int
                       ) -> Callable[[], Awaitable[dict[str, Any]]]:
    """``receive`` that stops with 413 once the body passes ``limit`` bytes (a declared
    Content-Length is not trusted: the bytes are counted as they arrive)."""
    seen = 0

    async def counted() -> dict[str, Any]:
        nonlocal seen
        message = await receive()
        seen += len(message.get("body", b""))
        if seen > limit:
            raise ApiError(413, f"the upload is over this server's limit of "
                           f"{limit / 2**20:g} MB", param="file", code="file_too_large")
        return message

    return counted


class FileEndpoint:
    """The routes' work, given the server (its runner, scheduler, keys and limits)."""

    def __init__(self, server: Any, max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES) -> None:
        self._server = server
        self._max_upload = max_upload_bytes

    async def models(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        if (refused := self._refused(request)) is not None:
            return refused
        name = self._server.runner.info.name
        return JSONResponse({"object": "list", "data": [
            {"id": model, "object": "model", "created": 0, "owned_by": "sottovoce"}
            for model in (name, *OPENAI_NAMES)]})

    async def transcriptions(self, request: Any) -> Any:
        return await self._file(request, "transcribe")

    async def translations(self, request: Any) -> Any:
        return await self._file(request, "translate")

    def _refused(self, request: Any) -> Any:
        from engine.server.asgi import Refused

        try:
            self._server.authorize(request)
        except Refused as refused:
            code = "invalid_api_key" if refused.status == 401 else None
            return ApiError(refused.status, refused.text.strip(), code=code,
                            kind="invalid_request_error").response()
        return None

    async def _file(self, request: Any, task: str) -> Any:
        from starlette.exceptions import HTTPException
        from starlette.requests import Request

        from engine.server.asgi import Refused

        try:
            key = self._server.authorize(request)
        except Refused:
            return self._refused(request)
        limit = min(self._max_upload, key.max_upload_bytes or self._max_upload) if key else \
            self._max_upload
        path, streaming = None, False
        try:
            declared = int(request.headers.get("content-length") or 0)
            if declared > limit:
                raise ApiError(413, f"the upload is over this server's limit of "
                               f"{limit / 2**20:g} MB", param="file", code="file_too_large")
            body = Request(request.scope, await limited_body(request.receive, limit))
            async with body.form(max_files=1, max_fields=32) as form:
                checked = parse_request(form, task, self._server.runner.info.name)
                upload = form.get("file")
                if upload is None or isinstance(upload, str):
                    raise ApiError(400, "you must provide a file (multipart field 'file')",
                                   param="file")
                path = await asyncio.to_thread(_spool, upload.file)
            refusal = self._server.usage.take_audio(key, await asyncio.to_thread(_seconds, path))
            if refusal is not None:
                raise ApiError(429, refusal, code="rate_limit_exceeded")
            if checked.stream:
                streaming = True  # the stream removes the file when it is done
                return self._stream(path, checked)
            transcript = await self._transcribe(path, checked, None)
            return render(checked, transcript)
        except ApiError as error:
            return error.response()
        except HTTPException as exc:  # a body that is not multipart form data
            return ApiError(400, f"the request must be multipart/form-data: {exc.detail}"
                            ).response()
        finally:
            if path is not None and not streaming:
                _remove(path)

    async def _transcribe(self, path: str, request: FileRequest,
                          on_segment: Callable[[Segment], None] | None) -> Transcript:
        from engine.files import FileOptions, transcribe_file
        from engine.server.scheduler import SchedulerRunner

        info = self._server.runner.info
        runner = SchedulerRunner(self._server.scheduler, asyncio.get_running_loop())
        options = FileOptions.coerce(request.decode_options(info.multilingual))

        def run() -> Transcript:
            job = transcribe_file(path, runner, options)
            for event in job:
                if isinstance(event, Segment) and on_segment is not None:
                    on_segment(event)
            return job.transcript()

        try:
            transcript = await asyncio.to_thread(run)
        except AudioDecodeError as exc:
            raise ApiError(400, f"the file could not be read as audio: {_first_line(exc)}",
                           param="file", code="invalid_file") from None
        except EngineError as exc:
            log.warning("file transcription failed: %s", exc)
            raise ApiError(500, f"transcription failed: {_first_line(exc)}",
                           kind="server_error") from None
        self._server.counters["files"] += 1
        return transcript

    def _stream(self, path: str, request: FileRequest) -> Any:
        from starlette.responses import StreamingResponse

        async def events() -> AsyncIterator[str]:
            loop = asyncio.get_running_loop()
            queue: asyncio.Queue[Segment | None] = asyncio.Queue()

            def on_segment(segment: Segment) -> None:
                loop.call_soon_threadsafe(queue.put_nowait, segment)

            async def transcribe() -> Transcript:
                try:
                    return await self._transcribe(path, request, on_segment)
                finally:
                    queue.put_nowait(None)
                    _remove(path)

            task = asyncio.ensure_future(transcribe())
            while (segment := await queue.get()) is not None:
                if segment.text.strip():
                    yield _sse({"type": "transcript.text.delta", "delta": segment.text})
            try:
                transcript = await task
            except ApiError as error:
                yield _sse({"type": "error", "error": {"message": error.message,
                                                        "code": error.code}})
                return
            yield _sse({"type": "transcript.text.done", "text": transcript.text,
                        "usage": usage(transcript)})

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})


def _sse(data: dict[str, object]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def _spool(source: Any) -> str:
    """The upload in a file of its own (PyAV reads a path; the name is private)."""
    handle, path = tempfile.mkstemp(prefix="sottovoce-upload-")
    with os.fdopen(handle, "wb") as out:
        source.seek(0)
        while chunk := source.read(1 << 20):
            out.write(chunk)
    return path


def _seconds(path: str) -> float:
    """How long the file says it is (0 when it cannot tell: the decode says why)."""
    from engine.audio.decode import open_audio

    try:
        return open_audio(path).expected_samples / 16_000
    except (EngineError, OSError):
        return 0.0


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


def routes(server: Any) -> list[Any]:
    from starlette.routing import Route

    endpoint = FileEndpoint(server, server.options.max_upload_bytes)
    return [Route("/v1/models", endpoint.models),
            Route("/v1/audio/transcriptions", endpoint.transcriptions, methods=["POST"]),
            Route("/v1/audio/translations", endpoint.translations, methods=["POST"])]

