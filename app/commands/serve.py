"""`sottovoce serve`: the WebSocket transcription server (one model, many sessions).

    sottovoce serve [--host 127.0.0.1] [--port 8765] [--model M] [--device auto|cpu|cuda]
                    [--max-sessions N] [--tls-cert FILE --tls-key FILE] [--api-key-env VAR]
                    [--api-key-file FILE] [--max-upload-mb MB]
                    [--no-batching] [--max-pad-ratio R] [--max-sessions-per-client N]
                    [--idle-audio S] [--session-lifetime S]

The API key is read from the environment variable named by ``--api-key-env`` (never from the
command line, where other users could see it in the process list); several keys, each with its
limits, from ``--api-key-file`` (`engine.server.keys`). Binding anything but
loopback without a key is refused.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.server.limits import SessionLimits

log = logging.getLogger(__name__)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve", help="run the WebSocket transcription server",
        description="Serve live transcription over WebSocket (protocol: docs/protocol.md). "
                    "WhisperLive clients are accepted on the same port.")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--port", type=int, default=8765, help="port (0 = any free port)")
    parser.add_argument("--model", default=None, help="model name or directory (default tiny.en)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--max-sessions", type=int, default=16, metavar="N")
    parser.add_argument("--tls-cert", help="PEM certificate (serves wss://)")
    parser.add_argument("--tls-key", help="PEM private key for --tls-cert")
    parser.add_argument("--api-key-env", metavar="VAR",
                        help="environment variable holding the API key clients must send")
    parser.add_argument("--api-key-file", metavar="FILE",
                        help="keys of several users, one per line: NAME KEY [streams=N] "
                             "[upload_mb=M] [audio_per_min=S] (chmod 600)")
    parser.add_argument("--max-upload-mb", type=float, default=100.0, metavar="MB",
                        help="largest file the OpenAI transcription endpoints take (default 100)")
    parser.add_argument("--no-batching", action="store_true",
                        help="decode one request at a time (for comparison)")
    parser.add_argument("--batch-window-ms", type=float, default=5.0,
                        help="how long the scheduler waits to fill a batch")
    parser.add_argument("--max-pad-ratio", type=float, default=1.6, metavar="R",
                        help="split a batch into runs whose padded audio is within R x the "
                             "real audio (raise it on a GPU)")
    parser.add_argument("--idle-timeout", type=float, default=30.0, metavar="S")
    parser.add_argument("--drain-timeout", type=float, default=30.0, metavar="S",
                        help="on SIGTERM: stop accepting, give sessions this long to get their"
                             " finals, then exit (SIGINT exits at once)")
    # Defaults live in engine.server.limits.SessionLimits (not imported here: CLI start-up).
    parser.add_argument("--max-sessions-per-client", type=int, metavar="N",
                        help="sessions one client address may hold at once (default 4)")
    parser.add_argument("--idle-audio", type=float, metavar="S",
                        help="close a session that sent no audio for S seconds; keepalives "
                             "do not count (default 600)")
    parser.add_argument("--session-lifetime", type=float, metavar="S",
                        help="close a session after S seconds; the client resumes it on a "
                             "new one (default 28800)")
    parser.set_defaults(handler=run)


def session_limits(args: argparse.Namespace) -> SessionLimits:
    from engine.server.limits import SessionLimits

    given = {"per_client": args.max_sessions_per_client, "idle_audio_s": args.idle_audio,
             "lifetime_s": args.session_lifetime}
    return SessionLimits(**{k: v for k, v in given.items() if v is not None})


def run(args: argparse.Namespace) -> int:
    from engine.asr.ct2_decoder import Ct2Runner
    from engine.errors import EngineError
    from engine.server.scheduler import SchedulerOptions
    from engine.server.server import ServerOptions, TranscriptionServer

    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            print(f"error: environment variable {args.api_key_env} is empty or unset",
                  file=sys.stderr)
            return 2
    api_keys: tuple[Any, ...] = ()
    if args.api_key_file:
        from engine.server.keys import read_key_file

        try:
            api_keys = tuple(read_key_file(args.api_key_file))
        except EngineError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    for flag in ("idle_timeout", "batch_window_ms", "max_pad_ratio", "drain_timeout",
                 "max_upload_mb",
                 "idle_audio", "session_lifetime"):
        value = getattr(args, flag)
        if value is not None and not math.isfinite(value):  # NaN passes every `<` downstream
            print(f"error: --{flag.replace('_', '-')} must be a finite number", file=sys.stderr)
            return 2
    try:
        options = ServerOptions(
            host=args.host, port=args.port, max_sessions=args.max_sessions, api_key=api_key,
            api_keys=api_keys, max_upload_bytes=int(args.max_upload_mb * 2**20),
            tls_cert=args.tls_cert, tls_key=args.tls_key, idle_timeout_s=args.idle_timeout,
            limits=session_limits(args),
            scheduler=SchedulerOptions(max_batch=1 if args.no_batching else 16,
                                       window_ms=args.batch_window_ms,
                                       max_pad_ratio=args.max_pad_ratio,
                                       queue_size=max(16, args.max_sessions * 2)))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problem = preflight(options)  # before the model load: fail in a second, not after it
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    runner = Ct2Runner(args.model, device=args.device)
    try:
        runner.load()
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    server = TranscriptionServer(runner, options)
    return asyncio.run(_serve(server, args.drain_timeout))


def preflight(options: Any) -> str | None:
    """What would stop the server from starting, in one line (None: nothing found): a TLS file
    that is missing or does not match its key, an address that cannot be bound."""
    import socket
    import ssl

    from engine.server.server import host_port

    if options.tls_cert is not None:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(options.tls_cert,
                                                                    options.tls_key)
        except FileNotFoundError as exc:
            return f"TLS file not found: {exc.filename or exc}"
        except (OSError, ssl.SSLError) as exc:  # SSLError: key mismatch, not PEM, ...
            return (f"cannot use --tls-cert {options.tls_cert} with --tls-key "
                    f"{options.tls_key}: {getattr(exc, 'reason', None) or exc}")
    try:
        infos = socket.getaddrinfo(options.host, options.port, type=socket.SOCK_STREAM)
        for family, kind, proto, _, address in infos:
            with socket.socket(family, kind, proto) as probe:
                if os.name == "posix":  # as asyncio's server does: TIME_WAIT does not block
                    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(address)
    except OSError as exc:
        return f"cannot listen on {host_port(options.host, options.port)}: {exc.strerror or exc}"
    return None


async def _serve(server: Any, drain_timeout: float = 30.0) -> int:
    from engine.server.server import host_port

    try:
        await server.start()
    except OSError as exc:  # lost a race for the port since the preflight
        print(f"error: cannot listen on {host_port(server.options.host, server.options.port)}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        await server.close()
        return 1
    scheme = "wss" if server.options.tls_cert else "ws"
    # Machine-readable first line: tests and scripts read the port from it (with --port 0).
    print(f"listening {scheme}://{host_port(server.options.host, server.port)} "
          f"model={server.runner.info.name}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    import signal

    received: list[int] = []

    def on_signal(sig: int) -> None:
        received.append(sig)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # Windows has no signal handlers
            loop.add_signal_handler(sig, on_signal, sig)
    await stop.wait()
    if received and received[0] == signal.SIGTERM:  # an orchestrator's stop: drain first
        print("draining", flush=True)
        await server.drain(drain_timeout)
    else:
        await server.close()
    return 0
