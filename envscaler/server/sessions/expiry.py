"""Idle expiry: a background pass that ends sessions nobody has used for ``session_ttl``."""

from __future__ import annotations

import asyncio
import logging
import time

from envscaler.server.errors import ApiError
from envscaler.server.metrics import Metrics
from envscaler.server.sessions.locking import SessionLocks
from envscaler.server.sessions.sandboxes import SessionSandboxes
from envscaler.server.settings import Settings
from envscaler.server.store import SessionStore

log = logging.getLogger("envscaler.server.sessions")


class SessionExpiry:
    """Ends idle sessions, in the background from `start` to `close`."""

    def __init__(
        self,
        settings: Settings,
        store: SessionStore,
        locks: SessionLocks,
        sandboxes: SessionSandboxes,
        metrics: Metrics,
    ) -> None:
        self.settings = settings
        self.store = store
        self.locks = locks
        self.sandboxes = sandboxes
        self.metrics = metrics
        self._expirer: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._expirer = asyncio.create_task(self._expire_forever(), name="envscaler-session-expiry")

    async def close(self) -> None:
        if self._expirer is not None:
            self._expirer.cancel()
            try:
                await self._expirer
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass

    @property
    def interval(self) -> float:
        return min(5.0, max(0.1, self.settings.session_ttl / 4))

    async def expire_idle(self) -> int:
        """Expire sessions idle longer than ``session_ttl``: end the sandbox, keep the record
        (readable for ``record_ttl``). A session busy with a request is not idle: skipped."""
        cutoff = time.time() - self.settings.session_ttl
        expired = 0
        for session_id in await self.store.idle(cutoff):
            try:
                async with self.locks.locked(session_id, wait=0.0, touch=False) as held:
                    last = await self.store.last_activity(session_id)
                    if last is None or last > cutoff:
                        continue  # touched meanwhile, or already finished
                    record = held.record
                    if record is None or record.status != "active":
                        await self.store.forget_live(session_id)
                        continue
                    await self.sandboxes.drop(record)
                    await self.store.finish(record, "expired")
                    expired += 1
                    self.metrics.sessions_expired.inc()
                    log.info(
                        "session expired session=%s env=%s idle_s=%.1f",
                        session_id,
                        record.env,
                        time.time() - last,
                    )
            except ApiError:
                continue  # busy: it is being used, so it is not idle
        await self.sandboxes.forget_stale()
        return expired

    async def _expire_forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.expire_idle()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("session expiry pass failed; will retry")
