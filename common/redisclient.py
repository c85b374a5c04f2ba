"""A Redis client (``redis.asyncio``, ``decode_responses``) for ``ENVSCALER_REDIS_URL``, which names
one server (``redis://``, ``rediss://``, ``unix://``) or a Redis Cluster
(``redis+cluster://HOST:PORT``, any of its nodes; ``rediss+cluster://`` with TLS): the service's
keys are laid out for a cluster (`server.store`), and the cluster client routes each command by
its keys' slot."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")


def is_cluster(url: str) -> bool:
    return url.startswith(CLUSTER_SCHEMES)


def connect(url: str, **options: Any) -> Any:
    """A cluster client for a cluster's URL, otherwise one server's; ``options`` go to either."""
    if is_cluster(url):
        return RedisCluster.from_url(url.replace("+cluster", "", 1), decode_responses=True,
                                     **options)
    return aioredis.Redis.from_url(url, decode_responses=True, **options)
