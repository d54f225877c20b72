"""Soak test (not in the test suite): N looping streams against `sottovoce serve` on 127.0.0.1
for a while, with random disconnects, client kills and malformed frames mixed in.

    python bench/soak.py [--streams 8] [--minutes 30] [--out soak.json] [--plot soak.png]

The default run is 30 minutes of 8 streams. Each stream loops over sessions of 2-4 English
clips from the corpus (1 s of silence after each) sent in real time as 100 ms frames of the
protocol v1 (docs/protocol.md). A session is interrupted at a random point with some
probability: a *disconnect* (a clean close) or a *kill* (the socket dropped without a close
frame, as the kernel does for a SIGKILLed client); the stream then resumes it as our client
does: ``hello{session_id, offset: last ack}`` and the audio from there. Beside them a hostile
client opens a connection every 2 s and sends one malformed thing (bad JSON, odd-length audio,
audio before hello, an oversize frame, an unknown type, a wrong version, non-ASCII echo).
Everything is bounded: each loop checks the deadline and the run stops by itself.

Reports (a table on stdout, JSON with ``--out``, a PNG of the server's RSS over time):
- ``finals_lost``: clips sent (resumed sessions included) with no non-empty final overlapping
  them once the session ended with ``bye``: must be 0. Clips the VAD hears no speech in
  (whispered) are left out: they open no utterance;
- ``errors_by_kind``: error codes and failures the streams saw; ``hostile``: what the
  malformed frames got back (each should be its documented error code);
- ``server_tracebacks``: tracebacks in the server's log (must be 0);
- ``rss_mb``: the server's resident memory at the start, end and peak, sampled every 5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from common import REPO as ROOT
from common import TEST_MANIFEST, print_table, write_json
from evaluation import english, read_manifest

from engine.audio.decode import load_audio
from engine.longform.chunking import speech_probabilities

FRAME = 1600  # 100 ms
SILENCE_S = 1.0
INTERRUPT_P = {"disconnect": 0.2, "kill": 0.15}
MALFORMED: dict[str, list[str | bytes]] = {
    "bad_json": ["{not json"],
    "odd_audio": [json.dumps({"type": "hello", "protocol": 1, "session_id": "h"}), b"\x01\x02\x03"],
    "audio_before_hello": [b"\x00\x00" * 160],
    "oversize": [b"\x00" * (300 * 1024)],
    "unknown_type": [json.dumps({"type": "hello", "protocol": 1, "session_id": "h"}),
                     json.dumps({"type": "dance"})],
    "bad_version": [json.dumps({"type": "hello", "protocol": 99, "session_id": "h"})],
    "non_ascii": [json.dumps({"type": "hello", "protocol": "é" * 80, "session_id": "h"})],
}


class Soak:
    def __init__(self, url: str, clips: list[np.ndarray], deadline: float, seed: int) -> None:
        self.url, self.clips, self.deadline = url, clips, deadline
        self.rng = random.Random(seed)
        self.counts: collections.Counter[str] = collections.Counter()
        self.errors: collections.Counter[str] = collections.Counter()
        self.hostile: collections.Counter[str] = collections.Counter()
        self.lost: list[dict[str, object]] = []

    async def stream(self, index: int) -> None:
        k = 0
        while time.monotonic() < self.deadline - 30:  # room to finish the last session
            k += 1
            await self.session(f"soak-{index}-{k}")

    async def session(self, session_id: str) -> None:
        parts, spans, at = [], [], 0
        for _ in range(self.rng.randint(2, 4)):
            clip = self.clips[self.rng.randrange(len(self.clips))]
            parts += [clip, np.zeros(int(SILENCE_S * 16_000), dtype=np.float32)]
            spans.append((at, at + len(clip)))
            at += len(clip) + int(SILENCE_S * 16_000)
        pcm = (np.clip(np.concatenate(parts), -1, 1) * 32767).astype("<i2")
        state: dict[str, Any] = {"acked": 0, "finals": [], "done": False, "log": []}
        interruptions = 0
        while not state["done"] and time.monotonic() < self.deadline + 60:
            cut = None
            if interruptions < 2:
                roll = self.rng.random()
                for kind, p in INTERRUPT_P.items():
                    if roll < p:
                        cut = (kind, self.rng.randrange(int(state["acked"]), len(pcm)))
                        break
                    roll -= p
            try:
                await self.connection(session_id, pcm, state, cut)
            except Exception as exc:  # noqa: BLE001 - counted by kind, then resumed
                self.errors[type(exc).__name__] += 1
                await asyncio.sleep(0.5)
            if cut is not None and not state["done"]:
                state["log"].append((cut[0], cut[1], state["acked"]))
                interruptions += 1
                self.counts[cut[0]] += 1
                await asyncio.sleep(self.rng.uniform(0.1, 1.0))
        self.counts["sessions"] += 1
        self.counts["clips"] += len(spans)
        for start, end in spans:
            if not any(f["start"] < end and f["end"] > start and f["text"].strip()
                       for f in state["finals"]):
                self.lost.append({"session": session_id, "start": start, "end": end,
                                  "completed": state["done"], "interruptions": state["log"],
                                  "finals": [(f["start"], f["end"], f["text"])
                                             for f in state["finals"]]})

    async def connection(self, session_id: str, pcm: np.ndarray, state: dict[str, Any],
                         cut: tuple[str, int] | None) -> None:
        from websockets.asyncio.client import connect

        offset = int(state["acked"])
        async with connect(self.url, max_size=None, open_timeout=20) as ws:
            await ws.send(json.dumps({"type": "hello", "protocol": 1, "session_id": session_id,
                                      "offset": offset, "language": "en"}))
            receiver = asyncio.create_task(self.receive(ws, state))
            started = time.monotonic()
            for i, pos in enumerate(range(offset, len(pcm), FRAME)):
                if cut is not None and pos >= cut[1]:
                    if cut[0] == "kill":
                        ws.transport.abort()  # no close frame: what the kernel does on SIGKILL
                    else:
                        await ws.close()
                    receiver.cancel()
                    return
                await ws.send(pcm[pos:pos + FRAME].tobytes())
                await asyncio.sleep(max(0.0, started + (i + 1) * FRAME / 16_000
                                        - time.monotonic()))
            await ws.send(json.dumps({"type": "end"}))
            await asyncio.wait_for(receiver, 120)

    async def receive(self, ws: object, state: dict) -> None:  # type: ignore[type-arg]
        async for raw in ws:  # type: ignore[attr-defined]
            if isinstance(raw, bytes):
                continue
            message = json.loads(raw)
            kind = message.get("type")
            if kind == "ack":
                state["acked"] = max(int(state["acked"]), int(message["upto"]))
            elif kind == "final":
                state["finals"].append(message)
                self.counts["finals"] += 1
            elif kind == "error":
                self.errors[message.get("code", "?")] += 1
            elif kind == "bye":
                state["done"] = True
                return

    async def malformed(self) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed

        names = sorted(MALFORMED)
        i = 0
        while time.monotonic() < self.deadline:
            name = names[i % len(names)]
            i += 1
            try:
                async with connect(self.url, max_size=None, open_timeout=20) as ws:
                    for frame in MALFORMED[name]:
                        await ws.send(frame)
                    got = "no reply"
                    try:
                        while True:
                            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                            if message.get("type") == "error":
                                got = message["code"]
                                break
                    except ConnectionClosed as closed:
                        got = got if got != "no reply" else f"close {closed.rcvd.code if closed.rcvd else '-'}"
                    except TimeoutError:
                        got = "ignored (no reply in 10 s)"  # unknown types: forward compatible
                    self.hostile[f"{name} -> {got}"] += 1
            except Exception as exc:  # noqa: BLE001 - counted
                self.hostile[f"{name} -> {type(exc).__name__}"] += 1
            await asyncio.sleep(2.0)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


async def sample_rss(pid: int, deadline: float, series: list[tuple[float, float]]) -> None:
    start = time.monotonic()
    while time.monotonic() < deadline + 90:
        series.append((round(time.monotonic() - start, 1), round(rss_mb(pid), 1)))
        await asyncio.sleep(5.0)


async def run(args: argparse.Namespace, clips: list[np.ndarray], port: int,
              pid: int) -> tuple[Soak, list[tuple[float, float]]]:
    deadline = time.monotonic() + args.minutes * 60
    soak = Soak(f"ws://127.0.0.1:{port}", clips, deadline, args.seed)
    series: list[tuple[float, float]] = []
    sampler = asyncio.create_task(sample_rss(pid, deadline, series))
    await asyncio.gather(*(soak.stream(i) for i in range(args.streams)), soak.malformed())
    sampler.cancel()
    series.append((series[-1][0] + 1 if series else 0.0, round(rss_mb(pid), 1)))
    return soak, series


def start_server(port: int, model: str, streams: int, log_path: Path) -> subprocess.Popen[bytes]:
    n = str(streams * 2 + 4)
    cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--model", model,
           "--max-sessions", n, "--max-sessions-per-client", n]
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log_file)
    for _ in range(600):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}; see {log_path}")
        time.sleep(0.5)
    raise RuntimeError("server did not start")


def plot(series: list[tuple[float, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot([t / 60 for t, _ in series], [m for _, m in series])
    ax.set(xlabel="minutes", ylabel="server RSS (MB)", title=title, ylim=(0, None))
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="JSON results")
    parser.add_argument("--plot", type=Path, help="PNG of RSS over time (default: --out .png)")
    parser.add_argument("--smoke", action="store_true", help="one stream, one session")
    args = parser.parse_args(argv)
    if args.smoke:
        args.streams, args.minutes = 1, 0.6  # one session starts (none in the last 30 s)
    entries = [e for e in english(read_manifest(TEST_MANIFEST))
               if 2 <= e.duration_s <= 12]
    clips = [load_audio(e.path) for e in entries]
    # An utterance is what the server's VAD hears: a clip Silero scores as speech in under a
    # tenth of its windows (the corpus's whisper2 1 %, falsetto2 3 %; the next is 14 %) opens
    # none in a stream (seen in a first 5 min run: whisper2 twice, no final), so it is left out.
    heard = [c for c in clips if float(np.mean(speech_probabilities(c) >= 0.5)) >= 0.1]
    print(f"{len(heard)} of {len(clips)} clips (2-12 s, English) have speech the VAD hears")
    clips = heard
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_path = Path(f"/tmp/soak-server-{port}.log")
    proc = start_server(port, args.model, args.streams, log_path)
    started = time.monotonic()
    try:
        soak, series = asyncio.run(run(args, clips, port, proc.pid))
        metrics = metrics_of(port)
    finally:
        proc.terminate()
        proc.wait(30)
    log_text = log_path.read_text(errors="replace")
    rss = [m for _, m in series]
    result = {
        "streams": args.streams, "minutes": args.minutes,
        "wall_s": round(time.monotonic() - started, 1),
        "sessions": soak.counts["sessions"], "clips": soak.counts["clips"],
        "finals": soak.counts["finals"], "disconnects": soak.counts["disconnect"],
        "kills": soak.counts["kill"], "finals_lost": len(soak.lost), "lost": soak.lost[:20],
        "errors_by_kind": dict(soak.errors), "hostile": dict(sorted(soak.hostile.items())),
        "server_tracebacks": log_text.count("Traceback"),
        "rss_mb": {"start": rss[0], "end": rss[-1], "max": max(rss), "series": series},
        "server_counters": metrics.get("counters"), "server_limits": metrics.get("limits"),
    }
    print_table(("streams", "min", "sessions", "clips", "finals", "lost", "disc", "kills", "tb",
                 "rss start", "rss max", "rss end"),
                [(args.streams, args.minutes, result["sessions"], result["clips"],
                  result["finals"], result["finals_lost"], result["disconnects"], result["kills"],
                  result["server_tracebacks"], rss[0], max(rss), rss[-1])])
    print("errors by kind:", dict(soak.errors) or "none")
    for kind, count in sorted(soak.hostile.items()):
        print(f"  malformed {kind}: {count}")
    if args.out:
        write_json(args.out, result)
    png = args.plot or (args.out.with_suffix(".png") if args.out else None)
    if png:
        plot(series, png, f"sottovoce serve, {args.streams} streams, {args.minutes:g} min")
    return 1 if result["finals_lost"] or result["server_tracebacks"] else 0


def metrics_of(port: int) -> dict[str, object]:
    import urllib.request

    # /metrics is Prometheus text; the same numbers as JSON are at /metrics.json.
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics.json", timeout=10) as reply:
            data: dict[str, object] = json.loads(reply.read())
            return data
    except (OSError, ValueError) as exc:  # the run's results are worth more than the counters
        print(f"server metrics unavailable: {exc}", file=sys.stderr)
        return {}


if __name__ == "__main__":
    raise SystemExit(main())
