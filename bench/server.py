"""Server benchmark: N simulated real-time streams against our server (batched and unbatched)
and against WhisperLive's server, on this machine with the same model (tiny.en by default).

    python bench/server.py --manifest tests/audio/manifest.jsonl --streams 1,4,8,16 \
        --out bench-server.json [--seconds 20] [--plot bench-server.png]
    python bench/server.py --streams up --out bench-server.json   # 1, 2, 4 ... until behind
    python bench/server.py --smoke --out /tmp/server.json   # one stream, a few seconds

Each stream plays English clips from the manifest back to back (0.6 s apart) in real time
through `RemoteLiveEngine`, as a microphone would. Per system and N it reports:
- ``p50_ms`` / ``p95_ms``: final-text latency, from sending an utterance's last sample to
  receiving its final text, on the client's clock;
- ``audio_s_per_s``: audio seconds streamed by all clients / wall seconds from the first sample
  to the last final (N x real time at best);
- ``drain_s``: time from the last sample sent to the last final (the backlog at the end);
- ``keeps_up``: drain under 5 s and p95 under 5 s; ``wer``: word error rate of the finals;
- ``effective_audio_s_per_s``: ``audio_s_per_s`` x (1 - WER), since a server that drops audio
  it cannot handle would otherwise look fast (plotted);
- ``server_cpu_s`` / ``cpu_s_per_audio_s``: the server process's CPU time while serving (all
  threads: VAD, protocol, decoding), total and per second of streamed audio: the figure least
  disturbed by other work on a shared machine;
- ``loadavg``: the machine's 1-minute load average at the end of the run;
- ours only, from its /metrics: ``mean_batch``, ``decode_capacity_x``, ``final_capacity_x``,
  the partials' share of the busy time, queue waits, fallbacks, withdrawn stale partials and
  per-kind cost by batch size (see `scheduler_stats`).
Capacity: with real-time streams ``audio_s_per_s`` saturates at N x real time, so the summary
also prints (and ``limits`` in the JSON holds) the largest N that keeps up per system, and the
throughput ratio of our batched server over each other system at its own limit; ``--streams
up`` doubles the count until every system has fallen behind (a system is not run past the
count where it fell behind); under overload (N past that) ``audio_s_per_s`` and
``final_capacity_x`` measure how much the server gets through.
``ours_wl``: our batched server with the same streams sent by WhisperLive-protocol clients
(our ``whisperlive://`` link, the client the ``whisperlive`` row uses against WhisperLive's own
server): the same clients, the two servers, in one run.
Extra systems for ablations (``--systems``): ``ours_batched_wide`` (one encoder call per batch),
``ours_batched_nosplit`` / ``ours_batched_pad13`` / ``ours_batched_pad25`` (length bucketing).
Servers run as separate processes (ours via ``sottovoce serve``, WhisperLive from
.venv-whisperlive) so clients and server do not share a GIL.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from common import REPO as ROOT
from common import TEST_MANIFEST as DEFAULT_MANIFEST
from common import pct, print_table, write_json
from evaluation import english, error_rate, read_manifest

from engine.audio.decode import load_audio
from engine.audio.sources import FileSource
from engine.events import Event, FinalText
from engine.models import resolve_model
from engine.remote.client import RemoteLiveEngine
from engine.remote.link import RemoteOptions

log = logging.getLogger("bench.server")
SYSTEMS = ("ours_batched", "ours_unbatched", "ours_wl", "whisperlive")
# Systems whose clients speak WhisperLive's protocol (ours_wl: to our server).
WL_CLIENTS = ("whisperlive", "ours_wl")
WL_VENV = Path(os.environ.get("SOTTOVOCE_WHISPERLIVE_VENV", ROOT / ".venv-whisperlive"))
# Extra `sottovoce serve` flags per system; ablations can be asked for with --systems.
OURS = {"ours_batched": [], "ours_unbatched": ["--no-batching"], "ours_wl": [],
        "ours_batched_nosplit": ["--max-pad-ratio", "100"],  # no length bucketing
        "ours_batched_pad13": ["--max-pad-ratio", "1.3"],  # tighter length bucketing
        "ours_batched_pad25": ["--max-pad-ratio", "2.5"]}
GAP_S = 0.6
KEEP_UP_S = 5.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("server did not start")


def start_server(system: str, port: int, model: str, streams: int) -> subprocess.Popen[bytes]:
    if system == "whisperlive":
        python = WL_VENV / "bin" / "python"
        code = ("from whisper_live.server import TranscriptionServer; TranscriptionServer().run("
                f"'127.0.0.1', {port}, backend='faster_whisper', "
                f"faster_whisper_custom_model_path={str(resolve_model(model).path)!r}, "
                f"single_model=True, max_clients={streams + 1})")
        cmd = [str(python), "-c", code]
    else:
        cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--model", model,
               "--max-sessions", str(streams + 1),
               "--max-sessions-per-client", str(streams + 1), *OURS[system]]
    log_path = Path(f"/tmp/bench-server-{system}-{streams}.log")
    with open(log_path, "wb") as log_file:  # the server's own log, for post-mortems
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log_file)
    wait_port(port, proc)
    return proc


def stream_audio(clips: list[tuple[np.ndarray, str]], seconds: float,
                 start: int) -> tuple[np.ndarray, list[str]]:
    """Clips back to back from index ``start`` until ``seconds`` of audio."""
    parts, texts, total, i = [], [], 0, start
    while total < seconds * 16_000:
        audio, text = clips[i % len(clips)]
        parts += [audio, np.zeros(int(GAP_S * 16_000), dtype=np.float32)]
        texts.append(text)
        total += len(audio) + int(GAP_S * 16_000)
        i += 1
    return np.concatenate(parts), texts


class Stream:
    def __init__(self, url: str, audio: np.ndarray, texts: list[str]) -> None:
        self.audio, self.texts = audio, texts
        self.latencies_ms: list[float] = []
        self.finals: list[str] = []
        self.last_final_at = 0.0
        self._lock = threading.Lock()
        self.engine = RemoteLiveEngine(self._sink, url=url,
                                       source=FileSource(audio=audio, realtime=True),
                                       options=RemoteOptions(language="en"))

    def _sink(self, event: Event) -> None:
        if not isinstance(event, FinalText) or not event.text:
            return
        sent_at = self.engine.send_log.time_of(event.end)
        now = time.monotonic()
        with self._lock:
            if sent_at is not None:
                self.latencies_ms.append((now - sent_at) * 1000)
            self.finals.append(event.text)
            self.last_final_at = now


def run_once(system: str, n: int, clips: list[tuple[np.ndarray, str]], seconds: float,
             model: str) -> dict[str, Any]:
    server_stats: dict[str, Any]
    port = free_port()
    proc = start_server(system, port, model, n)
    cpu_at_start = cpu_seconds(proc.pid)  # model loading is not serving
    scheme = "whisperlive" if system in WL_CLIENTS else "ws"
    streams = [Stream(f"{scheme}://127.0.0.1:{port}", *stream_audio(clips, seconds, i * 3))
               for i in range(n)]
    try:
        started = time.monotonic()
        for i, stream in enumerate(streams):
            stream.engine.start()
            time.sleep(0.9 / max(1, n) if i < n - 1 else 0)  # staggered, as real users are
        audio_end = started + max(len(s.audio) for s in streams) / 16_000 + 1.0
        for stream in streams:
            stream.engine.wait(seconds * 4 + 120)
        last = max((s.last_final_at for s in streams), default=time.monotonic())
        server_stats = {"server_cpu_s": round(cpu_seconds(proc.pid) - cpu_at_start, 2)}
        if system != "whisperlive":
            try:
                server_stats.update(scheduler_stats(port))
            except OSError as exc:
                print(f"   no server metrics ({exc}); server exit code {proc.poll()}", flush=True)
    finally:
        proc.terminate()
        proc.wait(20)
    latencies = [x for s in streams for x in s.latencies_ms]
    wall = max(last, audio_end) - started
    audio_s = sum(len(s.audio) for s in streams) / 16_000
    server_stats["cpu_s_per_audio_s"] = round(float(server_stats["server_cpu_s"]) / audio_s, 3)
    drain = max(0.0, last - audio_end)
    latency = pct(latencies)
    p95 = float("nan") if latency["p95"] is None else latency["p95"]
    wer = error_rate([" ".join(s.texts) for s in streams], [" ".join(s.finals) for s in streams])
    return {
        "p50_ms": latency["p50"],
        "p95_ms": latency["p95"],
        "audio_s_per_s": round(audio_s / wall, 3),
        "drain_s": round(drain, 2),
        "keeps_up": bool(latencies) and drain < KEEP_UP_S and p95 < KEEP_UP_S * 1000,
        "finals": len(latencies),
        "wer": round(wer, 3),
        # A server that drops audio "keeps up" cheaply; discount by what it got right.
        "effective_audio_s_per_s": round(audio_s / wall * max(0.0, 1.0 - wer), 3),
        # Other work on the machine slows every system: say how loaded it was (1 min avg).
        "loadavg": round(os.getloadavg()[0], 2),
        **server_stats,
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads) so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scheduler_stats(port: int) -> dict[str, Any]:
    """Our server's own view, from /metrics:
    - ``mean_batch``: requests per decode call;
    - ``decode_capacity_x``: audio seconds decoded (partials re-decode growing utterances, so
      audio counts more than once) per second the inference thread was busy;
    - ``final_capacity_x``: audio seconds *finalized* per busy second, partial work included:
      the speech rate the server could finalize with the thread always busy at this mix;
    - ``busy_share_partials``: share of the busy time spent on partials;
    - ``final_wait_ms`` / ``partial_wait_ms``: mean time a request waited in the queue;
    - ``withdrawn``: stale partials taken back before they were decoded."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics.json", timeout=10) as response:
        stats = json.loads(response.read())["scheduler"]
    busy = float(stats["decode_seconds"]) or 1e-9
    finals, partials = stats["finals"], stats["partials"]
    return {"mean_batch": stats["mean_batch_size"],
            "decode_capacity_x": round(float(stats["audio_seconds"]) / busy, 2),
            "final_capacity_x": round(float(finals["audio_seconds"]) / busy, 2),
            "busy_s": round(busy, 2),
            "busy_share_partials": round(float(partials["decode_seconds"]) / busy, 3),
            "final_wait_ms": finals["mean_wait_ms"], "partial_wait_ms": partials["mean_wait_ms"],
            "partials": partials["requests"], "withdrawn": stats["withdrawn"],
            "kinds": {"finals": finals, "partials": partials}}


