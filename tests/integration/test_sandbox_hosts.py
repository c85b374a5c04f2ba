"""Sandbox hosts for real: a host serving its node's process sandboxes over TCP, a gateway's
remote backend placing and reaching them, the cluster secret and TLS between them."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as redis_async

from envscaler.sandbox.backends import make_backend
from envscaler.sandbox.backends.base import SandboxHandle
from envscaler.sandbox.backends.remote import RemoteBackend
from envscaler.sandbox.config import ClusterAuth
from envscaler.sandbox.errors import RuntimeFault, SandboxGone, SandboxUnavailable
from envscaler.sandbox.hosts.connection import HostConnection, HostUnreachable
from envscaler.sandbox.hosts import wire
from envscaler.sandbox.hosts.server import HandshakeLimits, SandboxHost
from envscaler.sandbox.hosts.registry import FORGET_AFTER, HOSTS_KEY, HostInfo, HostRegistry
from envscaler.sandbox.sandbox import Sandbox
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import COUNTER_SOURCE, own_redis_db
from tests.integration.hosts_fixtures import SECRET, host_in_process, remote_config

AUTH = ClusterAuth(SECRET.encode())


@pytest.fixture
def hosts_redis(redis_url: str) -> str:
    return own_redis_db(redis_url, 11)


async def started(redis_url: str, auth: ClusterAuth) -> RemoteBackend:
    backend = make_backend(remote_config(redis_url, auth), "gateway-test")
    assert isinstance(backend, RemoteBackend)
    await backend.start()
    return backend


async def load_counter(sandbox: Sandbox) -> None:
    await sandbox.load(source=COUNTER_SOURCE, class_name="CounterLab",
                       tools=["increment", "token"], init_config={}, seed=7,
                       max_result_bytes=65536, timeout=scaled(10))


@pytest.fixture
async def host(hosts_redis: str) -> AsyncIterator[SandboxHost]:
    async with host_in_process(hosts_redis, "a", AUTH) as serving:
        yield serving


async def test_a_gateway_runs_a_sandbox_of_a_host_over_tcp(hosts_redis: str,
                                                          host: SandboxHost) -> None:
    backend = await started(hosts_redis, AUTH)
    try:
        handle = await backend.create({"envscaler.session": "s1"})
        assert handle.instance == host.id  # the handle names the host that holds it
        sandbox = Sandbox(handle, backend)
        await load_counter(sandbox)
        first = await sandbox.call("increment", {"name": "x"}, timeout=scaled(5))
        second = await sandbox.call("increment", {"name": "x", "by": 2}, timeout=scaled(5),
                                    executed=1)
        assert first["data"]["value"] == 1 and second["data"]["value"] == 3
        assert (await sandbox.state(timeout=scaled(5)))["counters"] == {"x": 3}
        with pytest.raises(RuntimeFault) as fault:
            await sandbox.call("increment", {"name": "x"}, timeout=scaled(5), executed=5)
        assert fault.value.kind == "Diverged"
        assert await backend.verify(handle)
        await sandbox.destroy()
        assert not await backend.verify(handle)  # no longer leased to anyone
        with pytest.raises(SandboxGone):
            await Sandbox(handle, backend).ping()
    finally:
        await backend.close()


async def test_a_host_serves_only_the_sandboxes_it_gave_out(hosts_redis: str,
                                                           host: SandboxHost) -> None:
    backend = await started(hosts_redis, AUTH)
    try:
        handle = await backend.create({"envscaler.session": "s2"})
        forged = SandboxHandle(id="0" * 16, name="0" * 16, backend=handle.backend,
                               instance=handle.instance)
        older = SandboxHandle(handle.id, handle.name, handle.backend, handle.instance,
                              handle.generation + 1)
        for other in (forged, older):
            assert not await backend.verify(other)
            with pytest.raises(SandboxGone):
                await Sandbox(other, backend).ping()
        await Sandbox(handle, backend).destroy()
    finally:
        await backend.close()


async def test_a_gateway_without_the_secret_is_refused(hosts_redis: str,
                                                       host: SandboxHost) -> None:
    """It cannot verify the host's registry entry (signed with the secret), so it sees no
    host; dialling the host anyway, it is refused."""
    other = ClusterAuth(secrets.token_hex(32).encode())
    backend = await started(hosts_redis, other)
    connection = HostConnection(host.id, host.address.advertise, other)
    try:
        assert backend.live_hosts() == []
        with pytest.raises(SandboxUnavailable, match="no sandbox host is live"):
            await backend.create({"envscaler.session": "s3"})
        with pytest.raises(HostUnreachable, match="cannot prove"):
            await connection.request("capacity")
    finally:
        await connection.close()
        await backend.close()


def make_certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "host.pem", directory / "host.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


async def test_tls_between_gateway_and_host(hosts_redis: str, tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    host_auth = ClusterAuth(SECRET.encode(), tls_cert=cert, tls_key=key)
    async with host_in_process(hosts_redis, "tls", host_auth):
        plain = await started(hosts_redis, AUTH)
        try:
            with pytest.raises(SandboxUnavailable):
                await plain.create({"envscaler.session": "s4"})
        finally:
            await plain.close()
        backend = await started(hosts_redis, ClusterAuth(SECRET.encode(), tls_ca=cert))
        try:
            sandbox = Sandbox(await backend.create({"envscaler.session": "s4"}), backend)
            await load_counter(sandbox)
            assert (await sandbox.call("increment", {"name": "t"}, timeout=scaled(5)))["data"] == {
                "name": "t", "before": 0, "value": 1}
            await sandbox.destroy()
        finally:
            await backend.close()


async def test_sessions_go_to_the_least_loaded_host(hosts_redis: str) -> None:
    async with host_in_process(hosts_redis, "p", AUTH, pool_size=2) as one, \
            host_in_process(hosts_redis, "q", AUTH, pool_size=2) as two:
        backend = await started(hosts_redis, AUTH)
        try:
            handles = [await backend.create({"envscaler.session": f"s{n}"}) for n in range(4)]
            assert sorted(h.instance for h in handles) == sorted([one.id, two.id] * 2)
            for handle in handles:
                await backend.destroy(handle)
        finally:
            await backend.close()


async def test_hosts_silent_for_long_are_forgotten(hosts_redis: str, host: SandboxHost) -> None:
    """A host that left without withdrawing (killed, its node lost) is removed from the
    registry once silent for FORGET_AFTER; live hosts stay, and a gateway places on them."""
    client = redis_async.Redis.from_url(hosts_redis, decode_responses=True)
    gone = HostInfo(id="gone", address="127.0.0.1:9", ready=4, live=4, capacity=8, interval=1.0,
                    beat=time.time() - FORGET_AFTER - 1)
    try:
        await HostRegistry(client, AUTH.secret).publish(gone)
        backend = await started(hosts_redis, AUTH)
        try:
            assert "gone" not in await client.hkeys(HOSTS_KEY)
            assert [h.id for h in backend.live_hosts()] == [host.id]
        finally:
            await backend.close()
    finally:
        await client.aclose()


async def closed_by_the_host(reader: asyncio.StreamReader) -> bool:
    """Whether the host closed the connection (within a bound far above the handshake's
    timeout: before this fix a silent connection was held for a minute)."""
    try:
        return await asyncio.wait_for(reader.read(1), timeout=scaled(30)) == b""
    except ConnectionResetError:
        return True


async def test_connections_that_never_handshake_are_capped_and_timed_out(
        hosts_redis: str, tmp_path: Path) -> None:
    """TCP connections that never start TLS: beyond ``pending`` of them the host closes a new
    one at once, and each is closed after ``timeout``; then a gateway is served again."""
    cert, key = make_certificate(tmp_path)
    host_auth = ClusterAuth(SECRET.encode(), tls_cert=cert, tls_key=key)
    limits = HandshakeLimits(timeout=scaled(1.0), pending=3)
    async with host_in_process(hosts_redis, "slow", host_auth, limits=limits) as host:
        address, port = wire.split_address(host.address.advertise)
        idle = [await asyncio.open_connection(address, port) for _ in range(limits.pending)]
        async with asyncio.timeout(scaled(30)):  # each counted as handshaking (before TLS, too)
            while host._handshaking < limits.pending:
                await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection(address, port)  # one too many
        assert await closed_by_the_host(reader)
        writer.close()
        for reader, writer in idle:
            assert await closed_by_the_host(reader)
            writer.close()
        backend = await started(hosts_redis, ClusterAuth(SECRET.encode(), tls_ca=cert))
        try:
            sandbox = Sandbox(await backend.create({"envscaler.session": "s5"}), backend)
            await sandbox.destroy()
        finally:
            await backend.close()
