"""A warm pool of ready sandboxes that follows demand.

Pooled sandboxes are environment-agnostic: a session claims one and loads its environment into
it. When the session ends, its sandbox comes back (``release``), to the pool of whichever gateway
process ended the session: where the backend can, the container's keeper restarts the runtime in
place (every process killed, ``/tmp`` wiped, a fresh interpreter: nothing of the session
reachable) and the sandbox is ready again without the engine's help; otherwise it is destroyed.
Recycled sandboxes may hold the pool above its target while sessions come and go; what stays idle
beyond the target is destroyed after ``IDLE_SURPLUS_SECONDS``, so a trainer's batch that comes
back every training step finds its sandboxes warm, and an idle pool shrinks back to its target.

A creation makes as many runtimes as the backend's containers serve sessions at once
(``slots_per_creation``): a burst of claims waits for its share of the creations in flight, one
started for every that many claims beyond what those bring, up to ``create_concurrency`` at once,
never at a fixed rate; each claim waits at most ``QUEUE_WAIT_FACTOR`` start timeouts (then 503).
The background refill to the target goes through the same creations, and what they bring beyond
the claims waiting joins the warm pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from envscaler.sandbox.backends.base import RUNTIME, SandboxBackend
from envscaler.sandbox.config import SandboxConfig
from envscaler.sandbox.errors import (
    CapacityExhausted,
    SandboxError,
    SandboxStale,
    SandboxUnavailable,
)
from envscaler.sandbox.sandbox import Sandbox

log = logging.getLogger("envscaler.sandbox.pool")

CLAIM_PING_TIMEOUT = 1.0
RECYCLE_TIMEOUT = 5.0
RECYCLE_WAIT = 0.5  # a claim with nothing ready waits this long for a recycle in flight
FAILURE_BACKOFF = 2.0
SWEEP_INTERVAL = 10.0  # seconds between liveness probes of the warm sandboxes
QUEUE_WAIT_FACTOR = 2  # a cold claim waits at most this many start timeouts for a runtime
IDLE_SURPLUS_SECONDS = 120.0  # a warm sandbox beyond the target is destroyed after this long idle


@dataclass
class PoolStats:
    ready: int
    live: int
    target: int
    capacity: int
    started: int
    failed: int
    recycled: int


class SandboxPool:
    def __init__(self, backend: SandboxBackend, config: SandboxConfig,
                 name: str = "default", *, image: str | None = None,
                 owns_backend: bool = True) -> None:
        """``image``: the image of its sandboxes, when not the configured one (an environment's
        requirements'). ``owns_backend``: whether ``start`` and ``close`` start and close the
        backend too (False for a pool beside another on the same backend)."""
        self.backend = backend
        self.config = config
        self.name = name
        self.image = image
        self.owns_backend = owns_backend
        self._ready: deque[Sandbox] = deque()
        self._live = 0  # created by this pool and not yet destroyed, including those being created
        self._started = self._failed = self._recycled = 0
        self._recycling = 0  # sandboxes being recycled, on their way back to ``_ready``
        self._claims: deque[asyncio.Future[Sandbox]] = deque()  # cold claims, oldest first
        self._creations: set[asyncio.Task[None]] = set()
        self._promised = 0  # runtimes the creations in flight will bring
        self._backoff_until = 0.0  # a creation failed: the refill alone waits until then
        self._wanted = asyncio.Event()
        self._refiller: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()  # renames and recycles in flight
        self._recycled_one = asyncio.Event()  # pulsed when a recycle ends

    async def start(self) -> None:
        if self.owns_backend:
            await self.backend.start()
        self._refiller = asyncio.create_task(self._refill_forever(),
                                             name=f"envscaler-pool-{self.name}")
        self._wanted.set()

    def stats(self) -> PoolStats:
        return PoolStats(ready=len(self._ready), live=self._live, target=self.config.pool_size,
                         capacity=self.config.max_sandboxes, started=self._started,
                         failed=self._failed, recycled=self._recycled)

    async def claim(self, session_id: str) -> Sandbox:
        """A live sandbox for ``session_id``: warm when one is ready (or about to be, from a
        recycle in flight: tens of milliseconds against a cold start's hundreds), otherwise
        started now."""
        if not self._ready and self._recycling:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RECYCLE_WAIT):
                    await self._recycled_one.wait()
        while self._ready:
            sandbox = self._ready.popleft()
            self._wanted.set()
            if await self._answers(sandbox):
                self._name_later(sandbox, session_id)
                return sandbox
        return await self._claim_cold()

    async def _claim_cold(self) -> Sandbox:
        """A runtime of a creation: started now, or in flight already for claims ahead of this
        one. A claim whose creation failed waits for the next one, once: a creation under way
        when the engine restarted died with it, and the next may well start. At most
        ``QUEUE_WAIT_FACTOR`` start timeouts in all, then ``CapacityExhausted`` (503)."""
        wait = QUEUE_WAIT_FACTOR * self.config.start_timeout
        try:
            async with asyncio.timeout(wait):
                try:
                    return await self._runtime_of_a_creation()
                except SandboxUnavailable as exc:
                    log.warning("a creation failed under a claim (%s); the claim waits for the "
                                "next one", exc)
                    return await self._runtime_of_a_creation()
        except TimeoutError:
            raise CapacityExhausted(f"the engine is busy creating sandboxes (up to "
                                    f"{self.config.sandbox_create_concurrency} at once) and "
                                    f"none was ready within {wait:g} s",
                                    retry_after=1.0) from None

    async def _runtime_of_a_creation(self) -> Sandbox:
        """Join the claims waiting for creations (starting one if those in flight bring too
        few), and take the runtime that comes for this claim."""
        claim: asyncio.Future[Sandbox] = asyncio.get_running_loop().create_future()
        self._claims.append(claim)
        self._start_creations()
        try:
            return await claim
        except BaseException:
            if claim.done() and not claim.cancelled() and claim.exception() is None:
                self._shelve(claim.result())  # given just as this claim was given up on
            claim.cancel()
            raise

    def _name_later(self, sandbox: Sandbox, session_id: str) -> None:
        """Name the sandbox after its session off the claim's path (an engine round trip)."""
        self._in_background(self.backend.name_session(sandbox.handle, session_id))

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def release(self, sandbox: Sandbox) -> None:
        """A session ended, and ``sandbox`` is the one its record names (so no one else can have
        recycled it): recycle it into this pool in the background, whichever gateway process
        created it, when the pool wants it; otherwise destroy it now."""
        if not (self.backend.recyclable and self._wants_more()):
            await sandbox.destroy()
            return
        self._start_recycling(sandbox)

    def reclaim(self, sandbox: Sandbox) -> None:
        """A sandbox of this pool that its session no longer uses, and that the gateway which
        replaced or ended it may have recycled for another session since: recycled (only if its
        generation is still the one this pool gave out, see ``Sandbox.recycle``) or forgotten."""
        if self.backend.recyclable:
            self._start_recycling(sandbox)
        else:
            self._in_background(sandbox.destroy())

    def _wants_more(self) -> bool:
        """Whether a recycled sandbox is kept. Beyond the target too (the sweep trims what stays
        idle): a trainer's closing sessions then feed its next openings, and nothing has to be
        created cold while sessions open and close at the same pace."""
        return self.config.pool_size > 0

    def _start_recycling(self, sandbox: Sandbox) -> None:
        self._recycling += 1
        self._in_background(self._recycle(sandbox))

    async def _recycle(self, sandbox: Sandbox) -> None:
        try:
            await sandbox.recycle(RECYCLE_TIMEOUT)
        except SandboxStale:
            sandbox.abandon()  # recycled already, by the gateway that ended its session
            return
        except SandboxError as exc:
            log.warning("recycling sandbox %s failed (%s); destroying it", sandbox.id[:12], exc)
            await sandbox.destroy()
            return
        finally:
            self._recycling -= 1
            self._recycled_one.set()
            self._recycled_one.clear()
        if not self._wants_more():
            await sandbox.destroy()
            return
        self._recycled += 1
        self._in_background(self.backend.name_session(sandbox.handle, None))
        sandbox = self._own(sandbox)
        sandbox.idle_since = time.monotonic()
        self._ready.appendleft(sandbox)  # claimed first: its pages are still warm

    def _own(self, sandbox: Sandbox) -> Sandbox:
        """The sandbox as one of this pool's (one that another process created is adopted)."""
        if sandbox.owner is self:
            return sandbox
        sandbox.abandon()  # the attached object; the container lives on under this pool
        self._live += 1
        return Sandbox(sandbox.handle, self.backend, on_destroy=self._forget, owner=self)

    async def _answers(self, sandbox: Sandbox) -> bool:
        """Whether a warm sandbox is fit to hand out: it answers, and its creator is not taken
        for dead (its container is about to be reaped: a session rebuilt on it would lose it
        again at once)."""
        if self.backend.orphaned(sandbox.handle):
            log.info("pooled sandbox %s belongs to a dead instance; discarding it",
                     sandbox.id[:12])
            await sandbox.destroy()
            return False
        try:
            await sandbox.ping(timeout=CLAIM_PING_TIMEOUT)
            return True
        except SandboxError as exc:
            log.warning("pooled sandbox %s is dead (%s); discarding it", sandbox.id[:12], exc)
            await sandbox.destroy()
            return False

    def _start_creations(self) -> None:
        """Start creations for the claims waiting and the warm pool's target beyond what those in
        flight bring, up to ``create_concurrency`` at once and the pool's capacity."""
        while len(self._creations) < self.config.sandbox_create_concurrency:
            claims = sum(not claim.done() for claim in self._claims)
            refill = 0 if time.monotonic() < self._backoff_until else self._missing()
            if claims + max(refill, 0) <= self._promised:
                return
            count = min(self.backend.slots_per_creation,
                        self.config.max_sandboxes - self._live)
            if count <= 0:  # the claims no creation in flight brings a sandbox for: 429 now
                self._fail_claims(CapacityExhausted(
                    f"all {self.config.max_sandboxes} sandboxes are in use", retry_after=1.0,
                    full=True),
                    claims - self._promised, newest=True)
                return
            self._live += count
            self._promised += count
            task = asyncio.create_task(self._create(count))
            self._creations.add(task)
            task.add_done_callback(self._creations.discard)

    async def _create(self, count: int) -> None:
        """One creation of ``count`` runtimes (counted by the caller); what it makes goes to the
        claims waiting, oldest first, then to the pool."""
        try:
            handles = await self.backend.create_runtimes({"envscaler.pool": self.name,
                                                          "envscaler.session": ""}, self.image,
                                                         count)
        except Exception as exc:  # noqa: BLE001 - each claim it was for learns why
            self._live -= count
            self._failed += 1
            self._backoff_until = time.monotonic() + FAILURE_BACKOFF
            log.error("creating sandboxes failed: %s; the refill retries in %g s", exc,
                      FAILURE_BACKOFF)
            self._fail_claims(exc, count)
            self._wanted.set()
            return
        finally:
            self._promised -= count
        self._live += len(handles) - count
        self._started += 1
        for handle in handles:
            self._shelve(Sandbox(handle, self.backend, on_destroy=self._forget, owner=self))
        self._start_creations()

    def _shelve(self, sandbox: Sandbox) -> None:
        """Give a ready sandbox to the oldest claim waiting, or keep it warm."""
        while self._claims:
            claim = self._claims.popleft()
            if not claim.done():
                claim.set_result(sandbox)
                return
        sandbox.idle_since = time.monotonic()
        self._ready.append(sandbox)

    def _fail_claims(self, exc: BaseException, count: int, *, newest: bool = False) -> None:
        """``count`` claims waiting end with ``exc``: the oldest, or the ``newest``."""
        while self._claims and count > 0:
            claim = self._claims.pop() if newest else self._claims.popleft()
            if not claim.done():
                claim.set_exception(exc)
                count -= 1

    def _forget(self, _sandbox: Sandbox) -> None:
        self._live -= 1
        self._wanted.set()

    async def _refill_forever(self) -> None:
        while True:
            try:
                async with asyncio.timeout(SWEEP_INTERVAL):
                    await self._wanted.wait()
            except TimeoutError:
                await self._trim()
                await self._sweep()  # a death sets _wanted: the next turn refills
                continue
            self._wanted.clear()
            if (backoff := self._backoff_until - time.monotonic()) > 0:
                await asyncio.sleep(backoff)
            self._start_creations()

    async def _trim(self) -> None:
        """Destroy warm sandboxes beyond the target that stayed idle (the oldest are last)."""
        idle_since = time.monotonic() - IDLE_SURPLUS_SECONDS
        while len(self._ready) > self.config.pool_size and self._ready[-1].idle_since < idle_since:
            await self._ready.pop().destroy()

    async def _sweep(self) -> None:
        """Replace warm sandboxes that died while they waited (the engine restarted, the kernel's
        OOM killer, an operator's ``docker kill``), so the pool's level is true and a claim does
        not have to find out. Each is taken out while it is probed, so no claim can get it."""
        for _ in range(len(self._ready)):
            if not self._ready:
                return
            sandbox = self._ready.popleft()
            if await self._answers(sandbox):
                self._ready.append(sandbox)

    def _missing(self) -> int:
        return self.config.pool_size - len(self._ready) - self._recycling

    async def close(self) -> None:
        """Stop refilling (waiting for creations in flight to clean up), then kill everything."""
        if self._refiller is not None:
            self._refiller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refiller
        await asyncio.gather(*self._creations, *self._background, return_exceptions=True)
        while self._ready:
            await self._ready.popleft().destroy()
        if self.owns_backend:
            await self.backend.close()
