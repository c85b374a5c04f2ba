"""The gateway-host protocol's parts that need no sandbox: the mutual handshake over a real
loopback connection, errors across the wire, the registry's entries, the store's hash tags."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from common import jsoncodec
from sandbox.config import ClusterAuth
from sandbox.errors import (
    CallTimeout,
    CapacityExhausted,
    RuntimeFault,
    SandboxCounterfeit,
    SandboxGone,
    SandboxUnavailable,
)
from sandbox.remote import wire
from sandbox.remote.connection import HostConnection
from sandbox.remote.faults import from_wire, to_wire
from sandbox.remote.registry import HostInfo
from sandbox.runtime import protocol
from server.store import (
    LIVE_KEYS,
    SLOTS,
    call_ids_key,
    calls_key,
    live_key,
    lock_key,
    session_key,
)


async def handshake(host_secret: bytes, gateway_secret: bytes) -> tuple[object, object]:
    """Both sides of the handshake on a loopback connection: each side's outcome (None: it
    trusts the other; else its exception)."""
    outcome: dict[str, object] = {}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await wire.authenticate_gateway(reader, writer, host_secret)
            outcome["host"] = None
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            outcome["host"] = exc
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        await wire.authenticate_host(reader, writer, gateway_secret)
        gateway: object = None
    except Exception as exc:  # noqa: BLE001 - the outcome under test
        gateway = exc
    writer.close()
    server.close()
    await server.wait_closed()
    while "host" not in outcome:
        await asyncio.sleep(0.01)
    return outcome["host"], gateway


async def test_both_sides_trust_each_other_with_the_same_secret() -> None:
    assert await handshake(b"s3cret", b"s3cret") == (None, None)


async def test_a_gateway_refuses_a_host_that_cannot_prove_the_secret() -> None:
    host, gateway = await handshake(b"another", b"s3cret")
    assert isinstance(gateway, wire.HostAuthFailed)
    assert host is not None  # the gateway left without proving anything


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
    RuntimeFault("Diverged", "ran 3 calls"), CapacityExhausted("full", 2.5),
    CallTimeout("late", 5.0), SandboxGone("died"), SandboxCounterfeit("forged"),
    SandboxUnavailable("no engine")])
def test_errors_cross_the_wire_as_themselves(error: Exception) -> None:
    again = from_wire(to_wire(error))
    assert type(again) is type(error) and str(again) == str(error)
    assert getattr(again, "retry_after", None) == getattr(error, "retry_after", None)
    assert getattr(again, "kind", None) == getattr(error, "kind", None)


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
    secret = b"s3cret"
    connections: list[asyncio.StreamWriter] = []

    async def host(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await wire.authenticate_gateway(reader, writer, secret)
        connections.append(writer)
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                message = await wire.receive(reader)
                if message["op"] == "echo":
                    await wire.send(writer, {"id": message["id"], "ok": True,
                                             "result": message["text"]})

    server = await asyncio.start_server(host, "127.0.0.1", 0)
    address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    connection = HostConnection("h1", address, ClusterAuth(secret))
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
