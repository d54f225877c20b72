"""File endpoint benchmark: files through our server's OpenAI-compatible endpoint against
faster-whisper's batched pipeline run without a server, and live streams kept up while the
server transcribes files, in one run on this machine with the same model.

    python bench/server_files.py --files 6 --minutes 1 --streams 2 --out F.json
    python bench/server_files.py --smoke --out /tmp/server-files.json

Files are English clips of the manifest joined back to back (0.6 s apart) into recordings of
``--minutes`` each. Systems, one after another:
- ``fw_batched``: faster-whisper's `BatchedInferencePipeline` in this process, one file after
  another (the peer a user would script without a server);
- ``ours_files``: `sottovoce serve` in its own process; the files posted to
  ``/v1/audio/transcriptions``, two at a time (a client per file);
- ``ours_live``: ``--streams`` real-time live streams alone (the reference for the next row);
- ``ours_live_files``: the same live streams while the files are posted.
Per system: files per minute, audio seconds per wall second, WER; for the live rows the final
latency p50/p95 and whether the streams kept up (`bench/server.py`'s rule).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import wave
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from server import GAP_S, KEEP_UP_S, Stream, cpu_seconds, free_port, start_server, stream_audio

from common import TEST_MANIFEST, pct, print_table, write_json
from evaluation import english, error_rate, read_manifest

from engine.audio.decode import load_audio


def make_files(clips: list[tuple[np.ndarray, str]], count: int, minutes: float,
               folder: Path) -> list[tuple[Path, str, float]]:
    """``count`` WAVs of ``minutes`` each, their reference text and length (s)."""
    files, at = [], 0
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        parts, texts, total = [], [], 0
        while total < minutes * 60 * 16_000:
            audio, text = clips[at % len(clips)]
            parts += [audio, np.zeros(int(GAP_S * 16_000), dtype=np.float32)]
            texts.append(text)
            total += len(audio) + int(GAP_S * 16_000)
            at += 1
        path = folder / f"file-{n}.wav"
        with wave.open(str(path), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(16_000)
            out.writeframes((np.clip(np.concatenate(parts), -1, 1) * 32767)
                            .astype("<i2").tobytes())
        files.append((path, " ".join(texts), total / 16_000))
    return files


def peer(files: list[tuple[Path, str, float]], model: str) -> dict[str, Any]:
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    from engine.models import resolve_model

    pipeline = BatchedInferencePipeline(WhisperModel(str(resolve_model(model).path),
                                                     device="cpu", compute_type="int8"))
    started, texts = time.monotonic(), []
    for path, _, _ in files:
        segments, _ = pipeline.transcribe(str(path), language="en", batch_size=8)
        texts.append(" ".join(s.text.strip() for s in segments))
    return summary(files, texts, time.monotonic() - started)


def post_files(port: int, files: list[tuple[Path, str, float]], stop: threading.Event | None
               ) -> tuple[list[str], float, int]:
    """The files posted two at a time (again and again while ``stop`` is unset); the texts
    of the first round, its wall time, and how many files were done in all."""
    import httpx

    def one(path: Path) -> str:
        with path.open("rb") as audio:
            answer = httpx.post(f"http://127.0.0.1:{port}/v1/audio/transcriptions",
                                files={"file": audio}, data={"model": "whisper-1",
                                                             "language": "en"}, timeout=1800)
        answer.raise_for_status()
        return str(answer.json()["text"])

    done, started = 0, time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        texts = list(pool.map(one, [p for p, _, _ in files]))
        wall = time.monotonic() - started
        done += len(files)
        while stop is not None and not stop.is_set():
            list(pool.map(one, [p for p, _, _ in files[:2]]))
            done += 2
    return texts, wall, done


def run_streams(url: str, clips: list[tuple[np.ndarray, str]], n: int, seconds: float
                ) -> dict[str, Any]:
    """``n`` live streams in real time (staggered as users are): final latency, keeping up."""
    streams = [Stream(url, *stream_audio(clips, seconds, i * 3)) for i in range(n)]
    started = time.monotonic()
    for stream in streams:
        stream.engine.start()
        time.sleep(0.9 / n)
    audio_end = started + max(len(s.audio) for s in streams) / 16_000 + 1.0
    for stream in streams:
        stream.engine.wait(seconds * 4 + 120)
    last = max((s.last_final_at for s in streams), default=time.monotonic())
    latency = pct([x for s in streams for x in s.latencies_ms])
    drain = max(0.0, last - audio_end)
    p95 = float("nan") if latency["p95"] is None else latency["p95"]
    return {"p50_ms": latency["p50"], "p95_ms": latency["p95"], "drain_s": round(drain, 2),
            "keeps_up": drain < KEEP_UP_S and p95 < KEEP_UP_S * 1000,
            "wer": round(error_rate([" ".join(s.texts) for s in streams],
                                    [" ".join(s.finals) for s in streams]), 4)}


def summary(files: list[tuple[Path, str, float]], texts: list[str], wall: float
            ) -> dict[str, Any]:
    audio = sum(seconds for _, _, seconds in files)
    return {"files_per_min": round(len(files) / wall * 60, 2),
            "audio_s_per_s": round(audio / wall, 2), "wall_s": round(wall, 1),
            "wer": round(error_rate([t for _, t, _ in files], texts), 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", default=TEST_MANIFEST, type=Path)
    parser.add_argument("--files", type=int, default=6)
    parser.add_argument("--minutes", type=float, default=1.0, help="length of each file")
    parser.add_argument("--streams", type=int, default=2, help="live streams beside the files")
    parser.add_argument("--seconds", type=float, default=40.0, help="audio per live stream")
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--smoke", action="store_true", help="2 short files, 1 stream")
    args = parser.parse_args(argv)
    if args.smoke:
        args.files, args.minutes, args.streams, args.seconds = 2, 0.25, 1, 8.0
    clips = [(load_audio(e.path), e.text) for e in english(read_manifest(args.manifest))]
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-server-files-{os.getpid()}"
    files = make_files(clips, args.files, args.minutes, folder)
    results: dict[str, dict[str, Any]] = {"fw_batched": peer(files, args.model)}
    port = free_port()
    proc = start_server("ours_batched", port, args.model, args.streams + 4)
    try:
        cpu = cpu_seconds(proc.pid)
        texts, wall, _ = post_files(port, files, None)
        results["ours_files"] = {**summary(files, texts, wall),
                                 "server_cpu_s": round(cpu_seconds(proc.pid) - cpu, 1)}
        url = f"ws://127.0.0.1:{port}"
        results["ours_live"] = run_streams(url, clips, args.streams, args.seconds)
        stop = threading.Event()
        counted: dict[str, Any] = {}

        def background() -> None:
            counted["texts"], counted["wall"], counted["done"] = post_files(port, files, stop)

        poster = threading.Thread(target=background)
        poster.start()
        time.sleep(2.0)  # the files' first waves are queued before the streams start
        started = time.monotonic()
        live = run_streams(url, clips, args.streams, args.seconds)
        stop.set()
        poster.join()
        results["ours_live_files"] = {**live, "files_done": counted.get("done", 0),
                                      "files_per_min_beside_live": round(
                                          counted.get("done", 0) / (time.monotonic() - started)
                                          * 60, 2)}
    finally:
        proc.terminate()
        proc.wait(20)
    ratio = results["ours_files"]["files_per_min"] / results["fw_batched"]["files_per_min"]
    rows = [[name, r.get("files_per_min", r.get("files_per_min_beside_live", "")),
             r.get("audio_s_per_s", ""), r.get("wer", ""), r.get("p50_ms", ""),
             r.get("p95_ms", ""), r.get("keeps_up", "")] for name, r in results.items()]
    print_table(["system", "files/min", "audio s/s", "WER", "live p50 ms", "live p95 ms",
                 "keeps up"], rows, f"files through the server vs faster-whisper batched "
                 f"({args.files} x {args.minutes:g} min; {args.streams} live streams)")
    print(f"ours / faster-whisper batched, files per minute: {ratio:.2f}x")
    write_json(args.out, {"setup": vars(args) | {"manifest": str(args.manifest),
                                                 "out": str(args.out)},
                          "results": results, "ratio_files_per_min": round(ratio, 3),
                          "loadavg": os.getloadavg()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
