"""A hostile OpenAI-like LLM server on 127.0.0.1, for tests/test_hardening_llm.py.

Each connection is answered as ``behaviour`` says:
- "answer": a valid chat completion whose content is ``content`` (escape sequences and all);
- "error": HTTP 500 with a body holding escape sequences and the request's Authorization header
  echoed back;
- "nested": HTTP 200 with JSON nested deeper than any parser's recursion limit;
- "trickle-body": headers, then a body of one byte every ``tick_s`` for ever;
- "trickle-headers": a status line, then header bytes one every ``tick_s`` for ever.

Trickling waits on the server's stop event (not sleeps), so `close` ends every handler at once.
``requests`` holds each request's headers (lowercased names) as received.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading

ESCAPES = "\x1b[2J\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07"


class HostileLLM:
    def __init__(self, behaviour: str, content: str = "", tick_s: float = 0.05) -> None:
        self.behaviour, self.content, self.tick_s = behaviour, content, tick_s
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.requests: list[dict[str, str]] = []
        self.stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._accept = threading.Thread(target=self._serve, name="hostile-llm", daemon=True)

    def __enter__(self) -> HostileLLM:
        self._accept.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.stop.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes accept(); close() alone does not
        self.sock.close()
        for conn in self._conns:
            conn.close()
        for thread in [self._accept, *self._threads]:
            thread.join(10)

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            thread = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _read_request(self, conn: socket.socket) -> dict[str, str]:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in
                   (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        self.requests.append(headers)
        return headers

    def _handle(self, conn: socket.socket) -> None:
        try:
            headers = self._read_request(conn)
            getattr(self, "_" + self.behaviour.replace("-", "_"))(conn, headers)
        except OSError:
            pass  # the client gave up: what these servers are for

    @staticmethod
    def _send(conn: socket.socket, status: str, body: bytes) -> None:
        conn.sendall(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                     + body)

    def _answer(self, conn: socket.socket, _headers: dict[str, str]) -> None:
        body = {"choices": [{"message": {"role": "assistant", "content": self.content},
                             "finish_reason": "stop"}],
                "data": [{"id": self.content or "model"}]}
        self._send(conn, "200 OK", json.dumps(body).encode())

    def _error(self, conn: socket.socket, headers: dict[str, str]) -> None:
        auth = headers.get("authorization", "")
        body = (f'{ESCAPES}{{"error": "bad request\x7f\x7f\x1b[31m", '
                f'"echo": "Authorization: {auth}"}}\r\n\x1b[0m')
        self._send(conn, "500 Internal Server Error", body.encode())

    def _nested(self, conn: socket.socket, _headers: dict[str, str]) -> None:
        depth = 200_000
        self._send(conn, "200 OK", b'{"choices": ' + b"[" * depth + b"]" * depth + b"}")

    def _trickle_body(self, conn: socket.socket, _headers: dict[str, str]) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100000000\r\n\r\n")
        while not self.stop.wait(self.tick_s):
            conn.sendall(b" ")

    def _trickle_headers(self, conn: socket.socket, _headers: dict[str, str]) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        header = b"X-Slow: " + b"a" * 100 + b"\r\n"
        while not self.stop.is_set():
            for byte in header:
                if self.stop.wait(self.tick_s):
                    return
                conn.sendall(bytes([byte]))
