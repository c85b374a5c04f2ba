"""Sandbox hosts for tests: in this process (``host_in_process``) or as `envscaler sandbox host`
processes (``HostProcess``), each with a socket root of its own, reachable only over TCP."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import redis as redis_sync

from envscaler.sandbox.backends import make_backend
from envscaler.sandbox.config import ClusterAuth, ClusterConfig, SandboxConfig
from envscaler.sandbox.pool import SandboxPool
from envscaler.sandbox.hosts.server import HandshakeLimits, HostAddress, SandboxHost
from envscaler.common.redisclient import connect
from envscaler.sandbox.hosts.registry import HOSTS_KEY, HostInfo, HostRegistry
from tests.conftest import REPO_ROOT, SOCKET_ROOT, TEST_LABELS, new_instance
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import ChildProcess, free_port

SECRET = secrets.token_hex(32)  # a strong one, as every cluster secret must be


def host_root(name: str) -> Path:
    """A socket root of a host's own (under the run's, so the suite's checks find what is in
    it)."""
    root = Path(f"{SOCKET_ROOT}-{name}")
    root.mkdir(mode=0o700, exist_ok=True)
    return root


def remote_config(redis_url: str, auth: ClusterAuth) -> SandboxConfig:
    return SandboxConfig(sandbox_backend="remote", pool_size=0, labels=TEST_LABELS,
                         cluster=ClusterConfig(redis_url, auth))


@asynccontextmanager
async def host_in_process(redis_url: str, name: str, auth: ClusterAuth, pool_size: int = 1,
                          limits: HandshakeLimits = HandshakeLimits()
                          ) -> AsyncIterator[SandboxHost]:
    root = host_root(name)
    config = SandboxConfig(sandbox_backend="process", socket_root=root, pool_size=pool_size,
                           max_sandboxes=8, labels=TEST_LABELS)
    redis = connect(redis_url)
    address = f"127.0.0.1:{free_port()}"
    host = SandboxHost(SandboxPool(make_backend(config, new_instance()), config), auth,
                       HostRegistry(redis, auth.secret), HostAddress(address, address),
                       interval=0.2, limits=limits)
    await host.start()
    try:
        yield host
    finally:
        await host.close()
        await redis.aclose()
        shutil.rmtree(root, ignore_errors=True)


class HostProcess(ChildProcess):
    """`envscaler sandbox host` with the process backend, in a process of its own (killed, as
    when its node dies: its runtimes die with it, PR_SET_PDEATHSIG)."""

    def __init__(self, redis_url: str, name: str, log_path: Path, pool_size: int = 2,
                 advertise: str | None = None) -> None:
        self.root = host_root(name)
        self.address = f"127.0.0.1:{free_port()}"
        self.advertise = advertise or self.address  # what gateways are told to dial
        self.redis_url = redis_url
        self.log_path = log_path
        self.env = {**os.environ, "ENVSCALER_REDIS_URL": redis_url,
                    "ENVSCALER_CLUSTER_SECRET": SECRET, "ENVSCALER_SANDBOX_BACKEND": "process",
                    "ENVSCALER_SOCKET_ROOT": str(self.root), "ENVSCALER_POOL_SIZE": str(pool_size),
                    "ENVSCALER_HOST_HEARTBEAT": "0.3", "ENVSCALER_LOG_LEVEL": "INFO",
                    "PYTHONPATH": f"{REPO_ROOT}:{REPO_ROOT / 'clients'}"}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> HostProcess:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "envscaler.cli", "sandbox", "host", "--listen", self.address,
                 "--advertise", self.advertise],
                cwd=REPO_ROOT, env=self.env, stdout=log, stderr=log)
        deadline = time.monotonic() + scaled(timeout)
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log_path.read_text()[-3000:]
            if self.id is not None:
                return self
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"host not registered in {timeout:g} s")

    @property
    def id(self) -> str | None:
        """Its id as the registry has it (its backend's instance), once it registered."""
        client = redis_sync.Redis.from_url(self.redis_url, decode_responses=True)
        try:
            for text in client.hvals(HOSTS_KEY):
                info = HostInfo.parse(text)
                if info is not None and info.address == self.advertise:
                    return info.id
        finally:
            client.close()
        return None

    def stop(self) -> None:
        super().stop()
        shutil.rmtree(self.root, ignore_errors=True)
