"""Prometheus metrics of the gateway (``GET /metrics``, text format).

Each app has its own registry, so that several apps can live in one process (tests) without
colliding. ``envscaler_sessions_live`` is the sum of Redis's ``ZCARD`` of the live set's shards at
scrape time, so it counts the sessions of every gateway on that Redis.

Under ``envscaler serve --workers N`` (``envscaler.server.workers``), ``PROMETHEUS_MULTIPROC_DIR`` is set
and prometheus_client keeps every worker's values in files there; a scrape, whichever worker
answers it, reads them all: counters and histograms are summed over the workers, dead ones
included, and pool gauges over the live workers (``livesum``). The pool's levels and counts are
copied into the metrics at each scrape and, in that mode, every ``SYNC_INTERVAL`` seconds, so the
other workers' figures are at most that old. Not ``Gauge.set_function``: its value lives only in
its own process's registry and never reaches the files a multiprocess scrape reads (it reads 0).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
SYNC_INTERVAL = 1.0
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
POOL_LEVELS = {
    "ready": "Warm sandboxes ready to be claimed",
    "live": "Sandboxes of this gateway that exist (warm, claimed, starting)",
    "target": "Warm pool target size",
    "capacity": "Most sandboxes this gateway may run",
}
FAILURE_REASONS = ("create", "crash", "timeout")
VALIDATION_OUTCOMES = ("judged", "starved", "busy", "exhausted")


def _exposed(own: CollectorRegistry) -> CollectorRegistry:
    """What a scrape reads: every process's values under multiprocess mode, else this app's."""
    if MULTIPROC_DIR_ENV not in os.environ:
        return own
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return registry


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
            multiprocess_mode="livemostrecent",  # the same Redis figure, read by any worker
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
        self.pool_levels = {
            level: Gauge(f"envscaler_pool_{level}", text, registry=self.registry,
                         multiprocess_mode="livesum")
            for level, text in POOL_LEVELS.items()
        }
        self.sandbox_starts = Counter(
            "envscaler_sandbox_starts", "Sandboxes started", registry=self.registry
        )
        self.sandbox_recycles = Counter(
            "envscaler_sandbox_recycles",
            "Sandboxes of ended sessions restarted in place and returned to the warm pool",
            registry=self.registry,
        )
        self.validate_seconds = Histogram(
            "envscaler_validate_seconds",
            "Validation latency inside the gateway (snapshot and checks)",
            buckets=CALL_BUCKETS,
            registry=self.registry,
        )
        self.validations = Counter(
            "envscaler_validations",
            "Validations by outcome: judged (a reward), starved (503 ChecksStarved), "
            "busy (503: no checker free), exhausted (500 CheckExhausted: a check ran out of its "
            "CPU time or memory)",
            ["outcome"],
            registry=self.registry,
        )
        for outcome in VALIDATION_OUTCOMES:
            self.validations.labels(outcome)
        self.sandbox_failures = Counter(
            "envscaler_sandbox_failures",
            "Sandbox failures: reason=create (did not start), crash (died in use), "
            "timeout (deadline)",
            ["reason"],
            registry=self.registry,
        )
        for reason in FAILURE_REASONS:
            self.sandbox_failures.labels(reason)  # exposed at 0 before the first failure
        # (env, tool) -> its histogram: ``labels`` takes a lock and builds a key on every call
        self._tool_calls: dict[tuple[str, str], Any] = {}
        self._pool_stats: Callable[[], Any] = lambda: None
        self._copied = (0, 0, 0)  # the pool's started, failed, recycled counts already counted
        self._exposed = _exposed(self.registry)

    def watch_pool(self, stats: Callable[[], Any]) -> None:
        """Read the pool's levels and counts from ``stats`` (in the event loop, under
        multiprocess mode, so that the other workers' scrapes see them too)."""
        self._pool_stats, self._copied = stats, (0, 0, 0)
        if self._exposed is not self.registry:
            self._sync_every(asyncio.get_running_loop())

    def _sync_every(self, loop: asyncio.AbstractEventLoop) -> None:
        self._copy_pool()
        loop.call_later(SYNC_INTERVAL, self._sync_every, loop)

    def _copy_pool(self) -> None:
        stats = self._pool_stats()
        if stats is None:
            return
        for level, gauge in self.pool_levels.items():
            gauge.set(getattr(stats, level))
        started, failed, recycled = self._copied
        self.sandbox_starts.inc(stats.started - started)
        self.sandbox_failures.labels("create").inc(stats.failed - failed)
        self.sandbox_recycles.inc(stats.recycled - recycled)
        self._copied = (stats.started, stats.failed, stats.recycled)

    def tool_call(self, env: str, tool: str, seconds: float) -> None:
        """Observe a tool call's latency (``envscaler_tool_call_seconds{env, tool}``)."""
        child = self._tool_calls.get((env, tool))
        if child is None:
            child = self._tool_calls[(env, tool)] = self.tool_call_seconds.labels(env, tool)
        child.observe(seconds)

    def sandbox_failed(self, reason: str) -> None:
        self.sandbox_failures.labels(reason).inc()

    def render(self, live_sessions: int | None) -> bytes:
        self._copy_pool()
        if live_sessions is not None:
            self.sessions_live.set(live_sessions)
        return generate_latest(self._exposed)
