"""A sandbox host: the one process of a node that owns its sandbox backend, warm pool and socket
root, and serves them to gateways anywhere over authenticated TCP (``wire``). The Unix sockets
stay on the node: a gateway names a sandbox by its handle, and the host reaches it.

A host serves only the sandboxes it gave out itself (its leases), of the generation it gave
out: a handle of another host, of an earlier life of this one, or of a container recycled since,
is answered ``SandboxGone``, so the gateway rebuilds the session by replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from dataclasses import asdict, dataclass
from typing import Any

from envscaler.sandbox.backends.base import CHECKER, RUNTIME, SandboxBackend, SandboxHandle
from envscaler.sandbox.errors import SandboxError, SandboxGone
from envscaler.sandbox.pool import SandboxPool
from envscaler.sandbox.config import ClusterAuth
from envscaler.sandbox.hosts import wire
from envscaler.sandbox.hosts.faults import BadHostRequest, to_wire
from envscaler.sandbox.hosts.registry import HostInfo, HostRegistry
from envscaler.sandbox.runtime import protocol
from envscaler.sandbox.sandbox import Sandbox

log = logging.getLogger("envscaler.sandbox.host")

RUNTIME_OPS = {"ping", "load", "reset", "call", "state", "snapshot", "check"}


@dataclass(frozen=True)
class HandshakeLimits:
    """What a connection that has not proved the cluster secret may cost: ``timeout`` seconds
    for its TLS and cluster handshakes together, and at most ``pending`` such connections at
    once (more are closed at their first byte), so strangers cannot hold the host's sockets."""

    timeout: float = wire.HANDSHAKE_TIMEOUT
    pending: int = 64


@dataclass(frozen=True)
class HostAddress:
    listen: str  # where it binds; port 0: any free port
    advertise: str  # what gateways are told (the node's address, when it binds 0.0.0.0)

    def bound(self, port: int) -> HostAddress:
        """The address with the port it was given in place of 0."""
        host, advertised = wire.split_address(self.advertise)
        host = f"[{host}]" if ":" in host else host
        return HostAddress(self.listen, f"{host}:{advertised or port}")


