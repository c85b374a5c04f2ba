"""A lean HTTP/1.1 load generator, run as its own process so that its CPU is counted apart.

Each connection is a keep-alive TCP connection driven by an `asyncio.Protocol` (uvloop when
installed) that sends one request, waits for the whole response (``Content-Length`` framing, which
is all the gateway sends), and sends the next: a closed loop, so concurrency = connections. It
costs a few tens of microseconds of CPU per request, a tenth of what httpx costs, which keeps the
gateway the thing being measured. Requests are prebuilt bytes; nothing is parsed but the status
line and the length.

    python -m envscaler.bench.loadgen < spec.json > result.json

It prints ``{"event": "window"}`` when the measuring window opens, then the result, one JSON
object a line.

spec::

    {"host": "127.0.0.1", "port": 8000, "warmup": 1.0, "duration": 5.0,
     "max_requests": null,            # per connection, counted after warm-up (optional)
     "connections": [{"requests": [{"method": "POST", "path": "/v1/...", "body": {...}}]}, ...]}

Each connection cycles through its own requests. Latencies are those of requests that started
inside the measuring window (after ``warmup``); throughput is completions inside the window.
The result: ``summary`` (n, p50/p90/p99/max in ms), ``rps``, ``status`` counts, ``ok_bodies``
(responses containing ``"ok":true``), ``cpu_seconds`` of this process and ``cpu_share`` (its CPU
over the window's wall time: 1.0 is one core), and ``cdf_ms`` (latency quantiles for plots).
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from typing import Any

from envscaler.bench.stats import quantiles_ms, summary

OK_MARK = b'"ok":true'
SPAWN_GRACE = 120.0  # seconds a load generator may take beyond its warm-up and window


def build_request(host: str, port: int, method: str, path: str, body: Any = None) -> bytes:
    payload = b"" if body is None else (body if isinstance(body, bytes) else
                                         json.dumps(body, separators=(",", ":")).encode())
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
    if payload or method in ("POST", "PUT", "PATCH"):
        head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
    return (head + "\r\n").encode() + payload


class _Client(asyncio.Protocol):
    """One keep-alive connection; ``send`` returns a future of (status, body)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.head_end = -1
        self.total = -1
        self.status = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, request: bytes) -> asyncio.Future[tuple[int, bytes]]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.waiter

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        if self.total < 0:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buffer[:end]).lower()
            self.status = int(head[9:12])
            at = head.find(b"\r\ncontent-length:")
            if at < 0:
                self._fail(RuntimeError("response without Content-Length"))
                return
            stop = head.find(b"\r\n", at + 2)
            length = int(head[at + 17:stop if stop > 0 else len(head)])
            self.head_end, self.total = end + 4, end + 4 + length
        if len(buffer) >= self.total:
            body = bytes(buffer[self.head_end:self.total])
            del buffer[:self.total]
            self.total = -1
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result((self.status, body))

    def _fail(self, exc: BaseException) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionResetError("the server closed the connection"))


class _Tally:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.status: dict[int, int] = {}
        self.ok_bodies = 0
        self.completed = 0
        self.errors: list[str] = []


async def _connection(host: str, port: int, requests: list[bytes], window: tuple[float, float],
                      max_requests: int | None, tally: _Tally) -> None:
    loop = asyncio.get_running_loop()
    start, stop = window
    try:
        transport, client = await loop.create_connection(_Client, host, port)
    except OSError as exc:
        tally.errors.append(f"connect: {exc}")
        return
    sent = 0
    try:
        index = 0
        while True:
            began = time.perf_counter()
            if began >= stop or (max_requests is not None and sent >= max_requests):
                break
            request = requests[index]
            index = (index + 1) % len(requests)
            try:
                status, body = await client.send(request)
            except (OSError, RuntimeError) as exc:
                tally.errors.append(f"{type(exc).__name__}: {exc}")
                break
            ended = time.perf_counter()
            if began >= start:
                sent += 1
                tally.latencies.append(ended - began)
                tally.status[status] = tally.status.get(status, 0) + 1
                if OK_MARK in body:
                    tally.ok_bodies += 1
                if ended <= stop:
                    tally.completed += 1
    finally:
        transport.close()


