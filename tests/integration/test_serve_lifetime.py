"""Nothing outlives `envscaler serve`: however it ends (SIGTERM, SIGINT, SIGKILL), within a few
seconds none of the processes it started runs: its workers, its embedded Redis, the runtimes of
the process backend (or the containers of the Docker backend), multiprocessing's helper. And a
second gateway on the same state directory never starts a second Redis on it.

Each gateway here has its own state directory and socket root, so what it started is found in
``/proc`` by its parent chain (a snapshot taken before the signal), by its state directory in the
environment (every process that inherits it) or working directory (redis-server), or by its
socket root on the command line (runtimes, whose environment is replaced)."""

from __future__ import annotations

import http.client
import os
import secrets
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from envscaler.server.embedded_redis import free_port
from tests import processes
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import COUNTER, catalogue_root  # noqa: F401 - a fixture
from tests.integration.serve_helpers import (all_ready, instance_of, on_each_worker, request,
                                             serve, serve_env, wait_for, workers_of)

# Seconds, on a busy 2-core machine: the parent-death signals act at once; a worker that missed
# its own would live ORPHAN_GRACE (10 s) longer, and fail this.
GONE_WITHIN = 8.0
SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGKILL]


@dataclass
class Gateway:
    port: int
    process: subprocess.Popen[bytes]
    state_dir: Path
    socket_root: Path
    log: Path

    def ours(self) -> list[processes.Proc]:
        """The processes this gateway started that run now, found by their marks."""
        procs = processes.running()
        marks = processes.marked(procs, f"ENVSCALER_STATE_DIR={self.state_dir}".encode(),
                                 [str(self.state_dir), str(self.socket_root)])
        return sorted({procs[pid] for pid in marks} | set(processes.descendants(self.process.pid)))


Start = Callable[..., Gateway]


@pytest.fixture
def start(socket_root: Path, catalogue_root: Path,  # noqa: F811
          tmp_path: Path) -> Iterator[Start]:
    """Starts `envscaler serve` with its own embedded Redis (``settings`` by lower-case name);
    kills whatever is left at the end, even when the test failed."""
    started: list[Gateway] = []

    def run(workers: int, **settings: str) -> Gateway:
        root = socket_root / secrets.token_hex(3)
        state_dir = Path(settings.setdefault("state_dir", str(tmp_path / f"state-{len(started)}")))
        env = serve_env(root, catalogue=str(catalogue_root), pool_size="1", **settings)
        env.pop("ENVSCALER_REDIS_URL", None)
        port, log = free_port(), tmp_path / f"gateway-{len(started)}.log"
        gateway = Gateway(port, serve(port, env, log, workers), state_dir, root, log)
        started.append(gateway)
        return gateway

    yield run
    for gateway in started:
        processes.kill(gateway.ours())
        gateway.process.wait(scaled(10))


def _session(conn: http.client.HTTPConnection) -> str:
    """A session with a call on this worker: a claimed sandbox besides the warm one."""
    status, body = request(conn, "POST", "/v1/sessions", {"env": COUNTER, "scenario": "counter-1"})
    assert status == 201, body
    session = body["session_id"]
    status, body = request(conn, "POST", f"/v1/sessions/{session}/calls",
                           {"name": "increment", "arguments": {"name": "a"}})
    assert status == 200, body
    return str(session)


def _serving(gateway: Gateway, workers: int) -> list[processes.Proc]:
    """Wait until every worker is ready and holds a session; what the gateway runs then."""
    def serving() -> bool:
        assert gateway.process.poll() is None, gateway.log.read_text()[-3000:]
        return all_ready(gateway.port, workers)

    wait_for(serving, 90, f"{workers} ready workers")
    on_each_worker(gateway.port, workers, _session)
    wait_for(serving, 90, f"{workers} workers with their warm pools refilled")
    return gateway.ours()


def _assert_all_gone(gateway: Gateway, before: list[processes.Proc]) -> None:
    def left() -> list[processes.Proc]:
        alive = processes.running()
        return [p for p in before if alive.get(p.pid) == p] + gateway.ours()

    leftovers = processes.wait_gone(left, GONE_WITHIN)
    assert not leftovers, "left running:\n" + "\n".join(map(str, leftovers))


def _containers(docker_client: Any, instances: set[str]) -> list[Any]:
    return [container for instance in instances for container in docker_client.containers.list(
        all=True, filters={"label": f"envscaler.instance={instance}"})]


@pytest.mark.parametrize("signum", SIGNALS, ids=[s.name for s in SIGNALS])
@pytest.mark.parametrize("workers", [1, 2])
def test_nothing_outlives_serve(start: Start, workers: int, signum: signal.Signals) -> None:
    gateway = start(workers)
    before = _serving(gateway, workers)
    commands = " ".join(p.cmdline for p in before)
    assert "redis-server" in commands
    assert commands.count("envscaler.sandbox.runtime") >= 2 * workers  # a warm one and a claimed one each
    gateway.process.send_signal(signum)
    _assert_all_gone(gateway, before)


def test_nothing_outlives_serve_on_docker(start: Start, sandbox_image: str,
                                          docker_client: Any) -> None:
    """SIGKILL of the supervisor: its workers, told by their parent-death SIGTERM, still remove
    their containers."""
    gateway = start(2, sandbox_backend="docker", sandbox_image=sandbox_image)
    before = _serving(gateway, 2)
    instances = set(on_each_worker(gateway.port, 2, instance_of))
    assert len(_containers(docker_client, instances)) >= 4  # a warm one and a claimed one each
    gateway.process.send_signal(signal.SIGKILL)
    _assert_all_gone(gateway, before)
    wait_for(lambda: not _containers(docker_client, instances), GONE_WITHIN,
             "the workers' containers to be removed")


def test_a_second_gateway_on_the_same_state_directory_is_refused(start: Start) -> None:
    first = start(1)
    _serving(first, 1)
    second = start(1, state_dir=str(first.state_dir))
    assert second.process.wait(scaled(60)) == 1
    assert f"{first.state_dir / 'redis'} is in use by the Redis of another gateway" in " ".join(
        second.log.read_text().split())
    assert len([p for p in first.ours() if "redis-server" in p.cmdline]) == 1


def _metrics_dir(gateway: Gateway) -> Path:
    """The PROMETHEUS_MULTIPROC_DIR that the supervisor gave its workers."""
    environ = Path(f"/proc/{workers_of(gateway.process.pid)[0]}/environ").read_bytes()
    prefix = b"PROMETHEUS_MULTIPROC_DIR="
    return Path(next(v[len(prefix):] for v in environ.split(b"\0") if v.startswith(prefix)).decode())


def test_the_metrics_directory_of_a_killed_supervisor_is_removed_by_the_next(start: Start) -> None:
    killed = start(2)
    wait_for(lambda: all_ready(killed.port, 2), 90, "2 ready workers")
    directory, before = _metrics_dir(killed), killed.ours()
    killed.process.send_signal(signal.SIGKILL)
    _assert_all_gone(killed, before)
    assert directory.is_dir()  # nobody could remove it
    os.utime(directory, (0, 0))  # old enough not to be one that is being created
    following = start(2)
    wait_for(lambda: all_ready(following.port, 2), 90, "2 ready workers")
    assert not directory.exists()
    assert _metrics_dir(following).is_dir()
