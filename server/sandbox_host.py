"""`envscaler sandbox host`: this node's sandbox backend, warm pool and socket root served to
gateways over authenticated TCP (``sandbox.remote.host``), published in the registry in
ENVSCALER_REDIS_URL, until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import signal

from sandbox.backends import make_backend
from sandbox.pool import SandboxPool
from sandbox.remote.host import HostAddress, SandboxHost
from common.redisclient import connect
from sandbox.remote.registry import HostRegistry
from server.app import configure_logging, sandbox_image
from server.settings import Settings


def check(settings: Settings) -> None:
    """Refuse (``ValueError``) what a host cannot run with, before anything starts."""
    if settings.sandbox_backend == "remote":
        raise ValueError("a sandbox host runs its node's sandboxes: ENVSCALER_SANDBOX_BACKEND "
                         "is docker or process")
    if not settings.redis_url:
        raise ValueError("a sandbox host publishes itself in ENVSCALER_REDIS_URL, which the "
                         "gateways read: set it")
    settings.cluster_auth()


async def run_host(settings: Settings, address: HostAddress,
                   labels: dict[str, str] | None = None) -> None:
    """Serve until SIGTERM or SIGINT, then kill this host's sandboxes and withdraw."""
    check(settings)
    configure_logging(settings.log_level)
    assert settings.redis_url is not None
    config = settings.sandbox_config(image=await sandbox_image(settings), labels=labels)
    redis = connect(settings.redis_url, socket_connect_timeout=settings.redis_timeout,
                    socket_timeout=settings.redis_timeout)
    pool = SandboxPool(make_backend(config, settings.instance), config)
    auth = settings.cluster_auth()
    host = SandboxHost(pool, auth, HostRegistry(redis, auth.secret), address,
                       settings.host_heartbeat)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await host.start()
        await stop.wait()
    finally:
        await host.close()
        await redis.aclose()
