"""The server as a fleet member: Prometheus /metrics, /health, and drain on SIGTERM behind a
load balancer (docs/deploy.md)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.held_source import HeldSource

from bench.evaluation import error_rate, read_manifest
from engine.asr.fake import ScriptedRunner
from engine.audio.sources import FileSource
from engine.events import EngineFailed, Event, FinalText, StateChanged
from engine.remote.client import RemoteLiveEngine, RemoteOptions
from engine.server.server import ServerThread, TranscriptionServer
from engine.types import SAMPLE_RATE

REPO = Path(__file__).resolve().parents[1]


def get(url: str, accept: str | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def parse(text: str) -> dict[str, float]:
    """The samples of a scrape, read by prometheus_client's own parser, as
    ``{'name{label="value",...}': value}``."""
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sample.labels.items())
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


@pytest.fixture
def scripted_server() -> Iterator[ServerThread]:
    thread = ServerThread(TranscriptionServer(ScriptedRunner(["hello world."])))
    thread.start()
    yield thread
    thread.stop()


def test_metrics_are_prometheus_text_and_json_stays_available(
        scripted_server: ServerThread, shared_audio: Path) -> None:
    base = f"http://127.0.0.1:{scripted_server.port}"
    engine = RemoteLiveEngine(lambda e: None, url=base.replace("http", "ws"),
                              source=FileSource(shared_audio / "jfk-inaugural-1961-excerpt.wav"),
                              options=RemoteOptions(language="en"))
    engine.start()
    assert engine.wait(60)
    status, kind, text = get(f"{base}/metrics")
    assert status == 200 and kind.startswith("text/plain; version=0.0.4")
    samples = parse(text)
    assert samples["sottovoce_sessions_total"] == 1 and samples["sottovoce_sessions"] == 0
    assert samples["sottovoce_ready"] == 1 and "sottovoce_queue_depth" in samples
    assert samples["sottovoce_audio_received_seconds_total"] == pytest.approx(11.0, abs=0.1)
    assert samples['sottovoce_decode_seconds_count{kind="final"}'] >= 1
    assert samples['sottovoce_decode_seconds_bucket{kind="final",le="+Inf"}'] == samples[
        'sottovoce_decode_seconds_count{kind="final"}']
    assert samples['sottovoce_audio_decoded_seconds_total{kind="final"}'] > 5
    assert 'sottovoce_errors_total{kind="busy"}' in samples
    for line in text.splitlines():  # every family is typed; every sample is "name value"
        assert line.startswith(("# TYPE ", "# HELP ")) or len(line.rsplit(" ", 1)) == 2
    # The process collector's families (Linux): what the server process holds and has used.
    assert samples["process_resident_memory_bytes"] > 10 * 2**20
    assert samples["process_cpu_seconds_total"] > 0 and samples["process_open_fds"] > 0
    for url, accept in ((f"{base}/metrics.json", None), (f"{base}/metrics", "application/json")):
        status, kind, body = get(url, accept)
        assert status == 200 and kind == "application/json"
        assert json.loads(body)["counters"]["sessions"] == 1
    status, _, body = get(f"{base}/health")
    assert status == 200 and json.loads(body)["ready"] is True


# -- two replicas behind a load balancer --------------------------------------------------------


class Balancer:
    """A TCP load balancer as HAProxy/nginx/Envoy in TCP or WebSocket mode behave for this: a
    new connection goes to the first backend that accepts it (a draining replica has closed
    its listening socket), bytes are piped both ways, a backend's close closes the client's."""

    def __init__(self, backends: list[int]) -> None:
        self.backends = backends
        self.routed: list[int] = []
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.port = 0

        async def main() -> None:
            server = await asyncio.start_server(self._client, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            async with server:
                await server.serve_forever()

        threading.Thread(target=self.loop.run_until_complete, args=(main(),),
                         daemon=True).start()
        ready.wait(10)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for port in self.backends:
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                continue
            self.routed.append(port)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            return
        writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


def spawn_replica() -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", "0", "--idle-timeout", "20"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the model is loaded and the port bound
    assert line.startswith("listening"), line
    return proc, int(line.split()[1].rsplit(":", 1)[1])


@pytest.mark.model
def test_a_sigtermed_replica_drains_and_the_client_moves_to_the_other(shared_audio: Path) -> None:
    clip = next(e for e in read_manifest(shared_audio / "manifest.jsonl")
                if e.path.name == "ls-dc-2412-153948-0000.wav")  # 11.7 s, several pauses
    (first, port_a), (second, port_b) = spawn_replica(), spawn_replica()
    balancer = Balancer([port_a, port_b])
    events: list[Event] = []
    # Mid-stream, mid-utterance is an event: the source stops at 5 s of the clip (no audio
    # comes, the stream stays open) until the first replica has drained.
    source = HeldSource(FileSource(clip.path, realtime=True), hold_at=5 * SAMPLE_RATE)
    engine = RemoteLiveEngine(events.append, url=f"ws://127.0.0.1:{balancer.port}",
                              source=source,
                              options=RemoteOptions(language="en", backoff_initial_s=0.1,
                                                    backoff_max_s=1.0))
    try:
        engine.start()
        assert source.reached.wait(120), "the clip never reached 5 s"  # (bounds a hang)
        finals_before = sum(isinstance(e, FinalText) for e in events)
        first.send_signal(signal.SIGTERM)
        assert first.wait(30) == 0  # drained and exited by itself
        source.release()
        assert engine.wait(120)
        _, _, text = get(f"http://127.0.0.1:{port_b}/metrics")
    finally:
        for proc in (first, second):
            proc.terminate()
            proc.wait(10)
    assert first.stdout is not None and "draining" in first.stdout.read()
    assert balancer.routed[0] == port_a and port_b in balancer.routed  # the reconnect moved
    assert parse(text)["sottovoce_sessions_total"] >= 1
    assert "reconnecting" in [e.state for e in events if isinstance(e, StateChanged)]
    assert not [e for e in events if isinstance(e, EngineFailed)]
    finals = [e for e in events if isinstance(e, FinalText) and e.text]
    assert len(finals) > finals_before  # the drained replica's last final arrived too
    spoken = " ".join(e.text for e in finals)
    assert error_rate([clip.text], [spoken]) < 0.25, spoken
    assert engine.buffer.dropped == 0
    print("finals:", finals_before, "before SIGTERM;", [(round(e.start / 16000, 2), round(e.end / 16000, 2), e.text) for e in finals])
    ends = [e.end for e in finals]
    assert ends == sorted(ends)  # no final twice, none out of order
