"""Shared pieces of the reliability suite: session helpers, retrying clients, trajectory audits,
Docker and Redis fault injection, process memory."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import docker
import httpx

from envscaler.server.embedded_redis import EmbeddedRedis
from tests.deadlines import scaled

RETRYABLE = {429, 500, 502, 503}
DOCKERD_LOG = Path(os.environ.get("ENVSCALER_DOCKERD_LOG", "/var/log/envscaler-dockerd.log"))


# ---------------------------------------------------------------- sessions


async def new_session(client: httpx.AsyncClient, env: str = "counter_lab", **body: Any) -> str:
    response = await client.post("/v1/sessions", json={"env": env, **body})
    assert response.status_code == 201, response.text
    return response.json()["session_id"]


async def call(
    client: httpx.AsyncClient, session_id: str, name: str, arguments: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    response = await client.post(
        f"/v1/sessions/{session_id}/calls", json={"name": name, "arguments": arguments, **extra}
    )
    assert response.status_code == 200, response.text
    assert "Traceback" not in response.text
    return response.json()


async def state(client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/sessions/{session_id}/state")
    assert response.status_code == 200, response.text
    return response.json()["state"]


async def entries(client: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/sessions/{session_id}/trajectory")
    assert response.status_code == 200, response.text
    return response.json()["entries"]


def assert_error(response: httpx.Response, status: int | set[int], error_type: str) -> dict:
    statuses = {status} if isinstance(status, int) else status
    assert response.status_code in statuses, response.text
    body = response.json()
    assert body["ok"] is False and set(body) == {"ok", "error"}, body
    assert body["error"]["type"] == error_type, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert "Traceback" not in response.text
    if response.status_code in (429, 503):
        assert int(response.headers["Retry-After"]) >= 1
    return body["error"]


class Retrier:
    """A client that repeats a call with the same ``call_id`` until the gateway answers it, across
    gateways (it moves to the next one after a failure), honouring ``Retry-After``."""

    def __init__(self, clients: Sequence[httpx.AsyncClient], deadline: float = 120.0,
                 seed: int = 0) -> None:
        self.clients = list(clients)
        self.deadline = deadline
        self.random = random.Random(seed)
        self.retries = 0
        self.failures: dict[str, int] = {}

    async def call(self, session_id: str, name: str, arguments: dict[str, Any],
                   call_id: str, start: int = 0) -> dict[str, Any]:
        give_up = time.monotonic() + scaled(self.deadline)
        which = start
        while True:
            client = self.clients[which % len(self.clients)]
            try:
                response = await client.post(
                    f"/v1/sessions/{session_id}/calls",
                    json={"name": name, "arguments": arguments, "call_id": call_id},
                )
            except httpx.TransportError as exc:
                reason, pause = type(exc).__name__, 0.1
            else:
                assert "Traceback" not in response.text
                if response.status_code == 200:
                    return response.json()
                assert response.status_code in RETRYABLE, response.text
                reason = f"{response.status_code} {response.json()['error']['type']}"
                pause = min(float(response.headers.get("Retry-After", "1")), 2.0)
            self.retries += 1
            self.failures[reason] = self.failures.get(reason, 0) + 1
            assert time.monotonic() < give_up, f"call {call_id} never answered: {self.failures}"
            which += 1
            await asyncio.sleep(pause * (0.5 + self.random.random()))


# ---------------------------------------------------------------- trajectory audits


def audit_trajectory(trajectory: list[dict[str, Any]],
                     acknowledged: Sequence[str] | None = None) -> None:
    """Indexes contiguous from 0; no call_id twice in an epoch (call_ids are scoped to it);
    every acknowledged call_id present exactly once and in the order acknowledged (one session's
    client waits for each answer)."""
    assert [e["index"] for e in trajectory] == list(range(len(trajectory))), "index gap"
    calls = [e for e in trajectory if e.get("kind") != "reset" and e.get("call_id")]
    scoped = [(e.get("epoch"), e["call_id"]) for e in calls]
    assert len(scoped) == len(set(scoped)), f"a call_id recorded twice in an epoch: {scoped}"
    ids = [e["call_id"] for e in calls]
    if acknowledged is not None:
        position = {call_id: i for i, call_id in enumerate(ids)}
        missing = [c for c in acknowledged if c not in position]
        assert not missing, f"acknowledged calls missing from the trajectory: {missing}"
        order = [position[c] for c in acknowledged]
        assert order == sorted(order), "acknowledged calls out of order"


def audit_counter(trajectory: list[dict[str, Any]], name: str, start: int = 0) -> int:
    """Each recorded ``increment`` of ``name`` (by 1) saw exactly the value its predecessor left:
    nothing ran twice and nothing was lost. Returns the final value."""
    value = start
    for entry in trajectory:
        if entry.get("name") != "increment" or entry["arguments"].get("name") != name:
            continue
        assert entry["ok"], entry
        assert entry["result"]["data"]["before"] == value, (entry, value)
        value += entry["arguments"].get("by", 1)
    return value


# ---------------------------------------------------------------- Docker


def engine() -> docker.DockerClient:
    return docker.from_env(timeout=scaled(60))


@dataclass(frozen=True)
class Container:
    """A container as one listing saw it (no inspect per container: they come and go)."""

    id: str
    name: str
    status: str
    labels: dict[str, str]

    def kill(self) -> None:
        engine().api.kill(self.id)


def containers_of(instance: str, *, running: bool | None = None) -> list[Container]:
    listed = engine().api.containers(all=True,
                                     filters={"label": f"envscaler.instance={instance}"})
    found = [Container(c["Id"], c["Names"][0].lstrip("/"), c["State"], c["Labels"])
             for c in listed]
    if running is None:
        return found
    return [c for c in found if (c.status == "running") == running]


def dockerd_pid() -> int | None:
    try:
        pid = int(Path("/var/run/docker.pid").read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def docker_answers() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, timeout=scaled(30),
                          check=False).returncode == 0


def stop_dockerd(timeout: float = 60.0) -> None:
    """Stop the Docker engine (SIGTERM, as an operator or a package upgrade would)."""
    pid = dockerd_pid()
    assert pid is not None, "no dockerd runs (/var/run/docker.pid)"
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"dockerd {pid} did not stop within {timeout:g} s")


def start_dockerd(timeout: float = 60.0) -> None:
    """Start the Docker engine the way scripts/bootstrap does, detached from this process, and
    wait until ``docker info`` answers."""
    for stale in ("/var/run/docker.pid", "/var/run/docker/containerd/containerd.pid"):
        Path(stale).unlink(missing_ok=True)
    with open(DOCKERD_LOG, "ab") as log:
        subprocess.Popen(["dockerd"], stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        if docker_answers():
            return
        time.sleep(0.5)
    raise AssertionError(f"the Docker engine did not come back within {timeout:g} s")


# ---------------------------------------------------------------- Redis


class PrivateRedis(EmbeddedRedis):
    """A redis-server of one test, with append-only persistence (``--appendonly yes``) in its own
    directory, that can be killed, paused and started again on the same port and data."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory, persistent=True)

    def kill(self) -> None:
        self.stop()  # SIGKILL: no shutdown save; only the append-only file keeps the data

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


