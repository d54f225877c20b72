"""OpenAI's audio API on our server, driven by the official `openai` SDK (a client nobody here
wrote) over a real loopback socket, with the real tiny.en model on real speech.

The oracle for the text is the same run's plain decode: the same file through
`engine.files.transcribe_file` on the same runner, outside the server."""

from __future__ import annotations

import asyncio
import io
import threading
import urllib.request
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.subtitles import parse_srt, parse_vtt

from engine.asr.ct2_decoder import Ct2Runner
from engine.audio.decode import load_audio
from engine.files import FileOptions, transcribe_file
from engine.server.scheduler import BatchScheduler, SchedulerOptions, SchedulerRunner
from engine.server.server import ServerOptions, ServerThread, TranscriptionServer
from engine.types import DecodeOptions, DecodeRequest, ModelInfo, Transcript

pytestmark = pytest.mark.timeout(300)
KEY = "sk-test-0123456789"


@pytest.fixture(scope="module")
def runner(tiny_transcriber):  # type: ignore[no-untyped-def]
    loaded = Ct2Runner(tiny_transcriber.model)  # shares the session's loaded tiny.en
    loaded.load()
    return loaded


@pytest.fixture(scope="module")
def server(runner: Ct2Runner) -> Iterator[ServerThread]:
    thread = ServerThread(TranscriptionServer(runner, ServerOptions(
        port=0, api_key=KEY, max_upload_bytes=4 * 1024 * 1024)))
    thread.start()
    yield thread
    thread.stop()


def client(server: ServerThread, key: str = KEY) -> Any:
    import openai

    return openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key=key,
                         max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def jfk(shared_audio: Path) -> Path:
    return shared_audio / "jfk-inaugural-1961-excerpt.wav"


def oracle(runner: Ct2Runner, path: Path, words: bool = False) -> Transcript:
    options = FileOptions.coerce(DecodeOptions(language="en", word_timestamps=words))
    return transcribe_file(path, runner, options).transcript()


def test_json_text_and_subtitles_carry_the_plain_decode(server: ServerThread,
                                                        runner: Ct2Runner, jfk: Path) -> None:
    expected = oracle(runner, jfk, words=True).text
    api = client(server)
    with jfk.open("rb") as audio:
        assert api.audio.transcriptions.create(model="whisper-1", file=audio).text == expected
    with jfk.open("rb") as audio:
        text = api.audio.transcriptions.create(model="tiny.en", file=audio,
                                               response_format="text")
    assert text.strip() == expected
    for fmt, parse in (("srt", parse_srt), ("vtt", parse_vtt)):
        with jfk.open("rb") as audio:
            document = api.audio.transcriptions.create(model="whisper-1", file=audio,
                                                       response_format=fmt)
        cues = parse(document)
        assert cues and " ".join(c.text.replace("\n", " ") for c in cues).split() == \
            expected.split()
        assert all(a.start <= a.end <= b.start for a, b in zip(cues, cues[1:], strict=False))


def test_verbose_json_gives_segments_and_words_in_order(server: ServerThread,
                                                        runner: Ct2Runner, jfk: Path) -> None:
    expected = oracle(runner, jfk, words=True)
    with jfk.open("rb") as audio:
        result = client(server).audio.transcriptions.create(
            model="whisper-1", file=audio, response_format="verbose_json",
            timestamp_granularities=["word", "segment"])
    assert result.language == "english" and result.text == expected.text
    assert abs(result.duration - len(load_audio(jfk)) / 16_000) < 0.01
    assert [w.word for w in result.words] == [w.text.strip() for w in expected.words]
    starts = [w.start for w in result.words]
    assert starts == sorted(starts) and all(w.start <= w.end for w in result.words)
    assert result.segments and result.segments[0].start <= result.words[0].start


def test_a_translation_of_english_speech_is_its_text(server: ServerThread, runner: Ct2Runner,
                                                     jfk: Path) -> None:
    """tiny.en is English-only: English in, English out (a multilingual model translates)."""
    with jfk.open("rb") as audio:
        result = client(server).audio.translations.create(model="whisper-1", file=audio)
    assert result.text == oracle(runner, jfk).text


