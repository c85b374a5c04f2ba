"""`SessionService`: the sessions' operations, each from the module that implements it, over one
set of parts (the store, the locks, the sandboxes, the idle expiry)."""

from __future__ import annotations

from redis.asyncio import Redis

from envscaler.sandbox.backends.base import SandboxBackend
from envscaler.sandbox.checkers import CheckerPool
from envscaler.sandbox.image_pools import ImagePools
from envscaler.server.callsummary import CallSummary
from envscaler.server.catalogue import ServedCatalogue
from envscaler.server.metrics import Metrics
from envscaler.server.redis_scripts import ScriptClient
from envscaler.server.sessions.claims import SandboxClaims
from envscaler.server.sessions.expiry import SessionExpiry
from envscaler.server.sessions.lifecycle import Lifecycle
from envscaler.server.sessions.locking import SessionLocks
from envscaler.server.sessions.points import Points
from envscaler.server.sessions.reads import Reads
from envscaler.server.sessions.replay import Rebuilds
from envscaler.server.sessions.reset import Resets
from envscaler.server.sessions.sandboxes import SessionSandboxes
from envscaler.server.sessions.toolcall import ToolCalls
from envscaler.server.sessions.validation import Validator
from envscaler.server.settings import Settings
from envscaler.server.store import SessionStore


class SessionService:
    """What the routes and the MCP door call: ``create``, ``info``, ``tools``, ``trajectory``,
    ``call``, ``state``, ``validate``, ``reset``, ``fork``, ``snapshot``, ``open_snapshot``,
    ``touch``, ``delete``, ``expire_idle``, ``live_count``."""

    def __init__(
        self,
        settings: Settings,
        redis: Redis,
        catalogue: ServedCatalogue,
        pools: ImagePools,
        checkers: CheckerPool,
        backend: SandboxBackend,
        metrics: Metrics,
    ) -> None:
        self.scripts = (ScriptClient.for_url(settings.redis_url, settings.redis_timeout,
                                             settings.redis_timeout)
                        if settings.redis_url else None)
        self.store = SessionStore(redis, settings.session_ttl, settings.record_ttl, self.scripts)
        self.locks = SessionLocks(settings, self.store)
        claims = SandboxClaims(settings, catalogue, pools, self.locks, metrics)
        rebuilds = Rebuilds(settings, self.store, catalogue, self.locks, claims, metrics)
        self.sandboxes = SessionSandboxes(settings, self.store, backend, self.locks, claims,
                                          rebuilds, metrics)
        self.expiry = SessionExpiry(settings, self.store, self.locks, self.sandboxes, metrics)
        lifecycle = Lifecycle(self.store, catalogue, self.locks, claims, self.sandboxes, metrics)
        reads = Reads(self.store, catalogue, self.locks, self.sandboxes)
        validation = Validator(settings, self.store, catalogue, self.locks, self.sandboxes,
                                checkers, metrics)
        self.create = lifecycle.create
        self.delete = lifecycle.delete
        self.touch = lifecycle.touch
        self.info = reads.info
        self.tools = reads.tools
        self.trajectory = reads.trajectory
        self.state = reads.state
        self.summary = CallSummary(settings.log_summary_seconds)
        self.call = ToolCalls(settings, self.store, catalogue, self.locks, self.sandboxes,
                              metrics, self.summary).call
        self.reset = Resets(settings, self.store, catalogue, self.locks, claims,
                            self.sandboxes).reset
        self.validate = validation.validate
        points = Points(settings, redis, self.store, catalogue, self.locks, claims,
                        self.sandboxes, metrics)
        self.fork = points.fork
        self.snapshot = points.snapshot
        self.open_snapshot = points.open_snapshot
        self.expire_idle = self.expiry.expire_idle
        self.live_count = self.store.live_count

    def start(self) -> None:
        self.locks.start()
        self.expiry.start()
        self.summary.start()

    async def close(self) -> None:
        await self.expiry.close()
        await self.summary.close()
        self.locks.close()
        self.sandboxes.close()
        if self.scripts is not None:
            self.scripts.close()