def plot(results: dict[str, dict[str, dict[str, Any]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = sorted(int(n) for n in results if n.isdigit())
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    systems = sorted({s for row in results.values() for s in row if not s.startswith("ratio")})
    for system in systems:
        rows = [results[str(n)].get(system) for n in ns]
        xs = [n for n, r in zip(ns, rows, strict=True) if r]
        if not xs:
            continue
        left.plot(xs, [results[str(n)][system]["p95_ms"] for n in xs], "o-", label=system)
        right.plot(xs, [results[str(n)][system].get("effective_audio_s_per_s",
                                                    results[str(n)][system]["audio_s_per_s"])
                        for n in xs], "o-", label=system)
    right.plot(ns, ns, "k--", alpha=0.4, label="real time x N")
    left.set(xlabel="streams", ylabel="final latency p95 (ms)", yscale="log")
    right.set(xlabel="streams", ylabel="audio s per s x (1 - WER)")
    left.legend()
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def doubling(most: int) -> list[int]:
    counts = [1]
    while counts[-1] * 2 <= most:
        counts.append(counts[-1] * 2)
    return counts


def limits(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per system the largest stream count kept up, and at our batched server's limit the
    throughput (audio s per s) of each system over our batched server's."""
    runs = {n: row for n, row in results.items() if n.isdigit()}
    systems = {s for row in runs.values() for s in row if not s.startswith("ratio")}
    kept = {s: max((int(n) for n, row in runs.items() if row.get(s, {}).get("keeps_up")),
                   default=0) for s in systems}
    at = str(kept.get("ours_batched", 0))
    row = runs.get(at, {})
    ours = row.get("ours_batched", {}).get("audio_s_per_s")
    ratios = {s: round(ours / r["audio_s_per_s"], 3) for s, r in row.items()
              if ours and not s.startswith("ratio") and s != "ours_batched"
              and r.get("audio_s_per_s")}
    return {"largest_kept": kept, "at_streams": int(at), "ours_batched_vs": ratios}


def print_results(results: dict[str, dict[str, Any]]) -> None:
    rows = []
    runs = {n: row for n, row in results.items() if n.isdigit()}
    for n, row in sorted(runs.items(), key=lambda kv: int(kv[0])):
        for system, r in row.items():
            if system.startswith("ratio"):
                continue
            share = r.get("busy_share_partials")
            rows.append((n, system, r["p50_ms"], r["p95_ms"], r["audio_s_per_s"], r["drain_s"],
                         r["keeps_up"], r["wer"], r.get("cpu_s_per_audio_s"), r.get("mean_batch"),
                         r.get("decode_capacity_x"), r.get("final_capacity_x"),
                         None if share is None else round(100 * float(share)),
                         r.get("final_wait_ms")))
    print_table(("N", "system", "p50 ms", "p95 ms", "audio s/s", "drain s", "keeps up", "WER",
                 "cpu/aud", "batch", "dec cap", "fin cap", "part %", "f wait"), rows)
    for n, row in sorted(runs.items(), key=lambda kv: int(kv[0])):
        if "ratio_batched_vs_unbatched" in row:
            print(f"{n:>3} throughput batched/unbatched = {row['ratio_batched_vs_unbatched']}")
        if "ratio_wl_clients_ours_vs_theirs" in row:
            print(f"{n:>3} WhisperLive clients, throughput our server/theirs = "
                  f"{row['ratio_wl_clients_ours_vs_theirs']}")
    found = limits(results)
    for system, kept in sorted(found["largest_kept"].items()):
        print(f"largest N that keeps up, {system}: {kept or 'none'} "
              f"(of {sorted(int(n) for n in runs)})")
    for system, ratio in sorted(found["ours_batched_vs"].items()):
        print(f"at {found['at_streams']} streams, throughput ours_batched / {system} = {ratio}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", default=DEFAULT_MANIFEST, type=Path)
    parser.add_argument("--streams", default="1,4,8,16",
                        help="stream counts, or 'up' to double from 1 until every system "
                             "falls behind (at most --max-streams)")
    parser.add_argument("--max-streams", type=int, default=128)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--plot", type=Path, help="PNG (default: --out with .png)")
    parser.add_argument("--seconds", type=float, default=20.0, help="audio per stream")
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--smoke", action="store_true",
                        help="one stream of a few seconds, our batched server only")
    args = parser.parse_args(argv)
    if args.smoke:
        args.streams, args.seconds, args.systems = "1", 4.0, "ours_batched"
    logging.basicConfig(level=logging.WARNING)
    entries = english(read_manifest(args.manifest))
    clips = [(load_audio(e.path), e.text) for e in entries if e.duration_s <= 12]
    systems = [s for s in args.systems.split(",") if s]
    results: dict[str, dict[str, Any]] = {}
    counts = (doubling(args.max_streams) if args.streams == "up"
              else [int(x) for x in args.streams.split(",")])
    behind: set[str] = set()  # systems that fell behind: more streams only fall further
    for n in counts:
        if args.streams == "up" and behind >= set(systems):
            break
        row: dict[str, Any] = {}
        for system in systems:
            if args.streams == "up" and system in behind:
                continue
            print(f"-- {system}, {n} streams", flush=True)
            try:
                row[system] = run_once(system, n, clips, args.seconds, args.model)
            except (RuntimeError, OSError) as exc:
                print(f"   failed: {exc}", flush=True)
            if not row.get(system, {}).get("keeps_up"):
                behind.add(system)
        if "ours_wl" in row and "whisperlive" in row:
            ratio = row["ours_wl"]["audio_s_per_s"] / row["whisperlive"]["audio_s_per_s"]
            row["ratio_wl_clients_ours_vs_theirs"] = round(ratio, 3)
        if "ours_batched" in row and "ours_unbatched" in row:
            ratio = row["ours_batched"]["audio_s_per_s"] / row["ours_unbatched"]["audio_s_per_s"]
            row["ratio_batched_vs_unbatched"] = round(ratio, 3)
        results[str(n)] = row
        write_json(args.out, results)  # after each N: a long run keeps what it measured
    results["limits"] = limits(results)
    write_json(args.out, results)
    print_results(results)
    plot(results, args.plot or args.out.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
