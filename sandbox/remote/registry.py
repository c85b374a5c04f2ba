"""Hosts in Redis: each host publishes its address, capacity and a heartbeat in one hash
(``envscaler:hosts``, one field per host: one key, so one slot on Redis Cluster too), and
gateways read it to place sessions and to tell a live host from a dead one."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from common import jsoncodec

HOSTS_KEY = "envscaler:hosts"
STALE_BEATS = 3  # a host that missed this many heartbeats in a row is taken for dead
FORGET_AFTER = 600.0  # seconds of silence (by the entry's own time) before its entry is removed
# Remove a host's entry only if it is still the text that was read: a host that beat again in
# between keeps its new entry.
_FORGET = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
    return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""


@dataclass(frozen=True)
class HostInfo:
    """One host as it last published itself."""

    id: str
    address: str
    ready: int  # warm sandboxes
    live: int  # sandboxes it holds, warm ones included
    capacity: int
    interval: float  # seconds between its heartbeats
    beat: float  # when it last published (Unix time, its clock)
    backend: str = ""

    def fresh(self, slack: float) -> bool:
        """Whether it beat within ``STALE_BEATS`` intervals (plus ``slack``) by this clock."""
        return self.silent_for() < STALE_BEATS * self.interval + slack

    def silent_for(self) -> float:
        return time.time() - self.beat

    def in_use(self) -> int:
        """Sandboxes it lent out (its warm ones are not a load: they wait for sessions)."""
        return max(self.live - self.ready, 0)

    @classmethod
    def parse(cls, text: str) -> HostInfo | None:
        """None for an entry that is not a host's (nothing in Redis is trusted blindly)."""
        try:
            data: Any = jsoncodec.loads(text)
            return cls(id=str(data["id"]), address=str(data["address"]),
                       ready=int(data["ready"]), live=int(data["live"]),
                       capacity=int(data["capacity"]), interval=float(data["interval"]),
                       beat=float(data["beat"]), backend=str(data.get("backend", "")))
        except (ValueError, TypeError, KeyError):
            return None


class HostRegistry:
    """Publishing (hosts) and reading (gateways) the hosts' hash; ``redis`` is a client of
    ``redis.asyncio`` with ``decode_responses=True`` (a cluster client too)."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis

    async def publish(self, info: HostInfo) -> None:
        await self.redis.hset(HOSTS_KEY, info.id, jsoncodec.dumps(asdict(info)))

    async def withdraw(self, host_id: str) -> None:
        await self.redis.hdel(HOSTS_KEY, host_id)

    async def hosts(self) -> dict[str, HostInfo]:
        """Every host's entry; entries silent for ``FORGET_AFTER`` seconds are removed (a host
        that left without withdrawing: killed, or its node lost), so the hash holds what may
        still be alive, not every host there ever was."""
        raw = await self.redis.hgetall(HOSTS_KEY)
        hosts = {}
        for field, text in raw.items():
            info = HostInfo.parse(text)
            if info is not None and info.silent_for() < FORGET_AFTER:
                hosts[info.id] = info
            elif info is not None:
                await self.redis.eval(_FORGET, 1, HOSTS_KEY, field, text)
        return hosts
