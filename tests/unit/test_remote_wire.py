"""The gateway-host protocol's parts that need no sandbox: the mutual handshake over a real
loopback connection, errors across the wire, the registry's entries, the store's hash tags."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import socket
import time
from collections.abc import Callable

import pytest
from pydantic import ValidationError

from envscaler.common import jsoncodec
from envscaler.sandbox.config import ClusterAuth
from envscaler.sandbox.errors import (
    CallTimeout,
    CapacityExhausted,
    RuntimeFault,
    SandboxCounterfeit,
    SandboxGone,
    SandboxUnavailable,
)
from envscaler.sandbox.hosts import wire
from envscaler.sandbox.hosts.connection import HostConnection
from envscaler.sandbox.hosts.faults import from_wire, to_wire
from envscaler.sandbox.hosts.registry import HostInfo, signature, verified
from envscaler.sandbox.runtime import protocol
from envscaler.server.settings import Settings
from envscaler.server.store import (
    LIVE_KEYS,
    SLOTS,
    call_ids_key,
    calls_key,
    live_key,
    lock_key,
    session_key,
)


SECRET, OTHER_SECRET = secrets.token_hex(32).encode(), secrets.token_hex(32).encode()
HOST = wire.HostIdentity("h1", "127.0.0.1:7420")


async def handshake(host_secret: bytes, gateway_secret: bytes, host: wire.HostIdentity = HOST,
                    dialled: wire.HostIdentity = HOST) -> tuple[object, object]:
    """Both sides of the handshake on a loopback connection (the host being ``host``, the
    gateway expecting ``dialled``): each side's outcome (its channel, or its exception)."""
    outcome: dict[str, object] = {}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            outcome["host"] = await wire.authenticate_gateway(reader, writer, host_secret, host)
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            outcome["host"] = exc
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        gateway: object = await wire.authenticate_host(reader, writer, gateway_secret, dialled)
    except Exception as exc:  # noqa: BLE001 - the outcome under test
        gateway = exc
    writer.close()
    server.close()
    await server.wait_closed()
    while "host" not in outcome:
        await asyncio.sleep(0.01)
    return outcome["host"], gateway


async def test_both_sides_trust_each_other_with_the_same_secret() -> None:
    host, gateway = await handshake(SECRET, SECRET)
    assert isinstance(host, wire.Channel) and isinstance(gateway, wire.Channel)


async def test_a_gateway_refuses_a_host_that_cannot_prove_the_secret() -> None:
    host, gateway = await handshake(OTHER_SECRET, SECRET)
    assert isinstance(gateway, wire.HostAuthFailed)
    assert not isinstance(host, wire.Channel)  # the gateway left without proving anything


@pytest.mark.parametrize("dialled", [wire.HostIdentity("h1", "127.0.0.1:9999"),
                                     wire.HostIdentity("h2", "127.0.0.1:7420")])
async def test_the_proofs_bind_the_hosts_id_and_the_dialled_address(
        dialled: wire.HostIdentity) -> None:
    """A relay at another address (or a host other than the one meant) passes on a real host's
    proof in vain: the gateway dialled another address, or meant another host."""
    host, gateway = await handshake(SECRET, SECRET, dialled=dialled)
    assert isinstance(gateway, wire.HostAuthFailed) and not isinstance(host, wire.Channel)


class Tap:
    """A loopback relay between a gateway and a host that records and may rewrite the bytes
    (host-bound frames after the handshake's two) going to the host."""

    def __init__(self, rewrite: Callable[[list[bytes]], list[bytes]]) -> None:
        self.rewrite = rewrite
        self.seen = bytearray()

    async def relay(self, secret: bytes) -> tuple[wire.Channel, wire.Channel]:
        """The gateway's and the host's channel, the tap between them."""
        hosts: asyncio.Queue[wire.Channel] = asyncio.Queue()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await hosts.put(await wire.authenticate_gateway(reader, writer, secret, HOST))

        host_server = await asyncio.start_server(serve, "127.0.0.1", 0)
        host_reader, host_writer = await asyncio.open_connection(
            "127.0.0.1", host_server.sockets[0].getsockname()[1])
        gateway_side, tap_side = socket.socketpair()
        gateway_reader, gateway_writer = await asyncio.open_connection(sock=gateway_side)
        tap_reader, tap_writer = await asyncio.open_connection(sock=tap_side)
        self._tasks = [asyncio.create_task(self._pipe(tap_reader, host_writer, True)),
                       asyncio.create_task(self._pipe(host_reader, tap_writer, False))]
        gateway = await wire.authenticate_host(gateway_reader, gateway_writer, secret, HOST)
        self._server = host_server
        return gateway, await hosts.get()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    to_host: bool) -> None:
        frames = 0
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                header = await reader.readexactly(4)
                body = await reader.readexactly(int.from_bytes(header, "big"))
                frames += 1
                batch = [header + body]
                if to_host:
                    self.seen += body
                    if frames > 2:  # after the hello and the gateway's proof
                        batch = self.rewrite(batch)
                for frame in batch:
                    writer.write(frame)
                await writer.drain()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._server.close()