class RedisProxy:
    """A loopback TCP proxy in front of a Redis, in the test's event loop, that can lose or hold
    the reply of a chosen command: what a dropped connection or a stalled socket does to a
    command that Redis received (and applied). A command is chosen by bytes it carries (a
    script's sha, a session id); each rule applies to the next ``times`` commands that match.

    - ``drop``: Redis runs the command; its reply is discarded and the client's connection
      closed, as when a connection drops after the request went out.
    - ``hold``: Redis runs the command; nothing more is sent to that client connection (its
      replies are withheld) until the test ends, as on a socket that stalls.
    """

    def __init__(self, target_url: str) -> None:
        self.target = urlsplit(target_url)
        self.rules: list[list[Any]] = []  # [mode, marker, times left]
        self.matched: dict[str, int] = {"drop": 0, "hold": 0}
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        netloc = self.target.netloc.rsplit("@", 1)
        address = f"127.0.0.1:{port}"
        return urlunsplit(self.target._replace(
            netloc=f"{netloc[0]}@{address}" if len(netloc) == 2 else address))

    def drop_reply(self, marker: bytes, times: int = 1) -> None:
        self.rules.append(["drop", marker, times])

    def hold_replies(self, marker: bytes, times: int = 1) -> None:
        self.rules.append(["hold", marker, times])

    def _match(self, data: bytes) -> str | None:
        for rule in self.rules:
            mode, marker, left = rule
            if left > 0 and marker in data:
                rule[2] -= 1
                self.matched[mode] += 1
                return mode
        return None

    async def __aenter__(self) -> RedisProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for writer in list(self.writers):
            writer.transport.abort()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _serve(self, client_reader: asyncio.StreamReader,
                     client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        upstream_reader, upstream_writer = await asyncio.open_connection(
            self.target.hostname, self.target.port)
        self.writers |= {client_writer, upstream_writer}
        fate: list[str] = []  # what happens to the replies of this connection from now on

        async def requests() -> None:
            while data := await client_reader.read(65536):
                mode = self._match(data)
                if mode is not None and not fate:
                    fate.append(mode)
                upstream_writer.write(data)
                await upstream_writer.drain()

        async def replies() -> None:
            while data := await upstream_reader.read(65536):
                if fate == ["drop"]:
                    client_writer.transport.abort()
                    return
                if fate == ["hold"]:
                    continue
                client_writer.write(data)
                await client_writer.drain()

        pumps = [asyncio.create_task(requests()), asyncio.create_task(replies())]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pass
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            for writer in (client_writer, upstream_writer):
                writer.transport.abort()
                self.writers.discard(writer)
            self.tasks.discard(task)


# ---------------------------------------------------------------- memory


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")
