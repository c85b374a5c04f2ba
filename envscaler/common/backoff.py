"""Exponential back-off: the one rule of the gateway's worker restarts and synthesis's retries of
the model endpoint (the gateway's Redis clients use redis-py's ``Retry``, `envscaler.server.redis_scripts`;
the client package keeps its own, `envscaler_client.retry`, as it is installed alone)."""

from __future__ import annotations


def exponential(failures: int, base: float, cap: float) -> float:
    """Seconds to wait after ``failures`` failures in a row (1 or more): ``base``, doubled for
    each further failure, never more than ``cap``."""
    return float(min(cap, base * 2 ** (failures - 1)))
