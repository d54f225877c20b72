"""Several API keys on the server, each with its limits (engine/server/keys.py): the key file,
live streams per key, audio seconds per minute and upload size per key, on every route; the
server with a scripted runner (the limits are about the server, not the model's words)."""

from __future__ import annotations

import json
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engine.asr.fake import ScriptedRunner
from engine.errors import EngineError
from engine.server.keys import ApiKey, KeyUsage, read_key_file
from engine.server.server import ServerOptions, ServerThread, TranscriptionServer

ALICE = ApiKey("alice", "sk-alice-0123456789abcdef", max_streams=1, audio_per_min=20,
               max_upload_bytes=2**20)
BOB = ApiKey("bob", "sk-bob-0123456789abcdefgh")


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    runner = ScriptedRunner(["hello there"])
    thread = ServerThread(TranscriptionServer(runner, ServerOptions(  # type: ignore[arg-type]
        port=0, api_keys=(ALICE, BOB))))
    thread.start()
    yield thread
    thread.stop()


def speech_wav(path: Path, seconds: float) -> Path:
    rng = np.random.default_rng(1)
    audio = 0.1 * np.sin(np.arange(int(seconds * 16_000)) * 0.05) * rng.uniform(0.5, 1, 1)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16_000)
        out.writeframes((audio * 32767).astype("<i2").tobytes())
    return path


def test_the_key_file_is_read_and_its_mistakes_named(tmp_path: Path) -> None:
    good = tmp_path / "keys"
    good.write_text("# users\nalice sk-alice-0123456789abcdef streams=2 upload_mb=25 "
                    "audio_per_min=120\n\nnotes  sk-notes-0123456789abcdef  # no limits\n")
    good.chmod(0o600)
    alice, notes = read_key_file(good)
    assert (alice.name, alice.max_streams, alice.max_upload_bytes, alice.audio_per_min) == (
        "alice", 2, 25 * 2**20, 120.0)
    assert notes == ApiKey("notes", "sk-notes-0123456789abcdef")
    assert "sk-" not in repr(alice)
    cases = {"alice sk-alice-0123456789abcdef streams=x\n": "line 1: 'streams=x' is not",
             "alice sk-short\n": "shorter than 16",
             "a sk-0123456789abcdefgh\na sk-1123456789abcdefgh\n": "line 2",
             "alice sk-alice-0123456789abcdef audio_per_min=-1\n": "must be a number > 0",
             "# nothing\n": "holds no key"}
    for text, message in cases.items():
        bad = tmp_path / "bad"
        bad.write_text(text)
        bad.chmod(0o600)
        with pytest.raises(EngineError, match=message) as error:
            read_key_file(bad)
        assert "0123456789" not in str(error.value)
    good.chmod(0o644)
    with pytest.raises(EngineError, match="chmod 600"):
        read_key_file(good)


def test_audio_per_minute_refills_with_time() -> None:
    now = [0.0]
    usage = KeyUsage(lambda: now[0])
    key = ApiKey("k", "sk-k-0123456789abcdef", audio_per_min=60)
    assert usage.take_audio(key, 50) is None
    assert "retry in 40 s" in str(usage.take_audio(key, 50))
    now[0] = 40.0
    assert usage.take_audio(key, 50) is None
    assert usage.take_audio(None, 1e9) is None and usage.take_audio(BOB, 1e9) is None


def hello(ws: object) -> dict[str, object]:
    ws.send(json.dumps({"type": "hello", "protocol": 1, "session_id": "s"}))  # type: ignore[attr-defined]
    return dict(json.loads(ws.recv(timeout=30)))  # type: ignore[attr-defined]


def test_a_key_holds_at_most_its_streams(server: ServerThread) -> None:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    url = f"ws://127.0.0.1:{server.port}/"
    auth = {"Authorization": f"Bearer {ALICE.secret}"}
    with connect(url, additional_headers=auth) as first:
        assert hello(first)["type"] == "ready"
        with connect(url, additional_headers=auth) as second:
            refused = json.loads(second.recv(timeout=30))
            with pytest.raises(ConnectionClosed):
                second.recv(timeout=30)
        assert refused["code"] == "busy" and "'alice' already has 1 stream" in refused["message"]
        assert second.close_code == 1013
        with connect(url, additional_headers={"Authorization": f"Bearer {BOB.secret}"}) as bob:
            assert hello(bob)["type"] == "ready"  # another key is not held back
    with connect(url, additional_headers=auth) as again:  # the first one's slot is free again
        assert hello(again)["type"] == "ready"


def test_files_count_against_the_key_audio_and_upload_limits(server: ServerThread,
                                                             tmp_path: Path) -> None:
    import openai

    def api(key: ApiKey) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1",
                             api_key=key.secret, max_retries=0, timeout=60)

    fifteen = speech_wav(tmp_path / "fifteen.wav", 15.0)  # 480 KB
    with fifteen.open("rb") as audio:  # (a tone: no speech, so no text; it is served)
        done = api(ALICE).audio.transcriptions.create(model="whisper-1", file=audio)
    assert done.usage is not None and done.usage.seconds == 15.0
    with fifteen.open("rb") as audio, pytest.raises(openai.RateLimitError) as over:
        api(ALICE).audio.transcriptions.create(model="whisper-1", file=audio)
    assert "'alice' is over its 20 audio seconds per minute" in str(over.value)
    long = speech_wav(tmp_path / "long.wav", 40.0)  # 1.3 MB: over alice's 1 MB, not bob's
    with long.open("rb") as audio, pytest.raises(openai.APIStatusError) as large:
        api(ALICE).audio.transcriptions.create(model="whisper-1", file=audio)
    assert large.value.status_code == 413 and "limit of 1 MB" in str(large.value)
    with long.open("rb") as audio:
        done = api(BOB).audio.transcriptions.create(model="whisper-1", file=audio)
    assert done.usage is not None and done.usage.seconds == 40.0
