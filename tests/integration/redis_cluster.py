"""A Redis Cluster of three masters on loopback, for tests: three ``redis-server`` processes in
cluster mode (no persistence), joined by ``redis-cli --cluster create``."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

import redis as redis_sync

from tests.deadlines import scaled
from tests.integration.gateway_fixtures import free_port

MASTERS = 3


BUS_OFFSET = 10000  # a node's cluster bus listens on its port + 10000


def cluster_port() -> int:
    """A free port whose bus port is a port too (and free)."""
    while True:
        port = free_port()
        if port + BUS_OFFSET < 65536 and _free(port + BUS_OFFSET):
            return port


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class LocalRedisCluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ports = [cluster_port() for _ in range(MASTERS)]
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}"

    def __enter__(self) -> LocalRedisCluster:
        try:
            for port in self.ports:
                self._start(port)
            subprocess.run(["redis-cli", "--cluster", "create",
                            *(f"127.0.0.1:{port}" for port in self.ports),
                            "--cluster-replicas", "0", "--cluster-yes"],
                           check=True, capture_output=True, timeout=scaled(60))
            self._wait_ok()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, port: int) -> None:
        node = self.directory / str(port)
        node.mkdir(parents=True)
        self.processes.append(subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled",
             "yes", "--cluster-config-file", str(node / "nodes.conf"), "--dir", str(node),
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + scaled(10)
        while True:
            try:
                redis_sync.Redis(port=port).ping()
                return
            except redis_sync.ConnectionError:
                assert time.monotonic() < deadline, f"redis-server on {port} did not start"
                time.sleep(0.05)

    def _wait_ok(self) -> None:
        deadline = time.monotonic() + scaled(30)
        while any(redis_sync.Redis(port=port).cluster("info")["cluster_state"] != "ok"
                  for port in self.ports):
            assert time.monotonic() < deadline, "the cluster did not become ok"
            time.sleep(0.1)

    def master_of(self, key: str) -> int:
        """The port of the master that holds ``key``'s slot."""
        client = redis_sync.Redis(port=self.ports[0])
        slot = client.cluster("keyslot", key)
        for start, end, master, *_ in client.cluster("slots"):
            if start <= slot <= end:
                return int(master[1])
        raise AssertionError(f"no master serves slot {slot}")

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(scaled(10))
        shutil.rmtree(self.directory, ignore_errors=True)

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()