async def run(spec: dict[str, Any], announce: bool = False) -> dict[str, Any]:
    host, port = spec.get("host", "127.0.0.1"), int(spec["port"])
    warmup, duration = float(spec.get("warmup", 0.0)), float(spec.get("duration", 5.0))
    max_requests = spec.get("max_requests")
    connections = [[build_request(host, port, r.get("method", "POST"), r["path"], r.get("body"))
                    for r in c["requests"]] for c in spec["connections"]]
    tally = _Tally()
    now = time.perf_counter()
    window = (now + warmup, now + warmup + duration)
    cpu_before = _cpu_seconds()
    measuring_from = None

    async def mark() -> None:
        nonlocal measuring_from, cpu_before
        await asyncio.sleep(max(window[0] - time.perf_counter(), 0.0))
        measuring_from, cpu_before = time.perf_counter(), _cpu_seconds()
        if announce:  # lets the parent take its own CPU snapshots over the same window
            sys.stdout.write('{"event": "window"}\n')
            sys.stdout.flush()

    marker = asyncio.ensure_future(mark())
    await asyncio.gather(*(_connection(host, port, requests, window, max_requests, tally)
                           for requests in connections))
    await marker
    ended = time.perf_counter()
    cpu = _cpu_seconds() - cpu_before
    wall = max(min(ended, window[1]) - (measuring_from or window[0]), 1e-9)
    completed_wall = max(ended - (measuring_from or window[0]), 1e-9)
    return {
        "generator": "envscaler.bench.loadgen (asyncio Protocol, keep-alive HTTP/1.1"
                     f"{', uvloop' if _uvloop() else ''})",
        "connections": len(connections),
        "summary": summary(tally.latencies),
        "rps": round(tally.completed / wall, 1) if max_requests is None
        else round(len(tally.latencies) / completed_wall, 1),
        "status": {str(k): v for k, v in sorted(tally.status.items())},
        "ok_bodies": tally.ok_bodies,
        "errors": tally.errors[:5],
        "error_count": len(tally.errors),
        "wall_seconds": round(completed_wall, 3),
        "cpu_seconds": round(cpu, 3),
        "cpu_share": round(cpu / completed_wall, 3),
        "cdf_ms": quantiles_ms(tally.latencies),
    }


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> None:
    spec = json.load(sys.stdin)
    if _uvloop():
        import uvloop
        result = uvloop.run(run(spec, announce=True))
    else:
        result = asyncio.run(run(spec, announce=True))
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()


def spawn(spec: dict[str, Any], meter: Any = None) -> dict[str, Any]:
    """Run the load generator in a child process; with a `envscaler.bench.procstat.CpuMeter`, add
    ``cpu_cores`` (cores used by each group over the same window) to the result. A child still
    running `SPAWN_GRACE` seconds after its window should have ended is killed, and said so."""
    import subprocess
    import threading

    from envscaler.bench.waits import WaitExpired

    child = subprocess.Popen([sys.executable, "-m", "envscaler.bench.loadgen"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    bound = spec["warmup"] + spec["duration"] + SPAWN_GRACE
    expired = threading.Event()
    watchdog = threading.Timer(bound, lambda: (expired.set(), child.kill()))
    watchdog.start()
    child.stdin.write(json.dumps(spec))
    child.stdin.close()
    before = None
    result: dict[str, Any] | None = None
    try:
        for line in child.stdout:
            message = json.loads(line)
            if message.get("event") == "window":
                before = meter.snapshot() if meter is not None else None
            else:
                result = message
        child.wait()
    finally:
        watchdog.cancel()
    if expired.is_set():
        raise WaitExpired(f"the load generator: not done within {bound:g} s")
    if child.returncode != 0 or result is None:
        raise RuntimeError(f"the load generator failed (exit {child.returncode})")
    if meter is not None and before is not None:
        shares = meter.shares(before, meter.snapshot())
        shares["load generator"] = result["cpu_share"]
        known = sum(v for k, v in shares.items() if k != "machine")
        shares["other"] = round(max(shares["machine"] - known, 0.0), 3)
        result["cpu_cores"] = shares
    return result
