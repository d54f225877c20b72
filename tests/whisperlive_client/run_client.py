"""Runs WhisperLive's own `TranscriptionClient`, unmodified, on one file: the WhisperLive venv's
python runs this with this folder on PYTHONPATH (for the PyAudio stand-in).

    python run_client.py HOST PORT AUDIO OUT.srt [--lang en] [--model small] [--settle S]
                         [--initial-prompt TEXT]

``--settle``: WhisperLive's ``disconnect_if_no_response_for`` (its default: 15 s without new
text before END_OF_AUDIO). Prints one JSON line: the transcript it returns and what it saw.
"""

import argparse
import json
import os

from whisper_live.client import TranscriptionClient


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("audio")
    parser.add_argument("out")
    parser.add_argument("--lang", default="en")
    parser.add_argument("--model", default="small")
    parser.add_argument("--settle", type=float, default=None)
    parser.add_argument("--initial-prompt", default=None)
    args = parser.parse_args()
    client = TranscriptionClient(args.host, args.port, lang=args.lang, model=args.model,
                                 use_vad=True, mute_audio_playback=True, log_transcription=False,
                                 output_transcription_path=os.path.abspath(args.out),
                                 initial_prompt=args.initial_prompt)
    if args.settle is not None:
        client.client.disconnect_if_no_response_for = args.settle
    text = client(args.audio)
    inner = client.client
    print(json.dumps({"text": text, "backend": getattr(inner, "server_backend", None),
                      "segments": len(inner.transcript), "error": inner.server_error,
                      "error_message": str(getattr(inner, "error_message", "")),
                      "waiting": inner.waiting}), flush=True)


if __name__ == "__main__":
    main()
