"""Sandboxes on sandbox hosts (``envscaler.sandbox.hosts.server``), reached over TCP: the same interface as
a local backend, so the pool and the session layer do not change shape.

A handle names its host by its ``instance`` (a host's sandboxes carry the host's instance id),
so a session's record says which host holds its sandbox. New sandboxes go to the least-loaded
live host with warm capacity, as the hosts publish themselves in Redis. A host that stops
answering (a failed connection, or heartbeats that stopped) holds no sandbox any more as far as
this gateway is concerned: its sandboxes count as gone (``SandboxGone``, ``verify`` False), so
the session layer rebuilds each of its sessions by replay, on a live host, at its next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from typing import Any

from envscaler.sandbox.backends.base import RUNTIME, SandboxBackend, SandboxHandle
from envscaler.sandbox.config import ClusterConfig, SandboxConfig
from envscaler.sandbox.errors import CapacityExhausted, SandboxGone, SandboxUnavailable
from envscaler.sandbox.hosts.connection import HostConnection, HostUnreachable
from envscaler.sandbox.hosts.registry import STALE_BEATS, HostInfo, HostRegistry
from envscaler.common.redisclient import connect

log = logging.getLogger("envscaler.sandbox.hosts")

REFRESH_INTERVAL = 1.0  # seconds between reads of the hosts' registry


class RemoteBackend(SandboxBackend):
    name = "remote"
    isolation = "remote"

    def __init__(self, config: SandboxConfig, instance: str) -> None:
        super().__init__(instance, config.socket_root)
        if config.cluster is None:
            raise ValueError("the remote backend needs the cluster's registry and secret")
        self.cluster: ClusterConfig = config.cluster
        self._redis: Any = None
        self._registry: HostRegistry | None = None
        self._hosts: dict[str, HostInfo] = {}
        self._beat_seen: dict[str, tuple[float, float]] = {}  # host -> its beat, when it changed
        self._placed: Counter[str] = Counter()  # placements since the registry was read
        self._down: dict[str, float] = {}  # host -> its beat when it stopped answering
        self._connections: dict[str, HostConnection] = {}
        self._refresher: asyncio.Task[None] | None = None

    def claim_root(self) -> None:
        """No socket root on this side: the hosts keep theirs."""

    async def start(self) -> None:
        self._redis = connect(self.cluster.redis_url)
        self._registry = HostRegistry(self._redis, self.cluster.auth.secret)
        await self.refresh()
        self._refresher = asyncio.create_task(self._refresh_forever(),
                                              name="envscaler-remote-hosts")

    async def refresh(self) -> None:
        """Read the registry. A host's heartbeat is judged by when this gateway saw it change
        (its own clock: the hosts' clocks may differ), and at first sight by its time."""
        assert self._registry is not None
        hosts = await self._registry.hosts()
        now = time.monotonic()
        for host in hosts.values():
            seen = self._beat_seen.get(host.id)
            if seen is None and host.fresh(REFRESH_INTERVAL):
                self._beat_seen[host.id] = (host.beat, now)
            elif seen is not None and seen[0] != host.beat:
                self._beat_seen[host.id] = (host.beat, now)
        self._hosts = hosts
        self._placed.clear()
        await self._drop_dead_connections()

    async def _drop_dead_connections(self) -> None:
        """Close the connections of hosts that stopped beating: requests in flight to a host
        that is cut off fail now (their sessions are rebuilt elsewhere) rather than at their
        deadline."""
        for host_id in list(self._connections):
            if self._reachable(host_id) is None:
                await self._connections.pop(host_id).close()

    def _alive(self, host: HostInfo) -> bool:
        seen = self._beat_seen.get(host.id)
        return seen is not None and (
            time.monotonic() - seen[1] < STALE_BEATS * host.interval + self._refresh_interval())

    def _refresh_interval(self) -> float:
        """Often enough to see every host beat (at most once a second)."""
        return min([REFRESH_INTERVAL, *(host.interval for host in self._hosts.values())])

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_interval())
            try:
                await self.refresh()
            except Exception as exc:  # noqa: BLE001 - Redis away: keep the last view
                log.warning("cannot read the sandbox hosts' registry: %r", exc)

    def live_hosts(self) -> list[HostInfo]:
        """Hosts that beat lately and have not failed this gateway since their last beat."""
        return [host for host in self._hosts.values() if self._reachable(host.id) is not None]

    def _placement_order(self) -> list[HostInfo]:
        """Hosts with warm sandboxes first, then the least loaded: the smallest share of its
        capacity lent out (counting what this gateway placed since it last read the
        registry)."""
        def key(host: HostInfo) -> tuple[bool, float]:
            placed = self._placed[host.id]
            return host.ready - placed <= 0, (host.in_use() + placed) / max(host.capacity, 1)
        return sorted(self.live_hosts(), key=key)

    def _mark_down(self, host_id: str) -> None:
        host = self._hosts.get(host_id)
        if host is not None:
            self._down[host_id] = host.beat
            log.warning("sandbox host stopped answering host=%s address=%s", host_id,
                        host.address)

    def _reachable(self, host_id: str) -> HostInfo | None:
        """The host, when it is live and has not failed this gateway since its last beat."""
        host = self._hosts.get(host_id)
        if host is None or not self._alive(host) or self._down.get(host_id) == host.beat:
            return None
        return host

    def connection(self, host_id: str) -> HostConnection | None:
        """The connection to a live host (one per host: its id names one process, at one
        address); None when the host is gone."""
        host = self._reachable(host_id)
        if host is None:
            return None
        if host_id not in self._connections:
            self._connections[host_id] = HostConnection(host_id, host.address, self.cluster.auth)
        return self._connections[host_id]

    async def ask(self, handle: SandboxHandle, op: str, **fields: Any) -> Any:
        """``op`` on the handle's host; ``HostUnreachable`` when the host is gone."""
        connection = self.connection(handle.instance)
        if connection is None:
            raise HostUnreachable(f"sandbox host {handle.instance} is gone")
        try:
            return await connection.request(op, handle=handle.to_dict(), **fields)
        except HostUnreachable:
            self._mark_down(handle.instance)
            raise

    def handle_from(self, data: object) -> SandboxHandle:
        """A stored handle, checked for shape; its host checks that it gave it out."""
        return SandboxHandle.from_dict(data)

    def runtime_client(self, handle: SandboxHandle) -> RemoteRuntimeClient:
        return RemoteRuntimeClient(self, handle)

    async def create(self, labels: dict[str, str], role: str = RUNTIME,
                     image: str | None = None) -> SandboxHandle:
        """A sandbox on the least-loaded live host. Hosts run their own standard image: an
        environment's requirements (``image``) are not served through them yet."""
        if image is not None:
            raise SandboxUnavailable("sandbox hosts run their standard image only; an environment "
                                     "with requirements needs the docker backend")
        failure: Exception = SandboxUnavailable("no sandbox host is live")
        for host in self._placement_order():
            connection = self.connection(host.id)
            if connection is None:
                continue
            try:
                data = await connection.request("create", labels={**labels}, role=role)
            except HostUnreachable as exc:
                self._mark_down(host.id)
                failure = SandboxUnavailable(str(exc))
                continue
            except (CapacityExhausted, SandboxUnavailable) as exc:
                failure = exc
                continue
            handle = SandboxHandle.from_dict(data)
            if handle.instance != host.id:
                raise SandboxUnavailable(f"host {host.id} answered a handle of {handle.instance}")
            self._placed[host.id] += 1
            return handle
        raise failure

    async def verify(self, handle: SandboxHandle) -> bool:
        """False when its host is gone (the session is rebuilt elsewhere) or did not give it
        out."""
        try:
            return bool(await self.ask(handle, "verify"))
        except HostUnreachable:
            return False

    async def destroy(self, handle: SandboxHandle) -> None:
        """Gone with its host when the host is: nothing left to do."""
        with contextlib.suppress(HostUnreachable):
            await self.ask(handle, "destroy")

    async def is_running(self, handle: SandboxHandle) -> bool:
        try:
            return bool(await self.ask(handle, "is_running"))
        except HostUnreachable:
            return False

    async def diagnose(self, handle: SandboxHandle) -> str:
        try:
            return str(await self.ask(handle, "diagnose"))
        except HostUnreachable:
            return f"its sandbox host {handle.instance} stopped answering"

    async def list_own(self) -> list[SandboxHandle]:
        """None: a session's sandbox outlives the gateway that made it (its host keeps it)."""
        return []

    async def reap_orphans(self) -> int:
        """Each host reaps its own node."""
        return 0

    async def health(self) -> dict[str, object]:
        live = self.live_hosts()
        if not live:
            raise SandboxUnavailable("no sandbox host is live (none beat in the registry)")
        return {"hosts": len(live), "ready": sum(h.ready for h in live),
                "capacity": sum(h.capacity for h in live)}

    async def close(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()
        if self._redis is not None:
            await self._redis.aclose()


class RemoteRuntimeClient:
    """``envscaler.sandbox.client.RuntimeClient``'s part that ``Sandbox`` uses, through the host."""

    def __init__(self, backend: RemoteBackend, handle: SandboxHandle) -> None:
        self.backend = backend
        self.handle = handle

    async def request(self, message: dict[str, Any], max_reply_bytes: int | None = None) -> Any:
        try:
            return await self.backend.ask(self.handle, "runtime", message=message,
                                          max_reply_bytes=max_reply_bytes)
        except HostUnreachable as exc:
            raise SandboxGone(str(exc)) from exc

    def close(self) -> None:
        """Nothing to close: the host's connection is shared by every sandbox on it."""