class SandboxHost:
    """The node's pool and backend behind a TCP server, published in the registry."""

    def __init__(self, pool: SandboxPool, auth: ClusterAuth, registry: HostRegistry,
                 address: HostAddress, interval: float = 1.0,
                 limits: HandshakeLimits = HandshakeLimits()) -> None:
        self.pool = pool
        self.backend: SandboxBackend = pool.backend
        self.id = self.backend.instance  # handles name their host by their instance
        self.auth = auth
        self.registry = registry
        self.address = address
        self.interval = interval
        self.limits = limits
        self._handshaking = 0
        self._tls: ssl.SSLContext | None = None
        self._leased: dict[tuple[str, int], Sandbox] = {}  # by handle key
        self._server: asyncio.Server | None = None
        self._beating: asyncio.Task[None] | None = None
        self._requests: set[asyncio.Task[None]] = set()
        self._peers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        """Start the pool, listen, and publish the first heartbeat (gateways may place on it
        from then on)."""
        await self.pool.start()
        self._tls = self.auth.server_tls()
        host, port = wire.split_address(self.address.listen)
        self._server = await asyncio.start_server(self._serve, host, port,
                                                  limit=wire.MAX_FRAME_BYTES)
        self.address = self.address.bound(self._server.sockets[0].getsockname()[1])
        await self.registry.publish(self.info())
        self._beating = asyncio.create_task(self._beat_forever(), name="envscaler-host-beat")
        log.info("sandbox host started id=%s listen=%s advertise=%s backend=%s tls=%s", self.id,
                 self.address.listen, self.address.advertise, self.backend.name,
                 self.auth.tls_cert is not None)

    def info(self) -> HostInfo:
        stats = self.pool.stats()
        return HostInfo(id=self.id, address=self.address.advertise, ready=stats.ready,
                        live=stats.live, capacity=stats.capacity, interval=self.interval,
                        beat=time.time(), backend=self.backend.name)

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.registry.publish(self.info())
            except Exception as exc:  # noqa: BLE001 - Redis away: retried at the next beat
                log.error("host heartbeat failed id=%s error=%r", self.id, exc)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._peers.add(writer)
        try:
            channel = await self._authenticated(reader, writer)
            if channel is not None:
                await self._converse(channel)
        finally:
            self._peers.discard(writer)
            writer.close()

    async def _authenticated(self, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> wire.Channel | None:
        """The connection's sealed channel once the peer proved the secret (after TLS, when the
        host has a certificate), within ``limits``; None when it did not."""
        peer = writer.get_extra_info("peername")
        if self._handshaking >= self.limits.pending:
            log.warning("refused a connection peer=%s error=%d connections are already "
                        "handshaking", peer, self._handshaking)
            return None
        self._handshaking += 1
        try:
            async with asyncio.timeout(self.limits.timeout):
                if self._tls is not None:
                    await writer.start_tls(self._tls, ssl_handshake_timeout=self.limits.timeout)
                return await wire.authenticate_gateway(
                    reader, writer, self.auth.secret,
                    wire.HostIdentity(self.id, self.address.advertise))
        except (wire.HostAuthFailed, OSError, TimeoutError, asyncio.IncompleteReadError,
                protocol.ProtocolError) as exc:
            log.warning("refused a connection peer=%s error=%r", peer, exc)
            return None
        finally:
            self._handshaking -= 1

    async def _converse(self, channel: wire.Channel) -> None:
        """Answer the gateway's requests, each in a task of its own."""
        sending = asyncio.Lock()
        try:
            while True:
                message = await channel.receive()
                task = asyncio.create_task(self._answer(message, channel, sending))
                self._requests.add(task)
                task.add_done_callback(self._requests.discard)
        except (OSError, asyncio.IncompleteReadError, protocol.ProtocolError) as exc:
            if isinstance(exc, protocol.ProtocolError):
                log.warning("closed a connection error=%s", exc)
            return  # the gateway left, or its frames were garbage or tampered with: it ends

    async def _answer(self, message: dict[str, Any], channel: wire.Channel,
                      sending: asyncio.Lock) -> None:
        try:
            reply = {"ok": True, "result": await self._dispatch(message)}
        except Exception as exc:  # noqa: BLE001 - every failure is answered, by name
            reply = {"ok": False, "error": to_wire(exc)}
        with contextlib.suppress(OSError):  # the gateway left: nobody waits for the reply
            async with sending:
                await channel.send({"id": message.get("id"), **reply})

    async def _dispatch(self, message: dict[str, Any]) -> Any:
        op = message.get("op")
        if op == "create":
            return await self._create(message)
        if op == "capacity":
            return asdict(self.info())
        if op == "health":
            return await self.backend.health()
        sandbox = self._leased_sandbox(message.get("handle"))
        if op == "runtime":
            return await self._runtime(sandbox, message)
        if op == "destroy":
            await self._destroy(sandbox)
            return None
        if op == "verify":
            return sandbox is not None
        if op == "is_running":
            return sandbox is not None and await self.backend.is_running(sandbox.handle)
        if op == "diagnose":
            return "" if sandbox is None else await self.backend.diagnose(sandbox.handle)
        raise BadHostRequest(f"unknown op {op!r}")

    async def _create(self, message: dict[str, Any]) -> dict[str, Any]:
        labels, role = message.get("labels"), message.get("role", RUNTIME)
        if not (isinstance(labels, dict) and all(isinstance(v, str) for v in labels.values())):
            raise BadHostRequest("labels is an object of strings")
        if role == RUNTIME:
            sandbox = await self.pool.claim(labels.get("envscaler.session", ""))
        elif role == CHECKER:
            sandbox = Sandbox(await self.backend.create(labels, CHECKER), self.backend)
        else:
            raise BadHostRequest(f"unknown role {role!r}")
        self._leased[sandbox.handle.key] = sandbox
        return sandbox.handle.to_dict()

    def _leased_sandbox(self, data: object) -> Sandbox | None:
        """The leased sandbox ``data`` names (same id and generation), or None."""
        try:
            handle = SandboxHandle.from_dict(data)
        except ValueError:
            return None
        sandbox = self._leased.get(handle.key)
        if sandbox is None or sandbox.destroyed or sandbox.handle != handle:
            return None
        return sandbox

    async def _runtime(self, sandbox: Sandbox | None, message: dict[str, Any]) -> Any:
        request, limit = message.get("message"), message.get("max_reply_bytes")
        if not (isinstance(request, dict) and request.get("op") in RUNTIME_OPS):
            raise BadHostRequest(f"not a runtime request this host relays: {request!r:.200}")
        if limit is not None and type(limit) is not int:
            raise BadHostRequest("max_reply_bytes is an integer")
        if sandbox is None:
            raise SandboxGone(f"host {self.id} holds no such sandbox (gone, or never its own)")
        return await sandbox.client.request(request, limit)

    async def _destroy(self, sandbox: Sandbox | None) -> None:
        """A gateway is done with it: back to the pool (recycled where the backend can; a
        keeper's recycle kills every process of it, so this is safe after a deadline too), or
        killed."""
        if sandbox is None:
            return
        self._leased.pop(sandbox.handle.key, None)
        if sandbox.pooled:
            self.pool.reclaim(sandbox)
        else:
            await sandbox.destroy()

    async def close(self) -> None:
        """Stop serving, withdraw from the registry, kill every sandbox of this host."""
        if self._beating is not None:
            self._beating.cancel()
        if self._server is not None:
            self._server.close()
            for writer in list(self._peers):
                writer.close()
            await self._server.wait_closed()
        for task in list(self._requests):
            task.cancel()
        await asyncio.gather(*self._requests, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.registry.withdraw(self.id)
        for sandbox in list(self._leased.values()):
            with contextlib.suppress(SandboxError):
                await sandbox.destroy()
        self._leased.clear()
        await self.pool.close()
        log.info("sandbox host stopped id=%s", self.id)
