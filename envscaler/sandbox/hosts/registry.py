"""Hosts in Redis: each host publishes its address, capacity and a heartbeat in one hash
(``envscaler:hosts``, one field per host: one key, so one slot on Redis Cluster too), and
gateways read it to place sessions and to tell a live host from a dead one.

Each entry is signed with the cluster secret (HMAC-SHA256 over its fields): whoever may write
to Redis but lacks the secret cannot point a host's entry at a relay, nor invent a host; such
an entry is ignored (and logged once). The handshake checks the same id and address again
(``wire``), so a relay fails even where a stale signed entry is replayed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from dataclasses import asdict, dataclass
from typing import Any

from envscaler.common import jsoncodec

log = logging.getLogger("envscaler.sandbox.hosts")

HOSTS_KEY = "envscaler:hosts"
STALE_BEATS = 3  # a host that missed this many heartbeats in a row is taken for dead
FORGET_AFTER = 600.0  # seconds of silence (by the entry's own time) before its entry is removed
# Remove a host's entry only if it is still the text that was read: a host that beat again in
# between keeps its new entry.
ENTRY_PURPOSE = b"envscaler-host-entry-v1\n"
SIGNATURE = "sig"
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
        """None for an entry that is not a host's; its signature unchecked (``HostRegistry``
        checks it)."""
        try:
            return cls.from_data(jsoncodec.loads(text))
        except ValueError:
            return None

    @classmethod
    def from_data(cls, data: Any) -> HostInfo | None:
        try:
            return cls(id=str(data["id"]), address=str(data["address"]),
                       ready=int(data["ready"]), live=int(data["live"]),
                       capacity=int(data["capacity"]), interval=float(data["interval"]),
                       beat=float(data["beat"]), backend=str(data.get("backend", "")))
        except (ValueError, TypeError, KeyError):
            return None


def signature(secret: bytes, data: dict[str, Any]) -> str:
    """The entry's HMAC under the cluster secret, over its fields in a canonical JSON form."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hmac.new(secret, ENTRY_PURPOSE + text.encode(), hashlib.sha256).hexdigest()


def verified(secret: bytes, field: str, text: str) -> HostInfo | None:
    """The host of an entry signed with ``secret`` under its own id; None for any other."""
    try:
        data = jsoncodec.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    sig = data.pop(SIGNATURE, None)
    if not (isinstance(sig, str) and hmac.compare_digest(sig, signature(secret, data))):
        return None
    info = HostInfo.from_data(data)
    return info if info is not None and info.id == field else None


class HostRegistry:
    """Publishing (hosts) and reading (gateways) the hosts' hash; ``redis`` is a client of
    ``redis.asyncio`` with ``decode_responses=True`` (a cluster client too); ``secret``: the
    cluster secret, which signs and checks the entries."""

    def __init__(self, redis: Any, secret: bytes) -> None:
        self.redis = redis
        self.secret = secret
        self._refused: set[str] = set()  # entries already logged as not verifiable

    async def publish(self, info: HostInfo) -> None:
        data = asdict(info)
        await self.redis.hset(HOSTS_KEY, info.id, jsoncodec.dumps(
            {**data, SIGNATURE: signature(self.secret, data)}))

    async def withdraw(self, host_id: str) -> None:
        await self.redis.hdel(HOSTS_KEY, host_id)

    async def hosts(self) -> dict[str, HostInfo]:
        """Every host's entry; entries silent for ``FORGET_AFTER`` seconds are removed (a host
        that left without withdrawing: killed, or its node lost), so the hash holds what may
        still be alive, not every host there ever was."""
        raw = await self.redis.hgetall(HOSTS_KEY)
        hosts, refused = {}, set()
        for field, text in raw.items():
            info = verified(self.secret, field, text)
            if info is None:
                refused.add(text)
                if text not in self._refused:
                    log.warning("ignored a hosts' registry entry that the cluster secret does "
                                "not sign host=%r entry=%.200r", field, text)
            elif info.silent_for() < FORGET_AFTER:
                hosts[info.id] = info
            else:
                await self.redis.eval(_FORGET, 1, HOSTS_KEY, field, text)
        self._refused = refused
        return hosts