def test_streaming_sends_deltas_then_the_whole_text(server: ServerThread, runner: Ct2Runner,
                                                    shared_audio: Path, manifest,  # type: ignore[no-untyped-def]
                                                    tmp_path: Path) -> None:
    """A file of several chunks (two clips with a pause between) streams one delta per
    segment as it is decoded, then ``transcript.text.done`` with the whole text."""
    names = ("jfk-inaugural-1961-excerpt.wav", "ls-tc-1995-1837-0001.wav")
    clips = [load_audio(shared_audio / name) for name in names]
    reference = " ".join([next(e.text for e in manifest if e.path.name == n) for n in names] * 2)
    pause = np.zeros(16_000, dtype=np.float32)
    path = write_wav(tmp_path / "two.wav", np.concatenate([clips[0], pause, clips[1]] * 2))
    with path.open("rb") as audio:
        stream = client(server).audio.transcriptions.create(model="whisper-1", file=audio,
                                                            stream=True)
        events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[-1] == "transcript.text.done" and kinds.count("transcript.text.done") == 1
    deltas = [e.delta for e in events if e.type == "transcript.text.delta"]
    assert len(deltas) >= 2
    done = events[-1].text
    assert "".join(deltas).split() == done.split()
    plain = oracle(runner, path).text
    from bench.evaluation import error_rate

    # Batched with other work, a chunk can take another path at one word, and through the
    # prompt at the next few (a 13-point difference from the plain decode under load): the
    # streamed text reads the speech as well as the plain decode does, within 5 points.
    assert error_rate([reference], [done]) <= error_rate([reference], [plain]) + 0.05, \
        (reference, plain, done)


def test_refusals_have_openai_errors(server: ServerThread, jfk: Path, tmp_path: Path) -> None:
    import openai

    with jfk.open("rb") as audio, pytest.raises(openai.NotFoundError) as unknown:
        client(server).audio.transcriptions.create(model="large-v9", file=audio)
    assert unknown.value.code == "model_not_found" and "tiny.en" in str(unknown.value)
    not_audio = tmp_path / "notes.wav"
    not_audio.write_text("these are my notes, not a recording\n" * 50)
    with not_audio.open("rb") as data, pytest.raises(openai.BadRequestError) as bad:
        client(server).audio.transcriptions.create(model="whisper-1", file=data)
    assert "could not be read as audio" in str(bad.value)
    big = io.BytesIO(b"\0" * (5 * 1024 * 1024))
    big.name = "big.wav"
    with pytest.raises(openai.APIStatusError) as large:
        client(server).audio.transcriptions.create(model="whisper-1", file=big)
    assert large.value.status_code == 413 and "4 MB" in str(large.value)
    with jfk.open("rb") as audio, pytest.raises(openai.AuthenticationError) as wrong:
        client(server, "sk-wrong").audio.transcriptions.create(model="whisper-1", file=audio)
    assert wrong.value.code == "invalid_api_key" and "sk-wrong" not in str(wrong.value)
    with pytest.raises(openai.AuthenticationError):
        client(server, "sk-wrong").models.list()
    import httpx  # no key at all (the SDK will not send a request without one)

    with jfk.open("rb") as audio:
        keyless = httpx.post(f"http://127.0.0.1:{server.port}/v1/audio/transcriptions",
                             files={"file": audio}, data={"model": "whisper-1"}, timeout=60)
    assert keyless.status_code == 401 and keyless.json()["error"]["code"] == "invalid_api_key"
    # The server still serves afterwards, and /health needs no key.
    assert [m.id for m in client(server).models.list()][0] == "tiny.en"
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/health") as health:
        assert health.status == 200


def write_wav(path: Path, audio: np.ndarray) -> Path:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16_000)
        out.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
    return path


