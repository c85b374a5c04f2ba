"""`envscaler sandbox host`: this node's sandbox backend, warm pool and socket root served to
gateways over authenticated TCP (``envscaler.sandbox.hosts.server``), published in the registry in
ENVSCALER_REDIS_URL, until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from envscaler.sandbox.backends import make_backend
from envscaler.sandbox.pool import SandboxPool
from envscaler.sandbox.hosts.server import HostAddress, SandboxHost
from envscaler.common.redisclient import connect
from envscaler.sandbox.hosts.registry import HostRegistry
from envscaler.server.app import configure_logging, sandbox_image
from envscaler.server.settings import GivenSettings, Settings

HOST_SETTINGS = frozenset({
    "redis_url", "redis_timeout", "log_level", "cluster_secret", "host_tls_cert", "host_tls_key",
    "host_tls_ca", "host_heartbeat", "sandbox_backend", "sandbox_image", "sandbox_base_image",
    "sandbox_runtime", "sandbox_memory", "sandbox_cpus", "sandbox_pids", "sandbox_tmpfs",
    "sandbox_log_size", "socket_root", "docker_timeout", "docker_threads", "pool_size",
    "max_sandboxes", "sandbox_create_rate"})
"""What a sandbox host reads of the settings; nothing else is handed to one started elsewhere
(a Ray actor): not the API keys, not the gateway's limits."""


def host_settings(settings: Settings) -> dict[str, Any]:
    """The settings a host needs, as JSON values, to hand to a host started elsewhere."""
    return settings.model_dump(mode="json", include=set(HOST_SETTINGS), exclude_none=True)


def given_host_settings(values: dict[str, Any]) -> Settings:
    """A host's settings from ``host_settings`` values alone (``ValueError`` for one it does
    not take), whatever the environment of the process that reads them."""
    unknown = set(values) - HOST_SETTINGS
    if unknown:
        raise ValueError(f"not settings of a sandbox host: {', '.join(sorted(unknown))}")
    return GivenSettings(**values)


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
    config = settings.sandbox_config(image=await sandbox_image(settings), labels=labels)
    redis = registry_redis(settings)
    host = new_host(settings, SandboxPool(make_backend(config, settings.instance), config),
                    redis, address)
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


def registry_redis(settings: Settings) -> Any:
    """The client of the Redis a host publishes itself in."""
    assert settings.redis_url is not None  # check() refused a host without one
    return connect(settings.redis_url, socket_connect_timeout=settings.redis_timeout,
                   socket_timeout=settings.redis_timeout)


def new_host(settings: Settings, pool: SandboxPool, redis: Any,
             address: HostAddress) -> SandboxHost:
    """The host of ``pool``, publishing itself through ``redis`` with entries the cluster
    secret signs."""
    auth = settings.cluster_auth()
    return SandboxHost(pool, auth, HostRegistry(redis, auth.secret), address,
                       settings.host_heartbeat)
