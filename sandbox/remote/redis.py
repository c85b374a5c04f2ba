"""A Redis client for a URL that names one server or a Redis Cluster."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")


def connect(url: str, **options: Any) -> Any:
    """``redis+cluster://host:port`` (any node of it): a cluster client; otherwise one server's."""
    for scheme in CLUSTER_SCHEMES:
        if url.startswith(scheme):
            plain = url.replace("+cluster", "", 1)
            return RedisCluster.from_url(plain, decode_responses=True, **options)
    return aioredis.Redis.from_url(url, decode_responses=True, **options)