class GatedRunner:
    """Records each batch's tags; the first call waits for ``gate`` so the queue fills."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.batches: list[list[object]] = []

    info = ModelInfo(name="gated", device="cpu", compute_type="none", multilingual=False)
    streams = 1
    device = "cpu"

    def load(self) -> None:
        pass

    def decode_batch(self, requests: Any) -> list[Transcript]:
        self.entered.set()
        self.gate.wait(30)
        self.batches.append([r.tag for r in requests])
        return [Transcript(segments=()) for _ in requests]


def test_live_requests_go_before_file_work() -> None:
    """File work queued first still waits for the finals and partials that come after it."""
    runner = GatedRunner()
    scheduler = BatchScheduler(runner, SchedulerOptions(max_batch=8, window_ms=0))  # type: ignore[arg-type]
    scheduler.start()
    audio = np.zeros(1600, dtype=np.float32)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        files = SchedulerRunner(scheduler, loop)
        first = loop.run_in_executor(None, files.decode_batch,
                                     [DecodeRequest(audio, tag="file-0")])
        assert await asyncio.to_thread(runner.entered.wait, 30)  # the file round is taken
        later = loop.run_in_executor(None, files.decode_batch,
                                     [DecodeRequest(audio, tag=f"file-{i}") for i in (1, 2)])
        while scheduler.waiting < 2:
            await asyncio.sleep(0.01)
        live = [scheduler.submit(DecodeRequest(audio, tag="partial")),
                scheduler.submit(DecodeRequest(audio, tag="final"), urgent=True)]
        runner.gate.set()
        await asyncio.gather(first, later, *(t.future for t in live))

    try:
        asyncio.run(scenario())
    finally:
        scheduler.stop()
    order = [tag for batch in runner.batches for tag in batch]
    assert order[0] == "file-0"  # already decoding when the live work came
    assert order[1:3] == ["final", "partial"] and sorted(order[3:]) == ["file-1", "file-2"]
    assert scheduler.stats.kinds["file"].requests == 3


def test_the_realtime_client_gets_deltas_then_completions(server: ServerThread,
                                                          manifest: list[Any]) -> None:
    """The SDK's realtime client in a transcription session streams the JFK clip at 24 kHz in
    real time: each item's stable words come as deltas, then its completion; the completions
    read the clip's sentence (WER with a margin: live decoding is cut at the speaker's pauses)."""
    import openai

    from bench.evaluation import error_rate
    from engine.audio.resample import resample

    clip = next(e for e in manifest if e.path.name.startswith("jfk"))
    audio = resample(load_audio(clip.path), 16_000, 24_000)
    pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()
    step = 2400 * 2  # 100 ms of 24 kHz PCM16

    async def session() -> list[Any]:
        import base64

        api = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key=KEY,
                                 max_retries=0)
        events: list[Any] = []
        async with api.realtime.connect(model="gpt-4o-transcribe",
                                        extra_query={"intent": "transcription"}) as connection:
            await connection.send({"type": "session.update", "session": {
                "type": "transcription", "audio": {"input": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "transcription": {"model": "gpt-4o-transcribe", "language": "en"},
                    "turn_detection": {"type": "server_vad"}}}}})

            async def send_audio() -> None:
                for at in range(0, len(pcm), step):
                    await connection.send({"type": "input_audio_buffer.append",
                                           "audio": base64.b64encode(pcm[at:at + step]).decode()})
                    await asyncio.sleep(0.1)  # real time: the pace a microphone gives
                await connection.send({"type": "input_audio_buffer.commit"})

            sender = asyncio.ensure_future(send_audio())
            open_items: set[str] = set()
            while True:
                event = await asyncio.wait_for(connection.recv(), 120)
                events.append(event)
                if event.type == "input_audio_buffer.speech_started":
                    open_items.add(event.item_id)
                elif event.type == "conversation.item.input_audio_transcription.completed":
                    open_items.discard(event.item_id)
                    if sender.done() and not open_items:
                        break
                elif event.type == "error":
                    raise AssertionError(event.error)
            await sender
        return events

    events = asyncio.run(session())
    kinds = [e.type for e in events]
    assert kinds[:2] == ["session.created", "session.updated"], kinds
    completed = [e for e in events
                 if e.type == "conversation.item.input_audio_transcription.completed"]
    deltas = [e for e in events if e.type == "conversation.item.input_audio_transcription.delta"]
    assert completed and deltas
    for item in {e.item_id for e in deltas}:  # an item's deltas all come before its completion
        last_delta = max(i for i, e in enumerate(events) if getattr(e, "item_id", None) == item
                         and e.type.endswith(".delta"))
        done_at = next(i for i, e in enumerate(events) if getattr(e, "item_id", None) == item
                       and e.type.endswith(".completed"))
        assert last_delta < done_at
    text = " ".join(e.transcript for e in completed)
    assert error_rate([clip.text], [text]) <= 0.25, text


def test_realtime_is_for_transcription_sessions_only(server: ServerThread) -> None:
    import json

    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    with connect(f"ws://127.0.0.1:{server.port}/v1/realtime?model=gpt-4o",
                 additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
        error = json.loads(ws.recv(timeout=30))
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=30)
    assert error["type"] == "error" and "intent=transcription" in error["message"]
    assert ws.close_code == 1008
