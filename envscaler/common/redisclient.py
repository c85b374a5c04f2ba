"""A Redis client (``redis.asyncio``, ``decode_responses``) for ``ENVSCALER_REDIS_URL``, which names
one server (``redis://``, ``rediss://``, ``unix://``) or a Redis Cluster
(``redis+cluster://HOST:PORT``, any of its nodes; ``rediss+cluster://`` with TLS): the service's
keys are laid out for a cluster (`envscaler.server.store`), and the cluster client routes each command by
its keys' slot."""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.driver_info import DriverInfo

CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")
# What each new connection tells the server (``CLIENT SETINFO``). Given once: left to redis-py,
# every new connection looks its version up in the installed packages' metadata, which was a
# tenth of the gateway's CPU while a burst of opens grew the pool.
DRIVER_INFO = DriverInfo(name="redis-py", lib_version=redis.__version__)


def is_cluster(url: str) -> bool:
    return url.startswith(CLUSTER_SCHEMES)


def connect(url: str, *, max_connections: int | None = None, pool_timeout: float | None = None,
            **options: Any) -> Any:
    """A cluster client for a cluster's URL, otherwise one server's; ``options`` go to either.
    ``max_connections``: one server's connections at most, a request beyond waiting up to
    ``pool_timeout`` for a free one (redis-py's own pool refuses the 101st at once)."""
    options.setdefault("driver_info", DRIVER_INFO)
    if is_cluster(url):
        return RedisCluster.from_url(url.replace("+cluster", "", 1), decode_responses=True,
                                     **options)
    if max_connections is None:
        return aioredis.Redis.from_url(url, decode_responses=True, **options)
    pool = aioredis.BlockingConnectionPool.from_url(
        url, decode_responses=True, max_connections=max_connections, timeout=pool_timeout,
        **options)
    return aioredis.Redis.from_pool(pool)  # closed with the client
