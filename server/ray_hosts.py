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
import os
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

    async def start(self, environment: dict[str, str], node_id: str) -> dict[str, str]:
        """Start serving (``environment``: the ENVSCALER_* settings); the host's id and
        address. Raises when the node cannot run the backend (no Docker engine)."""
        from sandbox.backends import make_backend
        from sandbox.pool import SandboxPool
        from sandbox.remote.host import HostAddress, SandboxHost
        from common.redisclient import connect
        from sandbox.remote.registry import HostRegistry
        from server.app import configure_logging, sandbox_image
        from server.sandbox_host import check
        from server.settings import Settings

        os.environ.update(environment)
        root = os.environ.get("ENVSCALER_SOCKET_ROOT", "/tmp/envscaler")
        os.environ["ENVSCALER_SOCKET_ROOT"] = root.replace("{node}", node_id[:12])
        settings = Settings()
        check(settings)
        configure_logging(settings.log_level)
        config = settings.sandbox_config(image=await sandbox_image(settings))
        backend = make_backend(config, settings.instance)
        backend.claim_root()
        await backend.health()  # refuse a node the backend cannot work on, before serving
        assert settings.redis_url is not None
        self._redis = connect(settings.redis_url)
        address = f"{ray.util.get_node_ip_address()}:0"
        auth = settings.cluster_auth()
        self._host = SandboxHost(SandboxPool(backend, config), auth,
                                 HostRegistry(self._redis, auth.secret),
                                 HostAddress(address, address), settings.host_heartbeat)
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

    def __init__(self, environment: dict[str, str]) -> None:
        self.environment = environment
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
            info = ray.get(actor.start.remote(self.environment, node_id), timeout=START_TIMEOUT)
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


def environment() -> dict[str, str]:
    """The settings hosts take from this process: every ENVSCALER_* variable."""
    return {key: value for key, value in os.environ.items() if key.startswith("ENVSCALER_")}
