"""Prometheus metrics of one gateway process (``GET /metrics``, text format).

Each app has its own registry, so that several apps can live in one process (tests) without
colliding. Pool levels and sandbox start/failure counts are read from the pool at scrape time;
``envscaler_sessions_live`` is Redis's ``ZCARD envscaler:sessions:live`` at scrape time, so it
counts the sessions of every gateway on that Redis.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

CALL_BUCKETS = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
REWARD_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.9999, 1.0)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class _PoolCollector(Collector):
    def __init__(self, stats: Callable[[], Any], failures: Callable[[], dict[str, int]]) -> None:
        self._stats = stats
        self._failures = failures

    def collect(self) -> Iterator[Any]:
        stats = self._stats()
        if stats is None:
            return
        yield GaugeMetricFamily(
            "envscaler_pool_ready", "Warm sandboxes ready to be claimed", value=stats.ready
        )
        yield GaugeMetricFamily(
            "envscaler_pool_live",
            "Sandboxes of this gateway that exist (warm, claimed, starting)",
            value=stats.live,
        )
        yield GaugeMetricFamily(
            "envscaler_pool_target", "Warm pool target size", value=stats.target
        )
        yield GaugeMetricFamily(
            "envscaler_pool_capacity", "Most sandboxes this gateway may run", value=stats.capacity
        )
        yield CounterMetricFamily(
            "envscaler_sandbox_starts", "Sandboxes started", value=stats.started
        )
        failures = CounterMetricFamily(
            "envscaler_sandbox_failures",
            "Sandbox failures: reason=create (did not start), crash (died in use), "
            "timeout (deadline)",
            labels=["reason"],
        )
        failures.add_metric(["create"], stats.failed)
        for reason, count in sorted(self._failures().items()):
            failures.add_metric([reason], count)
        yield failures


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.tool_call_seconds = Histogram(
            "envscaler_tool_call_seconds",
            "Tool call latency inside the gateway (lock to answer)",
            ["env", "tool"],
            buckets=CALL_BUCKETS,
            registry=self.registry,
        )
        self.sessions_live = Gauge(
            "envscaler_sessions_live",
            "Active sessions on this Redis (all gateways)",
            registry=self.registry,
        )
        self.session_rebuilds = Counter(
            "envscaler_session_rebuilds",
            "Sessions rebuilt on a fresh sandbox by deterministic replay",
            registry=self.registry,
        )
        self.replay_mismatches = Counter(
            "envscaler_replay_mismatches",
            "Replayed calls whose result differed from the recorded one",
            registry=self.registry,
        )
        self.reward = Histogram(
            "envscaler_reward",
            "Rewards returned by validate",
            ["env"],
            buckets=REWARD_BUCKETS,
            registry=self.registry,
        )
        self.sessions_created = Counter(
            "envscaler_sessions_created", "Sessions created", ["env"], registry=self.registry
        )
        self.sessions_expired = Counter(
            "envscaler_sessions_expired", "Sessions expired for idleness", registry=self.registry
        )
        self._failures: dict[str, int] = {"crash": 0, "timeout": 0}
        self._pool_stats: Callable[[], Any] = lambda: None
        self.registry.register(
            _PoolCollector(lambda: self._pool_stats(), lambda: dict(self._failures))
        )

    def watch_pool(self, stats: Callable[[], Any]) -> None:
        self._pool_stats = stats

    def sandbox_failed(self, reason: str) -> None:
        self._failures[reason] = self._failures.get(reason, 0) + 1

    def render(self, live_sessions: int | None) -> bytes:
        if live_sessions is not None:
            self.sessions_live.set(live_sessions)
        return generate_latest(self.registry)
