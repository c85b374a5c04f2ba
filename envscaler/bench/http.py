"""A blocking keep-alive HTTP/1.1 connection over a raw socket, for one-at-a-time measurements
(session creation, reset, validation): a few microseconds of client work per request, so the
figure is the gateway's."""

from __future__ import annotations

import json
import socket
import time
from typing import Any, Self

from envscaler.bench.loadgen import build_request


class HttpConnection:
    def __init__(self, host: str, port: int, timeout: float = 60.0) -> None:
        self.host, self.port = host, port
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray()

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        self.sock.sendall(build_request(self.host, self.port, method, path, body))
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            self._read()
        head = bytes(self.buffer[:end]).lower()
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name == b"content-length":
                length = int(value)
        total = end + 4 + length
        while len(self.buffer) < total:
            self._read()
        body_bytes = bytes(self.buffer[end + 4:total])
        del self.buffer[:total]
        return status, body_bytes

    def timed(self, method: str, path: str, body: Any = None,
              expect: int | tuple[int, ...] = (200, 201)) -> tuple[float, Any]:
        """(seconds, decoded JSON body); raises when the status is not expected."""
        started = time.perf_counter()
        status, raw = self.request(method, path, body)
        elapsed = time.perf_counter() - started
        expected = (expect,) if isinstance(expect, int) else expect
        if status not in expected:
            raise RuntimeError(f"{method} {path} answered {status}: {raw[:300]!r}")
        return elapsed, (json.loads(raw) if raw else None)

    def _read(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