def flip_a_byte(batch: list[bytes]) -> list[bytes]:
    frame = bytearray(batch[0])
    frame[-1] ^= 1
    return [bytes(frame)]


class Replay:
    def __init__(self) -> None:
        self.first: bytes | None = None

    def __call__(self, batch: list[bytes]) -> list[bytes]:
        if self.first is None:
            self.first = batch[0]
            return batch
        return [self.first]  # the second request replaced by the first once more


async def test_frames_after_the_handshake_are_sealed() -> None:
    tap = Tap(lambda batch: batch)
    gateway, host = await tap.relay(SECRET)
    try:
        await gateway.send({"id": 1, "op": "runtime", "source": "class Secretive: pass"})
        assert (await host.receive())["source"] == "class Secretive: pass"
        await host.send({"id": 1, "ok": True, "result": {"reward": 0.0}})
        assert (await gateway.receive())["result"] == {"reward": 0.0}
        assert b"Secretive" not in tap.seen and b"runtime" not in tap.seen
    finally:
        await tap.close()


@pytest.mark.parametrize("rewrite", [flip_a_byte, Replay()], ids=["altered", "replayed"])
async def test_a_frame_altered_or_replayed_on_the_path_is_refused(
        rewrite: Callable[[list[bytes]], list[bytes]]) -> None:
    tap = Tap(rewrite)
    gateway, host = await tap.relay(SECRET)
    try:
        for number in (1, 2):
            await gateway.send({"id": number, "op": "call", "arguments": {"n": number}})
        if rewrite is flip_a_byte:
            with pytest.raises(protocol.ProtocolError, match="integrity"):
                await host.receive()
        else:
            assert (await host.receive())["id"] == 1
            with pytest.raises(protocol.ProtocolError, match="integrity"):
                await host.receive()
    finally:
        await tap.close()


async def test_a_frame_too_long_for_the_handshake_is_refused_unread() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data((wire.HANDSHAKE_BYTES + 1).to_bytes(4, "big"))
    with pytest.raises(protocol.ProtocolError):
        await wire.receive(reader, wire.HANDSHAKE_BYTES)


def test_sending_on_a_closed_connection_is_a_connection_error() -> None:
    """A request that took the connection before another saw it break and closed it fails as
    the connection's loss (the gateway rebuilds the session), never as the RuntimeError uvloop
    (the gateway's loop) raises writing to a closed transport."""
    uvloop = pytest.importorskip("uvloop")

    async def send_on_closed() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        try:
            _, writer = await asyncio.open_connection("127.0.0.1",
                                                      server.sockets[0].getsockname()[1])
            writer.close()
            await writer.wait_closed()
            await wire.send(writer, {"id": 1, "op": "verify"})
        finally:
            server.close()

    with pytest.raises(ConnectionResetError):
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(send_on_closed())


@pytest.mark.parametrize("error", [
    RuntimeFault("Diverged", "ran 3 calls"), CapacityExhausted("engine busy", 2.5),
    CapacityExhausted("every slot taken", 1.0, full=True), CallTimeout("late", 5.0), SandboxGone("died"), SandboxCounterfeit("forged"),
    SandboxUnavailable("no engine")])
def test_errors_cross_the_wire_as_themselves(error: Exception) -> None:
    again = from_wire(to_wire(error))
    assert type(again) is type(error) and str(again) == str(error)
    assert getattr(again, "retry_after", None) == getattr(error, "retry_after", None)
    assert getattr(again, "kind", None) == getattr(error, "kind", None)
    assert getattr(again, "full", None) == getattr(error, "full", None)  # 429 or 503 at the edge


def test_a_malformed_error_is_a_sandbox_error() -> None:
    assert type(from_wire({"type": "Nonsense", "message": "x"})).__name__ == "SandboxError"
    assert type(from_wire("not an object")).__name__ == "SandboxError"


