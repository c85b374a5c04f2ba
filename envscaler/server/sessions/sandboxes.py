"""The live sandboxes this process holds for its sessions, and getting one into the state its
record describes: held, or attached to by its handle and pinged, or rebuilt by replay
(`envscaler.server.sessions.replay`)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from envscaler.sandbox.backends.base import InvalidHandle, SandboxBackend, SandboxHandle
from envscaler.sandbox.errors import (
    CallTimeout,
    RuntimeFault,
    SandboxError,
    SandboxGone,
    SandboxUnavailable,
)
from envscaler.sandbox.sandbox import Sandbox
from envscaler.server import statesize
from envscaler.server.catalogue import ServedEnv
from envscaler.server.metrics import Metrics
from envscaler.server.sessions import faults
from envscaler.server.sessions.claims import PING_TIMEOUT, SandboxClaims
from envscaler.server.sessions.faults import Fault, Step
from envscaler.server.sessions.locking import SessionLocks
from envscaler.server.sessions.replay import Rebuilds
from envscaler.server.settings import Settings
from envscaler.server.store import Record, SessionLock, SessionStore

log = logging.getLogger("envscaler.server.sessions")

T = TypeVar("T")
ATTEMPTS = 3  # runs of an operation on a sandbox: the first, and rebuilds after a fault


@dataclass
class SessionSandboxes:
    """A sandbox in its record's state for each session served, kept between requests."""

    settings: Settings
    store: SessionStore
    backend: SandboxBackend
    locks: SessionLocks
    claims: SandboxClaims
    rebuilds: Rebuilds
    metrics: Metrics
    held: dict[str, Sandbox] = field(default_factory=dict)  # session id -> live sandbox here

    def close(self) -> None:
        # Sessions stay active in Redis; another gateway (or this one restarted) rebuilds them.
        for sandbox in list(self.held.values()):
            sandbox.client.close()
        self.held.clear()

    def adopt(self, session_id: str, sandbox: Sandbox) -> None:
        """Hold ``sandbox`` for the session; one held before it is let go."""
        old = self.held.get(session_id)
        self.held[session_id] = sandbox
        if old is not None and old is not sandbox:
            self._let_go(old)

    def _let_go(self, sandbox: Sandbox) -> None:
        """Stop using a sandbox that no longer holds its session's state. One of our pool's goes
        back to it (in the background); one attached to by handle is only disconnected: whoever
        replaced it ended it, and may have recycled it for another session since."""
        if sandbox.destroyed:
            return
        if sandbox.owner is not None:
            sandbox.owner.reclaim(sandbox)
        else:
            sandbox.client.close()

    async def live_sandbox(self, record: Record) -> Sandbox | None:
        """The record's sandbox if it answers (held by this process, or attached via its handle)."""
        handle = record.sandbox
        held = self.held.get(record.id)
        if held is not None:
            same = held.handle.names_same_sandbox(handle)
            if same and not held.destroyed:
                return held
            self.held.pop(record.id, None)
            if same:
                return None  # this process saw it die (deadline, crash): no need to probe it
            self._let_go(held)  # superseded by a rebuild elsewhere
        sandbox = await self._attach_stored(record)
        if sandbox is None:
            return None
        try:
            info = await sandbox.ping(timeout=PING_TIMEOUT)
        except SandboxError as exc:  # ping failures destroy the sandbox
            log.info(
                "session sandbox does not answer session=%s sandbox=%s error=%s",
                record.id,
                sandbox.id[:12],
                exc,
            )
            return None
        if not isinstance(info, dict) or info.get("loaded") is False:
            log.warning(
                "session sandbox lost its environment session=%s sandbox=%s",
                record.id,
                sandbox.id[:12],
            )
            await self.claims.destroy_quietly(sandbox)
            return None
        if info.get("executed") != record.executed:
            # A gateway died between running a call and recording it: the sandbox holds effects
            # that the trajectory lacks, so it is discarded and the session rebuilt by replay.
            log.warning(
                "session sandbox ran unrecorded calls session=%s sandbox=%s executed=%s "
                "recorded=%d",
                record.id,
                sandbox.id[:12],
                info.get("executed"),
                record.executed,
            )
            await self.claims.destroy_quietly(sandbox)
            return None
        self.held[record.id] = sandbox
        return sandbox

    async def _attach_stored(self, record: Record) -> Sandbox | None:
        """The sandbox the record's handle names, if the handle is one of this service's (a
        handle is data from Redis: the backend checks its shape and its id against what it
        created, derives the socket from it under its own root, and the sandbox must prove its
        secret on connect). None: no usable handle, so the session is rebuilt on a fresh
        sandbox, and whatever a bad handle names is left alone."""
        if not record.sandbox:
            return None
        try:
            handle = self.backend.handle_from(record.sandbox)
        except InvalidHandle as exc:
            log.warning("unusable sandbox handle session=%s error=%s", record.id, exc)
            return None
        try:
            verified = await self.backend.verify(handle)
        except SandboxUnavailable:
            # No engine to ask: the sandbox still proves its secret on connect, and nothing is
            # removed without the engine's word.
            verified = True
        sandbox = self._attach(handle)
        if verified:
            return sandbox
        log.warning("session sandbox is gone or not this service's session=%s sandbox=%.64s",
                    record.id, handle.id)
        await self.claims.destroy_quietly(sandbox)  # what is left of it, if provably its
        return None

    def _attach(self, handle: SandboxHandle) -> Sandbox:
        """A sandbox another process loaded, with this gateway's reply limits."""
        sandbox = Sandbox(handle, self.backend)
        sandbox.max_result_bytes = self.settings.max_result_bytes
        sandbox.max_state_bytes = self.settings.max_state_bytes
        return sandbox

    async def sandbox(self, record: Record, lock: SessionLock) -> Sandbox:
        """A live sandbox in the record's current state, rebuilt by replay when needed."""
        sandbox = await self.live_sandbox(record)
        if sandbox is not None:
            return sandbox
        sandbox = await self.rebuilds.rebuild(record, lock)
        self.adopt(record.id, sandbox)
        return sandbox

    async def failed(self, record: Record, sandbox: Sandbox, exc: SandboxError) -> Fault:
        """Count a failure of the record's sandbox and let go of it as its `Fault` says: a stale
        one is dropped, a lost one forgotten (the next request rebuilds either by replay)."""
        fault = faults.counted(exc, self.metrics)
        if fault.stale:
            log.warning("session sandbox does not hold the recorded state session=%s sandbox=%s "
                        "error=%s", record.id, sandbox.id[:12], exc)
            await self.drop(record)
        elif fault.lost:
            self.held.pop(record.id, None)
            record.sandbox = None
        return fault

    async def retry_after_crash(self, record: Record, lock: SessionLock, attempt: int) -> bool:
        """Whether a request whose sandbox died under it (``attempt``: 1, 2, 3) runs again on a
        rebuilt one: after the first death, yes; on a rebuilt sandbox the request ended it,
        unless a recorded call ended it just after its replay (found and marked: yes)."""
        return attempt == 1 or (attempt == 2 and await self.rebuilds.ended_by_replay(record, lock))

    async def drop(self, record: Record) -> None:
        """End the record's sandbox, whoever created it: recycled into our pool where the
        backend can, killed otherwise."""
        held = self.held.pop(record.id, None)
        handle = record.sandbox
        current = held is not None and held.handle.names_same_sandbox(handle)
        if held is not None and not held.destroyed:
            if current:
                await self.claims.release_quietly(held, record.env)
            else:
                self._let_go(held)
        if not current and (sandbox := await self._attach_stored(record)) is not None:
            await self.claims.release_quietly(sandbox, record.env)

    async def with_sandbox(
        self, record: Record, lock: SessionLock, op: Callable[[Sandbox], Awaitable[T]],
        settle: Callable[[SandboxError, Fault], Awaitable[T]] | None = None,
    ) -> T:
        """Run ``op`` on the session's sandbox (on a non-active session, a temporary one): the
        one loop of every operation on a sandbox. A stale sandbox is rebuilt by replay (at most
        ``ATTEMPTS`` runs in all), one that died under ``op`` once (`retry_after_crash`); any
        other fault is ``settle``'s to answer (a tool call records it), else an API error."""
        active = record.status == "active"
        for attempt in range(1, ATTEMPTS + 1):
            sandbox = (
                await self.sandbox(record, lock)
                if active
                else await self.rebuilds.rebuild(record, lock, persist=False)
            )
            try:
                return await op(sandbox)
            except (RuntimeFault, CallTimeout, SandboxGone) as exc:
                fault = await self.failed(record, sandbox, exc)
                if fault.stale:
                    if attempt < ATTEMPTS:
                        continue
                    raise faults.unrestorable(record.id) from exc
                if fault is faults.CRASHED:
                    log.warning("sandbox died under a request session=%s attempt=%d error=%s",
                                record.id, attempt, exc)
                    if await self.retry_after_crash(record, lock, attempt):
                        continue
                if settle is not None:
                    return await settle(exc, fault)
                if fault is faults.TIMEOUT and active:
                    await self.store.set_sandbox(record, None)
                raise faults.api_error(exc, Step.READ) from exc
            finally:
                if not active:
                    await self.claims.release_quietly(sandbox, record.env)
        raise AssertionError("unreachable")

    async def read(self, record: Record, lock: SessionLock, env: ServedEnv,
                   op: Callable[[Sandbox, float], Awaitable[T]]) -> T:
        """``op`` reading the session's state (its state, or its snapshot) with the deadline of
        the state's size, then releasing ``lock``: reading an active session is activity."""
        timeout = statesize.read_timeout(
            self.settings, statesize.start_size(self.settings, env, record.scenario))
        result = await self.with_sandbox(record, lock, lambda sandbox: op(sandbox, timeout))
        if record.status == "active":
            await self.store.commit(record, lock, release=True)
        return result

    async def forget_stale(self) -> None:
        """Drop held sandboxes of sessions that another gateway closed or expired."""
        held = list(self.held)
        if not held:
            return
        for session_id, live in zip(held, await self.store.live_among(held), strict=True):
            if not live and not self.locks.in_use(session_id):
                sandbox = self.held.pop(session_id, None)
                if sandbox is not None:
                    self._let_go(sandbox)
