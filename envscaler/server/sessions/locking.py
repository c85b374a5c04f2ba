"""Per-session serialization: this process's lock first, then the Redis lock with its lease."""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from redis.exceptions import LockError, RedisError

from envscaler.server.errors import ApiError, redis_failed, session_busy, unauthorized
from envscaler.server.settings import Settings
from envscaler.server.store import Record, SessionLock, SessionStore, TokenRefused

log = logging.getLogger("envscaler.server.sessions")

BUSY_RETRY_AFTER = 1.0


@dataclass
class _LocalLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


@dataclass
class Held:
    """A held session lock and what was read under it."""

    lock: SessionLock
    record: Record | None
    seen_index: int | None = None  # ``index`` of the entry of an already seen call_id


class SessionLocks:
    """The locks of the sessions this process is serving, and the releases it still owes."""

    def __init__(self, settings: Settings, store: SessionStore) -> None:
        self.store = store
        self.wait = settings.session_lock_wait
        # The lease must outlast the longest step between two renewals: a call, or a load.
        self.lease = max(10.0, 2 * max(settings.call_timeout, settings.load_timeout) + 5.0)
        self._locks: dict[str, _LocalLock] = {}
        self._releases: set[asyncio.Task[None]] = set()  # see _release_later
        self._holding: dict[SessionLock, float] = {}  # held Redis locks -> last (re)newed
        self._keeper: asyncio.Task[None] | None = None

    def in_use(self, session_id: str) -> bool:
        """Whether a request of this process holds or waits for the session."""
        return session_id in self._locks

    def start(self) -> None:
        self._keeper = asyncio.create_task(self._keep_leases(), name="envscaler-lease-keeper")

    def close(self) -> None:
        for task in [*self._releases, *([self._keeper] if self._keeper else [])]:
            task.cancel()

    async def _keep_leases(self) -> None:
        """Renew every lock held longer than a third of its lease, so that a lease does not run
        out while the request that holds it is still working (one task for all locks, so a short
        request pays nothing). A renewal that fails is logged; the request then finds its lock
        lost when it commits."""
        while True:
            await asyncio.sleep(self.lease / 6)
            due = time.monotonic() - self.lease / 3
            for lock, renewed in list(self._holding.items()):
                if renewed > due or not lock.held():
                    continue
                try:
                    await lock.reacquire()
                except (LockError, RedisError) as exc:
                    if lock.held():  # else released meanwhile, by the request's own commit
                        log.warning("session lock renewal failed lock=%s error=%s", lock.name, exc)
                    continue
                if lock in self._holding:
                    self._holding[lock] = time.monotonic()

    @asynccontextmanager
    async def locked(
        self,
        session_id: str,
        wait: float | None = None,
        call_id: str | None = None,
        touch: bool = True,
        token_hash: str | None = None,
    ) -> AsyncIterator[Held]:
        """Hold the session and read its record: first this process's lock, then the Redis lock
        (taken together with the reads in one round trip when free). Waiting for the two takes
        at most ``wait`` in all (then 503 ``SessionBusy``); each Redis command, at most the
        client's ``redis_timeout``. Taking it is activity (``touch``: the session is not idle),
        except for the idle expiry's own. An agent's ``token_hash`` is checked before anything
        else: in that round trip, or first with a read of its own when another request holds
        the session in this process (so that it does not wait in line). A wrong token answers
        401 at once, having taken no lock and touched nothing."""
        wait = self.wait if wait is None else wait
        deadline = time.monotonic() + wait
        local = self._locks.get(session_id)
        if local is None:
            local = self._locks[session_id] = _LocalLock()
        local.users += 1
        try:
            if local.users == 1:
                await local.lock.acquire()  # no one else holds it or waits: taken at once
            else:
                if token_hash is not None:
                    await self._verify(session_id, token_hash)  # not queued behind the holder
                try:
                    async with asyncio.timeout(wait):
                        await local.lock.acquire()
                except TimeoutError:
                    raise self._busy(session_id) from None
            try:
                lock = self.store.lock(session_id, self.lease, wait)
                try:
                    acquired, record, seen = await self.store.lock_and_load(
                        lock, session_id, call_id, touch, token_hash
                    )
                    if not acquired:
                        if wait <= 0 or not await self._wait_for(lock, deadline):
                            raise self._busy(session_id)
                        record, seen = await self.store.load_for_call(session_id, call_id)
                    if touch and record is not None and record.init and record.status == "active":
                        await self.store.keep_init(record.init)
                except TokenRefused:
                    raise unauthorized("invalid agent token") from None
                except RedisError as exc:
                    self._release_later(lock, lock.token)
                    raise redis_failed(exc) from exc
                self._holding[lock] = time.monotonic()
                try:
                    yield Held(lock, record, seen_index=seen)
                finally:
                    self._holding.pop(lock, None)
                    if lock.held():
                        token = lock.token
                        try:
                            await lock.release()
                        except LockError:
                            log.warning(
                                "session lock lease ran out before release session=%s lease=%g",
                                session_id,
                                self.lease,
                            )
                        except RedisError as exc:
                            log.warning(
                                "session lock release failed session=%s error=%s", session_id, exc
                            )
                            self._release_later(lock, token)
            finally:
                local.lock.release()
        finally:
            local.users -= 1
            if local.users == 0:
                self._locks.pop(session_id, None)

    async def _verify(self, session_id: str, token_hash: str) -> None:
        """401 unless ``token_hash`` is the session's agent token's (one read, no lock)."""
        try:
            stored = await self.store.agent_token_hash(session_id)
        except RedisError as exc:
            raise redis_failed(exc) from exc
        if stored is None or not hmac.compare_digest(stored, token_hash):
            raise unauthorized("invalid agent token")

    @staticmethod
    async def _wait_for(lock: SessionLock, deadline: float) -> bool:
        """Wait for the Redis lock until ``deadline``. Its token is known before the first
        ``SET`` is sent, as in `SessionStore.lock_and_load`: one that lands although its reply
        was lost is then released by `_release_later`, or recognized by a retry as its own."""
        token = os.urandom(16).hex().encode()
        lock.take(token)
        if await lock.acquire(blocking_timeout=max(deadline - time.monotonic(), 0.0),
                              token=token):
            return True
        lock.drop()
        return False

    def _release_later(self, lock: SessionLock, token: bytes | None) -> None:
        """Release a lock that this process may hold by ``token`` but could not release (Redis
        was away, or a SET of ours may still land): retried in the background until Redis
        answers, so the session is not left locked for a whole lease after Redis comes back."""
        lock.drop()
        if token is None:
            return
        deadline = time.monotonic() + self.lease

        async def release() -> None:
            answered = 0
            while time.monotonic() < deadline and answered < 2:
                try:
                    await lock.do_release(token)
                    return
                except LockError:
                    # Not ours: never set, expired, or not yet set (a SET queued in a Redis that
                    # just woke up lands within moments): look once more, then stop.
                    answered += 1
                except RedisError:
                    pass
                await asyncio.sleep(0.5 if answered == 0 else 1.0)

        task = asyncio.create_task(release())
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    def _busy(self, session_id: str) -> ApiError:
        return session_busy(f"session {session_id} is busy with another request; retry",
                            BUSY_RETRY_AFTER)

    async def renew(self, lock: SessionLock, record: Record) -> None:
        """Restart the lock's lease before a long step (a load, a stretch of replay); 503
        ``SessionBusy`` when it is no longer held."""
        try:
            await lock.reacquire()
        except LockError as exc:
            raise session_busy(f"session {record.id} lost its lock during a long operation; "
                               "retry", BUSY_RETRY_AFTER) from exc