def test_registry_entries_are_parsed_or_ignored() -> None:
    info = HostInfo("h1", "10.0.0.1:7420", 3, 5, 10, 1.0, time.time(), "docker")
    assert HostInfo.parse(jsoncodec.dumps(info.__dict__)) == info
    assert info.fresh(0.0) and info.in_use() == 2
    assert HostInfo.parse('{"id": "h1"}') is None and HostInfo.parse("[") is None
    stale = HostInfo("h2", "10.0.0.2:7420", 0, 0, 10, 1.0, time.time() - 60)
    assert not stale.fresh(1.0)


def test_every_key_of_a_session_shares_one_hash_tag() -> None:
    for session_id in ("abc", "W9mM97_ZaGW5PRcHgXNo0gie", "envscaler:sessions:{0}:live", "*"):
        keys = [session_key(session_id), calls_key(session_id), call_ids_key(session_id),
                lock_key(session_id), live_key(session_id)]
        tags = {key[key.index("{") + 1:key.index("}")] for key in keys}
        assert len(tags) == 1 and 0 <= int(tags.pop()) < SLOTS
        assert live_key(session_id) in LIVE_KEYS


async def test_a_stale_connection_breaking_late_leaves_the_new_one_alone() -> None:
    """A request that took a connection just before it broke may fail after another request has
    reconnected: that failure closes the old connection only; the requests on the new one go
    on and the next request still uses it."""
    connections: list[asyncio.StreamWriter] = []
    server = await asyncio.start_server(lambda r, w: host(r, w), "127.0.0.1", 0)
    address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"

    async def host(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        channel = await wire.authenticate_gateway(reader, writer, SECRET,
                                                  wire.HostIdentity("h1", address))
        connections.append(writer)
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                message = await channel.receive()
                if message["op"] == "echo":
                    await channel.send({"id": message["id"], "ok": True,
                                        "result": message["text"]})

    connection = HostConnection("h1", address, ClusterAuth(SECRET))
    try:
        assert await connection.request("echo", text="one") == "one"
        stale = connection._link
        connections[0].close()  # the host drops the first connection
        while connection._link is stale:
            await asyncio.sleep(0.01)
        held = asyncio.create_task(connection.request("hold"))  # in flight on the new one
        while len(connections) < 2:
            await asyncio.sleep(0.01)
        connection._broken(stale, ConnectionResetError("late"))  # the stale request's failure
        assert await connection.request("echo", text="two") == "two"
        assert len(connections) == 2 and not held.done()
        held.cancel()
    finally:
        await connection.close()
        server.close()
        await server.wait_closed()


def signed_entry(info: HostInfo, secret: bytes = SECRET) -> str:
    data = dict(info.__dict__)
    return jsoncodec.dumps({**data, "sig": signature(secret, data)})


def test_a_registry_entry_is_trusted_only_when_the_cluster_secret_signs_it() -> None:
    info = HostInfo("h1", "10.0.0.1:7420", 3, 5, 10, 1.0, time.time(), "docker")
    text = signed_entry(info)
    assert verified(SECRET, "h1", text) == info
    relayed = jsoncodec.loads(text) | {"address": "10.6.6.6:7420"}  # pointed at a relay
    assert verified(SECRET, "h1", jsoncodec.dumps(relayed)) is None
    assert verified(SECRET, "h1", jsoncodec.dumps(info.__dict__)) is None  # unsigned
    assert verified(SECRET, "h1", signed_entry(info, OTHER_SECRET)) is None
    assert verified(SECRET, "h2", text) is None  # another host's entry, copied
    assert verified(SECRET, "h1", "[") is None


@pytest.mark.parametrize("weak", ["abcd", "test-cluster-secret", "s3cret" * 20,
                                  secrets.token_hex(16), "ab" * 32, "0123456789abcdef" * 4])
def test_a_weak_cluster_secret_is_refused_naming_the_setting_and_the_remedy(weak: str) -> None:
    with pytest.raises(ValueError, match="ENVSCALER_CLUSTER_SECRET .*openssl rand -hex 32"):
        ClusterAuth(weak.encode())
    with pytest.raises(ValidationError, match="ENVSCALER_CLUSTER_SECRET"):
        Settings.model_validate({"cluster_secret": weak})


@pytest.mark.parametrize("strong", [secrets.token_hex(32), secrets.token_hex(48),
                                    base64.b64encode(secrets.token_bytes(32)).decode(),
                                    secrets.token_urlsafe(32)])
def test_thirty_two_random_bytes_in_hex_or_base64_make_a_cluster_secret(strong: str) -> None:
    assert ClusterAuth(strong.encode()).secret == strong.encode()
    assert Settings.model_validate({"cluster_secret": strong}).cluster_secret == strong
