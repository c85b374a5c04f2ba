"""`envscaler serve --ray`: a sandbox host on every node of a Ray cluster whose sandbox backend
works there (Docker answers, for the docker backend), each an actor pinned to its node
(``NodeAffinitySchedulingStrategy``, not soft), following nodes as they join and leave.

Ray is an optional extra (``pip install .[ray]``): nothing imports this module without it. A
host serves on its node's address (a free port), so gateways anywhere reach it over TCP; its
Unix sockets stay on its node. A socket root containing ``{node}`` is made per node (several
nodes of one machine, as in tests, then keep theirs apart).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

log = logging.getLogger("envscaler.server.ray")

START_TIMEOUT = 120.0  # seconds for a host to start on its node (the image may be built)
FOLLOW_INTERVAL = 2.0


@ray.remote(num_cpus=0, max_restarts=0)
class HostActor:
    """One node's sandbox host, in the actor's event loop."""

    def __init__(self) -> None:
        self._host: Any = None
        self._redis: Any = None

    async def start(self, settings: dict[str, Any], node_id: str) -> dict[str, str]:
        """Start serving (``settings``: ``envscaler.server.sandbox_host.host_settings``, the only
        configuration it takes: not this process's environment); the host's id and address.
        Raises when the node cannot run the backend (no Docker engine)."""
        from envscaler.sandbox.backends import make_backend
        from envscaler.sandbox.pool import SandboxPool
        from envscaler.sandbox.hosts.server import HostAddress
        from envscaler.server.app import configure_logging, sandbox_image
        from envscaler.server.sandbox_host import check, given_host_settings, new_host, registry_redis

        root = str(settings.get("socket_root", "/tmp/envscaler"))
        own = given_host_settings({**settings, "socket_root": root.replace("{node}",
                                                                           node_id[:12])})
        check(own)
        configure_logging(own.log_level)
        config = own.sandbox_config(image=await sandbox_image(own))
        backend = make_backend(config, own.instance)
        backend.claim_root()
        await backend.health()  # refuse a node the backend cannot work on, before serving
        self._redis = registry_redis(own)
        address = f"{ray.util.get_node_ip_address()}:0"
        self._host = new_host(own, SandboxPool(backend, config), self._redis,
                              HostAddress(address, address))
        await self._host.start()
        return {"id": self._host.id, "address": self._host.address.advertise}

    async def stop(self) -> None:
        if self._host is not None:
            await self._host.close()
            await self._redis.aclose()
            self._host = None


@dataclass
class NodeHost:
    actor: Any
    id: str
    address: str


class RayHosts:
    """Keeps one host on each live node that can run one."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings  # envscaler.server.sandbox_host.host_settings: all a host is given
        self.hosts: dict[str, NodeHost] = {}  # node id -> its host
        self.refused: set[str] = set()  # nodes whose backend does not work (no Docker)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sync(self) -> None:
        """Start hosts on nodes that joined; forget those of nodes that left (their actors
        died with them; gateways rebuild their sessions elsewhere)."""
        alive = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
        for node_id in set(self.hosts) - alive:
            log.warning("node left node=%s host=%s", node_id[:12], self.hosts.pop(node_id).id)
        self.refused &= alive
        for node_id in sorted(alive - set(self.hosts) - self.refused):
            self._start(node_id)

    def _start(self, node_id: str) -> None:
        actor = HostActor.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
            node_id, soft=False)).remote()
        try:
            info = ray.get(actor.start.remote(self.settings, node_id), timeout=START_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - a node without Docker: no host there
            log.warning("no sandbox host on node=%s error=%s", node_id[:12], exc)
            self.refused.add(node_id)
            ray.kill(actor)
            return
        self.hosts[node_id] = NodeHost(actor, info["id"], info["address"])
        log.info("sandbox host on node=%s host=%s address=%s", node_id[:12], info["id"],
                 info["address"])

    def follow(self, interval: float = FOLLOW_INTERVAL) -> None:
        """Sync in a thread of its own until ``close``."""
        def run() -> None:
            while not self._stop.wait(interval):
                try:
                    self.sync()
                except Exception as exc:  # noqa: BLE001 - the GCS away for a moment
                    log.error("cannot follow the Ray cluster's nodes: %r", exc)

        self._thread = threading.Thread(target=run, name="envscaler-ray-nodes", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop following; stop every host (each kills its sandboxes)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for host in self.hosts.values():
            try:
                ray.get(host.actor.stop.remote(), timeout=30)
            except Exception as exc:  # noqa: BLE001 - its node may be gone already
                log.warning("host did not stop host=%s error=%s", host.id, exc)
            ray.kill(host.actor)
        self.hosts.clear()

