"""Sandbox hosts (`envscaler sandbox host`) on this machine, at the sandbox layer (no gateway):

- ``hop``: the runtime baseline's round trip (`envscaler.bench.baseline.runtime_round_trip`), through a
  host over TCP instead of the runtime's Unix socket: the cost of the hop;
- ``scaling``: calls per second from ``host_lanes`` sandboxes at once, spread over 1, 2 and 3
  hosts, with the cores each part used. This machine's cores are shared by the hosts, their
  sandboxes and the caller, so what carries to a cluster of one host per node is the calls per
  second per core of the machine, and the hosts' share of those cores.

Each host is its own process with its own socket root and the Docker backend, found through the
registry in a Redis of its own, as gateways find hosts. Every wait on them is bounded
(`envscaler.bench.waits`): a host that stops answering ends the phase with the wait it was in.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from envscaler.bench.baseline import timed_calls
from envscaler.bench.gateway import run_socket_root
from envscaler.bench.procstat import CpuMeter
from envscaler.bench.stats import summary
from envscaler.bench.waits import within
from envscaler.bench.workload import Probe
from envscaler.checkout import REPO_ROOT
from envscaler.format.loader import EnvPackage
from envscaler.sandbox.backends.remote import RemoteBackend
from envscaler.sandbox.config import ClusterAuth, ClusterConfig, SandboxConfig
from envscaler.sandbox.sandbox import Sandbox
from envscaler.server.embedded_redis import EmbeddedRedis

REGISTER_TIMEOUT = 120.0  # seconds for a host to start and publish itself (its warm pool fills)
PREPARE_TIMEOUT = 180.0  # seconds to create and load the sandboxes of a figure through the hosts
RELEASE_TIMEOUT = 60.0  # seconds to destroy them, or to close the backend
STOP_TIMEOUT = 60.0  # seconds for every host to end on SIGTERM (removing its containers), together


class Hosts:
    """Host processes added one by one; ``stop`` ends them all (SIGTERM: each removes its own
    containers)."""

    def __init__(self, image: str, scratch: Path, pool_size: int) -> None:
        self.image, self.scratch, self.pool_size = image, scratch, pool_size
        self.secret = secrets.token_hex(32)
        self.redis = EmbeddedRedis(scratch / "hosts-redis", persistent=False).start()
        self.processes: list[subprocess.Popen[bytes]] = []
        self.roots: list[Path] = []

    def add(self) -> None:
        root = run_socket_root()
        root.mkdir(mode=0o700)
        self.roots.append(root)
        env = {**os.environ, "ENVSCALER_REDIS_URL": self.redis.url,
               "ENVSCALER_CLUSTER_SECRET": self.secret, "ENVSCALER_SANDBOX_BACKEND": "docker",
               "ENVSCALER_SANDBOX_IMAGE": self.image, "ENVSCALER_SOCKET_ROOT": str(root),
               "ENVSCALER_POOL_SIZE": str(self.pool_size), "ENVSCALER_LOG_LEVEL": "WARNING"}
        with open(self.scratch / f"host-{len(self.processes)}.log", "wb") as log:
            self.processes.append(subprocess.Popen(
                [sys.executable, "-m", "envscaler.cli", "sandbox", "host", "--listen", "127.0.0.1:0"],
                cwd=REPO_ROOT, env=env, stdout=log, stderr=log))

    def backend(self) -> RemoteBackend:
        auth = ClusterAuth(self.secret.encode())
        config = SandboxConfig(sandbox_backend="remote", pool_size=0,
                               cluster=ClusterConfig(self.redis.url, auth))
        return RemoteBackend(config, f"bench-{secrets.token_hex(3)}")

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def stop(self) -> None:
        """SIGTERM to every host at once, SIGKILL to those still there after `STOP_TIMEOUT`
        (the run's clean-up then removes their containers by label)."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for process in self.processes:
            try:
                process.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for root in self.roots:
            shutil.rmtree(root, ignore_errors=True)
        self.redis.stop()


async def _live(backend: RemoteBackend, count: int) -> None:
    """Wait until ``count`` hosts are live, each with warm sandboxes."""
    async def registered() -> None:
        while True:
            await backend.refresh()
            live = backend.live_hosts()
            if len(live) >= count and all(host.ready > 0 for host in live):
                return
            await asyncio.sleep(0.2)

    await within(REGISTER_TIMEOUT, f"sandbox hosts: {count} live with warm sandboxes",
                 registered())


async def _loaded(backend: RemoteBackend, env: EnvPackage, probe: Probe, count: int
                  ) -> list[Sandbox]:
    scenario = env.scenario(probe.scenario)
    assert scenario is not None
    sandboxes: list[Sandbox] = []

    async def prepare() -> None:
        for n in range(count):
            sandboxes.append(Sandbox(await backend.create({"envscaler.session": f"bench-{n}"}),
                                     backend))
        await asyncio.gather(*(sandbox.load(
            source=env.source, class_name=env.manifest.class_name, tools=env.tool_names,
            init_config=env.initial_config(scenario), seed=0, max_result_bytes=1 << 20,
            timeout=30) for sandbox in sandboxes))

    try:
        await within(PREPARE_TIMEOUT, f"sandbox hosts: {count} sandboxes created and loaded",
                     prepare())
    except BaseException:
        await _released(sandboxes)
        raise
    return sandboxes


async def _released(sandboxes: list[Sandbox]) -> None:
    await within(RELEASE_TIMEOUT, f"sandbox hosts: {len(sandboxes)} sandboxes destroyed",
                 asyncio.gather(*(sandbox.destroy() for sandbox in sandboxes)))


async def _hop(backend: RemoteBackend, env: EnvPackage, probe: Probe, calls: int
               ) -> dict[str, Any]:
    [sandbox] = await _loaded(backend, env, probe, 1)
    try:
        samples = await timed_calls(sandbox, probe, calls)
    finally:
        await _released([sandbox])
    return {"how": "Sandbox.call from this process through a sandbox host over TCP "
                   "(authenticated), the host to the runtime over its Unix socket",
            **summary(samples)}


async def _scaling(backend: RemoteBackend, env: EnvPackage, probe: Probe, lanes: int,
                   seconds: float, meter: CpuMeter) -> dict[str, Any]:
    sandboxes = await _loaded(backend, env, probe, lanes)
    done = 0
    try:
        before = meter.snapshot()
        stop = time.perf_counter() + seconds

        async def lane(sandbox: Sandbox) -> None:
            nonlocal done
            while time.perf_counter() < stop:
                await sandbox.call(probe.tool, probe.arguments, timeout=10)
                done += 1

        await asyncio.gather(*(lane(sandbox) for sandbox in sandboxes))
        cores = CpuMeter.shares(before, meter.snapshot())
    finally:
        await _released(sandboxes)
    rps = done / seconds
    return {"lanes": lanes, "hosts_used": len({s.handle.instance for s in sandboxes}),
            "rps": round(rps, 1), "cores": cores,
            "calls_per_core_second": round(rps / max(cores["machine"], 1e-9), 1)}


async def measure(image: str, env: EnvPackage, probe: Probe, scratch: Path, *, calls: int,
                  lanes: int, seconds: float, counts: tuple[int, ...]) -> dict[str, Any]:
    """The hop (one host) and the calls per second over each number of hosts in ``counts``."""
    hosts = Hosts(image, scratch, pool_size=lanes)
    backend = hosts.backend()
    figures: dict[str, Any] = {"scaling": {}}
    try:
        hosts.add()
        await within(REGISTER_TIMEOUT, "sandbox hosts: the registry read", backend.start())
        await _live(backend, 1)
        figures["hop"] = await _hop(backend, env, probe, calls)
        for count in counts:
            while len(hosts.processes) < count:
                hosts.add()
            await _live(backend, count)
            meter = CpuMeter(processes={"hosts": hosts.pids, "caller": [os.getpid()]})
            figures["scaling"][str(count)] = await _scaling(backend, env, probe, lanes, seconds,
                                                            meter)
    finally:
        try:
            await within(RELEASE_TIMEOUT, "sandbox hosts: the backend closed", backend.close())
        finally:
            await asyncio.to_thread(hosts.stop)
    return figures
