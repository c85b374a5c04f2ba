"""Someone with write access to Redis, or on the path, between a gateway and a real sandbox host
(`envscaler sandbox host`, a process of its own): a relay on loopback in front of the host.
The relay's registry entry is refused (the cluster secret signs entries), a gateway sent to it
anyway refuses the host's proof (it binds the dialled address) and sends nothing, and where the
relay sits on the very address the host advertises, it reads nothing of the frames and cannot
alter or replay one: the call fails, its result is never forged."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis as redis_sync
import redis.asyncio as redis_async

from envscaler.common import jsoncodec
from envscaler.sandbox.backends import make_backend
from envscaler.sandbox.backends.remote import RemoteBackend
from envscaler.sandbox.config import ClusterAuth
from envscaler.sandbox.errors import SandboxGone
from envscaler.sandbox.hosts.connection import HostConnection, HostUnreachable
from envscaler.sandbox.hosts.registry import HOSTS_KEY, HostRegistry
from envscaler.sandbox.sandbox import Sandbox
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import COUNTER_SOURCE, free_port, own_redis_db
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.hosts_fixtures import SECRET, HostProcess, remote_config

AUTH = ClusterAuth(SECRET.encode())
MARKER = "relay-should-never-read-this"


class Relay:
    """A TCP proxy on loopback in front of ``target``: records what passes each way and, once
    ``tamper`` is set, alters ("flip") or replays ("replay") the next frame the host sends."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.address = ""
        self.to_host = bytearray()
        self.to_gateway = bytearray()
        self.frames_to_host = 0
        self.tamper: str | None = None
        self._last_from_host: bytes | None = None
        self._server: asyncio.Server | None = None

    async def start(self, port: int = 0) -> Relay:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", port)
        self.address = f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = self.target.rsplit(":", 1)
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        await asyncio.gather(self._pipe(reader, upstream_writer, True),
                             self._pipe(upstream_reader, writer, False))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    to_host: bool) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                header = await reader.readexactly(4)
                frame = header + await reader.readexactly(int.from_bytes(header, "big"))
                if to_host:
                    self.to_host += frame
                    self.frames_to_host += 1
                else:
                    self.to_gateway += frame
                    frame = self._tampered(frame)
                writer.write(frame)
                await writer.drain()
        writer.close()

    def _tampered(self, frame: bytes) -> bytes:
        mode, self.tamper = self.tamper, None
        if mode == "flip":  # a reward of 0.0 made something else
            frame = frame[:-1] + bytes([frame[-1] ^ 1])
        elif mode == "replay" and self._last_from_host is not None:
            frame = self._last_from_host  # an earlier answer in place of this one
        self._last_from_host = frame
        return frame

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()


@pytest.fixture
def relay_redis(redis_url: str) -> str:
    return own_redis_db(redis_url, 10)


@contextlib.contextmanager
def host_process(redis_url: str, tmp_path: Path, advertise: str | None = None
                 ) -> Iterator[HostProcess]:
    host = HostProcess(redis_url, "relay", tmp_path / "host.log", pool_size=1,
                       advertise=advertise).start()
    try:
        yield host
    finally:
        host.stop()


@contextlib.asynccontextmanager
async def gateway(redis_url: str) -> AsyncIterator[RemoteBackend]:
    backend = make_backend(remote_config(redis_url, AUTH), "gateway-relay-test")
    assert isinstance(backend, RemoteBackend)
    await backend.start()
    try:
        yield backend
    finally:
        await backend.close()


async def loaded_counter(backend: RemoteBackend) -> Sandbox:
    sandbox = Sandbox(await backend.create({"envscaler.session": "relayed"}), backend)
    await sandbox.load(source=COUNTER_SOURCE + f"\n# {MARKER}\n", class_name="CounterLab",
                       tools=["increment", "token"], init_config={}, seed=7,
                       max_result_bytes=65536, timeout=scaled(10))
    return sandbox


async def live_again(backend: RemoteBackend) -> None:
    async with asyncio.timeout(scaled(30)):
        while not backend.live_hosts():
            await asyncio.sleep(0.1)


async def test_a_registry_entry_rewritten_to_a_relay_is_ignored(relay_redis: str,
                                                                tmp_path: Path) -> None:
    with host_process(relay_redis, tmp_path) as host:
        relay = await Relay(host.address).start()
        client = redis_sync.Redis.from_url(relay_redis, decode_responses=True)
        assert host.process is not None
        os.kill(host.process.pid, signal.SIGSTOP)  # no heartbeat undoes the rewrite meanwhile
        try:
            assert host.id is not None
            entry = jsoncodec.loads(client.hget(HOSTS_KEY, host.id))
            client.hset(HOSTS_KEY, host.id, jsoncodec.dumps({**entry, "address": relay.address}))
            async with gateway(relay_redis) as backend:
                assert backend.live_hosts() == []
            reader = redis_async.Redis.from_url(relay_redis, decode_responses=True)
            assert await HostRegistry(reader, AUTH.secret).hosts() == {}
            await reader.aclose()
        finally:
            os.kill(host.process.pid, signal.SIGCONT)
            client.close()
            await relay.close()
        assert relay.frames_to_host == 0  # no gateway was sent to it


async def test_a_gateway_dialling_a_relay_refuses_the_real_hosts_proof(
        relay_redis: str, tmp_path: Path) -> None:
    """As if a signed entry pointed at the relay (an old one replayed): the host proves itself
    for its own address, which is not the one dialled; the gateway sends nothing more."""
    with host_process(relay_redis, tmp_path) as host:
        relay = await Relay(host.address).start()
        assert host.id is not None
        connection = HostConnection(host.id, relay.address, AUTH)
        try:
            with pytest.raises(HostUnreachable, match="cannot prove it is host"):
                await connection.request("create", labels={"envscaler.session": "x"})
        finally:
            await connection.close()
            await relay.close()
        assert relay.frames_to_host == 1  # the hello alone: no proof, no request


async def test_a_relay_on_the_hosts_own_address_reads_and_alters_nothing(
        relay_redis: str, tmp_path: Path) -> None:
    relay_port = free_port()
    with host_process(relay_redis, tmp_path, advertise=f"127.0.0.1:{relay_port}") as host:
        relay = await Relay(host.address).start(relay_port)
        try:
            async with gateway(relay_redis) as backend:
                sandbox = await loaded_counter(backend)
                assert (await sandbox.call("increment", {"name": MARKER}, timeout=scaled(5)))[
                    "data"]["value"] == 1
                assert relay.frames_to_host > 3 and len(relay.to_gateway) > 0
                for seen in (relay.to_host, relay.to_gateway):
                    assert MARKER.encode() not in seen and b"CounterLab" not in seen
                    assert b"increment" not in seen

                relay.tamper = "flip"
                with pytest.raises(SandboxGone):
                    await sandbox.call("increment", {"name": "a"}, timeout=scaled(5), executed=1)

                await live_again(backend)  # the failure took the host out until it beats
                sandbox = await loaded_counter(backend)  # a new connection
                await sandbox.call("increment", {"name": "b"}, timeout=scaled(5))
                relay.tamper = "replay"
                with pytest.raises(SandboxGone):
                    await sandbox.call("increment", {"name": "b"}, timeout=scaled(5), executed=1)
        finally:
            await relay.close()
