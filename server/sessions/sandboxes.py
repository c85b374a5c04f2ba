"""The live sandboxes this process holds, and getting one into the state its record describes:
attach and ping, or claim, load and replay.

A recorded call may end its runtime: while it runs (``os._exit``, a fatal signal), which is
recorded as ``SandboxCrashed`` and never replayed, or just after it answered (a signal to PID 1,
a thread that exits), which is recorded as the answer it gave. Replaying such a call kills every
rebuilt runtime again, so when a runtime dies under a rebuild (during the replay, or under the
first call after it) the call that ended it is found (`SessionSandboxes.find_killer`): fresh
runtimes replay ever shorter prefixes of the trajectory and are given ``ENDED_GRACE`` to die by
themselves. That call is then marked ``ended_runtime`` (its answer stays what the agent saw; its
effects died with its runtime, as a crashed call's do), and the session goes on without it.
A death that no replay reproduces came from outside (an operator, the OOM killer): a retryable
503, as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sandbox.backends.base import InvalidHandle, SandboxBackend, SandboxHandle
from sandbox.errors import (
    CallTimeout,
    CapacityExhausted,
    RuntimeFault,
    SandboxError,
    SandboxGone,
    SandboxUnavailable,
)
from sandbox.pool import SandboxPool
from sandbox.sandbox import Sandbox
from server.catalogue import ServedCatalogue, ServedEnv
from server.errors import (
    ApiError,
    backend_unavailable,
    env_load_failed,
    invalid_request,
    retry_after,
)
from server.metrics import Metrics
from server.sessions.calls import TOOL_ERRORS
from server.sessions.locking import SessionLocks
from server.settings import Settings
from server.store import Record, SessionLock, SessionStore

log = logging.getLogger("envscaler.server.sessions")

T = TypeVar("T")

ATTACH_PING_TIMEOUT = 2.0
# Runtime errors that mean the sandbox does not hold the session's recorded state: it lost its
# environment, or it ran a call the trajectory lacks (``Diverged``: a gateway died between
# running a call and recording it while another gateway held the same sandbox). The sandbox is
# dropped and the session rebuilt by replay.
STALE_SANDBOX = {"NotLoaded", "Diverged"}
ENDED_GRACE = 0.2  # seconds a runtime is given to die by itself after a replay (find_killer)
MAX_ENDED = 3  # calls found to end the runtime in one rebuild before it gives up (503)


class ReplayDied(Exception):
    """The runtime died replaying ``entries[position]``."""

    def __init__(self, position: int, cause: SandboxGone) -> None:
        super().__init__(str(cause))
        self.position = position
        self.cause = cause


class SessionSandboxes:
    """A sandbox in its record's state for each session served, kept between requests."""

    def __init__(
        self,
        settings: Settings,
        store: SessionStore,
        catalogue: ServedCatalogue,
        pool: SandboxPool,
        backend: SandboxBackend,
        metrics: Metrics,
        locks: SessionLocks,
    ) -> None:
        self.settings = settings
        self.store = store
        self.catalogue = catalogue
        self.pool = pool
        self.backend = backend
        self.metrics = metrics
        self.locks = locks
        self.held: dict[str, Sandbox] = {}  # session id -> live sandbox this process holds

    def close(self) -> None:
        # Sessions stay active in Redis; another gateway (or this one restarted) rebuilds them.
        for sandbox in list(self.held.values()):
            sandbox.client.close()
        self.held.clear()

    async def claim(self, session_id: str) -> Sandbox:
        try:
            return await self.pool.claim(session_id)
        except CapacityExhausted as exc:
            stats = self.pool.stats()
            status = 429 if stats.live >= stats.capacity else 503
            raise ApiError(
                status, "CapacityExhausted", str(exc), headers=retry_after(exc.retry_after)
            ) from exc
        except SandboxUnavailable as exc:
            log.error("sandbox creation failed session=%s error=%s", session_id, exc)
            raise backend_unavailable(f"no sandbox could be created: {exc}") from exc
        except SandboxError as exc:
            log.error("sandbox creation failed session=%s error=%s", session_id, exc)
            raise backend_unavailable(f"no sandbox could be created: {exc}") from exc

    async def claim_loaded(
        self,
        session_id: str,
        env: ServedEnv,
        init_config: dict[str, Any],
        seed: int,
        *,
        custom: bool,
        held: tuple[SessionLock, Record] | None = None,
        clock_start: str | None = None,
    ) -> Sandbox:
        """Claim a sandbox and load ``env`` into it. A sandbox that dies under the load (the
        engine, the kernel's OOM killer or gVisor's Sentry ended it after its claim) is replaced
        once. ``held``: the session's lock, renewed after each claim (a cold start may take a
        while). A sandbox claimed here and not returned is destroyed, whatever failed (the
        renewal, the load, a cancellation): no one else knows of it."""
        for attempt in (1, 2):
            sandbox = await self.claim(session_id)
            try:
                if held is not None:
                    await self.locks.renew(*held)
                await self._load(sandbox, env, init_config, seed, custom, clock_start)
                return sandbox
            except SandboxGone as exc:
                await self.destroy_quietly(sandbox)
                self.metrics.sandbox_failed("crash")
                log.warning("sandbox died while loading session=%s env=%s attempt=%d error=%s",
                            session_id, env.id, attempt, exc)
                if attempt == 2:
                    raise backend_unavailable(
                        f"the sandbox died while loading the environment: {exc}"
                    ) from exc
            except BaseException:
                await self.destroy_quietly(sandbox)
                raise
        raise AssertionError("unreachable")

    async def _load(
        self, sandbox: Sandbox, env: ServedEnv, init_config: dict[str, Any], seed: int,
        custom: bool, clock_start: str | None,
    ) -> None:
        """Load ``env`` into a fresh sandbox; on failure raise ApiError (``SandboxGone``: it
        died meanwhile)."""
        try:
            await sandbox.load(
                source=env.source,
                class_name=env.class_name,
                tools=env.tool_names,
                init_config=init_config,
                seed=seed,
                max_result_bytes=self.settings.max_result_bytes,
                max_state_bytes=self.settings.max_state_bytes,
                timeout=self.settings.load_timeout,
                clock_start=clock_start,
            )
        except RuntimeFault as exc:
            if exc.kind == "LoadError" and custom:
                raise invalid_request(
                    f"the environment does not start from this init_config: {exc.message}",
                    field="init_config",
                ) from exc
            log.error("environment failed to load env=%s error=%s", env.id, exc)
            if exc.kind == "LoadError":
                raise env_load_failed(env.id, exc.message) from exc
            raise ApiError(
                500, "InternalError", f"environment {env.id} failed to load in its sandbox"
            ) from exc
        except CallTimeout as exc:
            self.metrics.sandbox_failed("timeout")
            raise ApiError(
                504,
                "Timeout",
                f"loading environment {env.id} exceeded {self.settings.load_timeout:g} s",
            ) from exc

    def adopt(self, session_id: str, sandbox: Sandbox) -> None:
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
        if sandbox.pooled:
            self.pool.reclaim(sandbox)
        else:
            sandbox.client.close()

    async def release_quietly(self, sandbox: Sandbox) -> None:
        """End the sandbox a record names: recycled into our pool (whoever created it), or
        destroyed."""
        try:
            await self.pool.release(sandbox)
        except Exception as exc:  # noqa: BLE001 - best effort; reapers remove what is left
            log.warning("sandbox release failed sandbox=%s error=%s", sandbox.id[:12], exc)

    async def destroy_quietly(self, sandbox: Sandbox) -> None:
        try:
            await sandbox.destroy()
        except Exception as exc:  # noqa: BLE001 - best effort; reapers remove what is left
            log.warning("sandbox destroy failed sandbox=%s error=%s", sandbox.id[:12], exc)

    async def live_sandbox(self, record: Record) -> Sandbox | None:
        """The record's sandbox if it answers (held by this process, or attached via its handle)."""
        handle = record.sandbox
        held = self.held.get(record.id)
        if held is not None:
            same = isinstance(handle, dict) and held.id == handle.get("id")
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
            info = await sandbox.ping(timeout=ATTACH_PING_TIMEOUT)
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
            await self.destroy_quietly(sandbox)
            return None
        if info.get("executed") != record.executed:
            # A gateway died between running a call and recording it: the sandbox holds effects
            # that the trajectory lacks, so it is discarded and the session rebuilt by replay.
            log.warning(
                "session sandbox ran unrecorded calls session=%s sandbox=%s executed=%s recorded=%d",
                record.id,
                sandbox.id[:12],
                info.get("executed"),
                record.executed,
            )
            await self.destroy_quietly(sandbox)
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
        await self.destroy_quietly(sandbox)  # what is left of it, if provably its; nothing else
        return None

    def _attach(self, handle: SandboxHandle) -> Sandbox:
        """A sandbox another process loaded, with this gateway's reply limits."""
        sandbox = Sandbox(handle, self.backend)
        sandbox.max_result_bytes = self.settings.max_result_bytes
        sandbox.max_state_bytes = self.settings.max_state_bytes
        return sandbox

    async def sandbox(self, record: Record, lock: SessionLock, *, persist: bool = True) -> Sandbox:
        """A live sandbox in the record's current state, rebuilt by replay when needed."""
        sandbox = await self.live_sandbox(record)
        if sandbox is not None:
            return sandbox
        return await self._rebuild(record, lock, persist=persist)

    async def _rebuild(self, record: Record, lock: SessionLock, *, persist: bool = True) -> Sandbox:
        """Claim a sandbox, load the current epoch's start, replay its trajectory, record the
        handle.

        With ``persist=False`` (reads of expired or closed sessions) the record is left alone and
        the caller destroys the sandbox afterwards.
        """
        started = time.perf_counter()
        for _ in range(MAX_ENDED + 1):
            entries = await self.store.entries(record.id, record.epoch_start)
            sandbox = await self._claim_for(record, lock)
            try:
                replayed = await self._replay(record, sandbox, entries, lock)
                if persist:
                    await self.store.set_sandbox(record, sandbox.handle.to_dict())
                break
            except ReplayDied as died:
                await self.destroy_quietly(sandbox)
                if not await self._end_killer(record, lock, entries[:died.position + 1]):
                    raise backend_unavailable(
                        f"the sandbox died replaying call {entries[died.position]['index']}: "
                        f"{died.cause}") from died.cause
            except BaseException:
                await self.destroy_quietly(sandbox)
                raise
        else:
            raise backend_unavailable(f"session {record.id} could not be rebuilt: more than "
                                      f"{MAX_ENDED} of its calls ended their runtime")
        if persist:
            self.adopt(record.id, sandbox)
        self.metrics.session_rebuilds.inc()
        log.info(
            "session rebuilt session=%s env=%s epoch=%d replayed=%d sandbox=%s ms=%.1f",
            record.id,
            record.env,
            record.epoch,
            replayed,
            sandbox.id[:12],
            (time.perf_counter() - started) * 1e3,
        )
        return sandbox

    async def _claim_for(self, record: Record, lock: SessionLock) -> Sandbox:
        """A sandbox loaded with the start of the record's epoch, the lock renewed."""
        env = self.catalogue.env(record.env)
        sandbox = await self.claim_loaded(record.id, env, record.init_config, record.seed,
                                          custom=record.scenario is None, held=(lock, record),
                                          clock_start=env.clock_start(record.scenario))
        try:
            await self.locks.renew(lock, record)
        except BaseException:
            await self.destroy_quietly(sandbox)
            raise
        return sandbox

    async def ended_by_replay(self, record: Record, lock: SessionLock) -> bool:
        """A rebuilt runtime died under the first request after its replay: whether a recorded
        call ended it (found and marked: rebuild and try again), else the request did."""
        entries = await self.store.entries(record.id, record.epoch_start)
        return await self._end_killer(record, lock, entries)

    async def _end_killer(self, record: Record, lock: SessionLock,
                          entries: list[dict[str, Any]]) -> bool:
        """Find which of ``entries`` ends its runtime and mark it; False when none does."""
        killer = await self.find_killer(record, lock, entries)
        if killer is None:
            return False
        log.warning("a recorded call ends its runtime session=%s index=%s tool=%s; the session "
                    "goes on without its effects", record.id, killer["index"], killer["name"])
        if not await self.store.mark_ended(record, lock, killer):
            raise self.unrestorable(record)
        return True

    async def find_killer(self, record: Record, lock: SessionLock,
                          entries: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The first replayed call of ``entries`` after which (while it runs, or within
        ``ENDED_GRACE`` of its answer) a fresh runtime dies by itself; None when replaying them
        all leaves it alive. A binary search: a prefix that kills its runtime stays deadly when
        it grows."""
        calls = [e for e in entries if e.get("kind") != "reset" and e.get("replay")]
        if not calls or not await self._dies_after(record, lock, calls):
            return None
        low, high = 0, len(calls) - 1
        while low < high:
            middle = (low + high) // 2
            if await self._dies_after(record, lock, calls[:middle + 1]):
                high = middle
            else:
                low = middle + 1
        return calls[low]

    async def _dies_after(self, record: Record, lock: SessionLock,
                          calls: list[dict[str, Any]]) -> bool:
        sandbox = await self._claim_for(record, lock)
        try:
            await self._replay(record, sandbox, calls, lock)
            await asyncio.sleep(ENDED_GRACE)
            await sandbox.ping(timeout=ATTACH_PING_TIMEOUT)
        except ReplayDied:
            return True
        except SandboxError:  # the ping: gone, or no answer
            return True
        finally:
            await self.destroy_quietly(sandbox)
        return False

    async def _replay(
        self, record: Record, sandbox: Sandbox, entries: list[dict[str, Any]], lock: SessionLock
    ) -> int:
        """Replay ``entries`` (those that ran) on ``sandbox``: the count. `ReplayDied` when
        the runtime dies under one."""
        renewed = time.monotonic()
        count = 0
        for position, entry in enumerate(entries):
            if entry.get("kind") == "reset" or not entry.get("replay"):
                continue
            if time.monotonic() - renewed > self.locks.lease / 3:
                await self.locks.renew(lock, record)
                renewed = time.monotonic()
            try:
                result = await sandbox.call(
                    entry["name"], entry.get("arguments") or {}, timeout=self.settings.call_timeout
                )
                outcome: dict[str, Any] = {"ok": True, "result": result}
            except RuntimeFault as exc:
                if exc.kind not in TOOL_ERRORS:
                    raise backend_unavailable(
                        f"replaying call {entry['index']} failed: {exc}"
                    ) from exc
                outcome = {"ok": False, "error": {"type": exc.kind, "message": exc.message}}
            except CallTimeout as exc:
                self.metrics.sandbox_failed("timeout")
                raise backend_unavailable(
                    f"replaying call {entry['index']} exceeded its deadline; the "
                    "session could not be rebuilt"
                ) from exc
            except SandboxGone as exc:
                self.metrics.sandbox_failed("crash")
                raise ReplayDied(position, exc) from exc
            count += 1
            recorded = (
                {"ok": entry.get("ok"), "result": entry.get("result")}
                if entry.get("ok")
                else {"ok": False, "error": entry.get("error")}
            )
            if outcome != recorded:
                self.metrics.replay_mismatches.inc()
                log.warning(
                    "replay mismatch session=%s env=%s index=%s tool=%s",
                    record.id,
                    record.env,
                    entry.get("index"),
                    entry.get("name"),
                )
        return count

    def stale(self, record: Record, sandbox: Sandbox, exc: RuntimeFault) -> None:
        self.metrics.sandbox_failed("stale")
        log.warning(
            "session sandbox does not hold the recorded state session=%s sandbox=%s error=%s",
            record.id,
            sandbox.id[:12],
            exc,
        )

    @staticmethod
    def unrestorable(record: Record) -> ApiError:
        """Even a sandbox rebuilt from the trajectory does not match the record: the record
        changed or vanished while this request held it (e.g. it expired). Retrying re-reads it."""
        return backend_unavailable(
            f"session {record.id} could not be restored to its recorded state (its record "
            "changed or vanished meanwhile); retry"
        )

    async def drop(self, record: Record) -> None:
        """End the record's sandbox, whoever created it: recycled into our pool where the
        backend can, killed otherwise."""
        held = self.held.pop(record.id, None)
        handle = record.sandbox
        current = held is not None and isinstance(handle, dict) and held.id == handle.get("id")
        if held is not None and not held.destroyed:
            if current:
                await self.release_quietly(held)
            else:
                self._let_go(held)
        if not current and (sandbox := await self._attach_stored(record)) is not None:
            await self.release_quietly(sandbox)

    async def with_sandbox(
        self, record: Record, lock: SessionLock, op: Callable[[Sandbox], Awaitable[T]]
    ) -> T:
        """Run ``op`` on the session's sandbox; on a non-active session on a temporary one."""
        active = record.status == "active"
        for attempt in (1, 2, 3):
            sandbox = (
                await self.sandbox(record, lock)
                if active
                else await self._rebuild(record, lock, persist=False)
            )
            try:
                return await op(sandbox)
            except RuntimeFault as exc:
                if exc.kind == "ResultTooLarge":
                    raise ApiError(409, "StateTooLarge", f"the session's state is too large to "
                                   f"answer: {exc.message} (ENVSCALER_MAX_STATE_BYTES)") from exc
                if exc.kind not in STALE_SANDBOX:
                    raise
                self.stale(record, sandbox, exc)
                await self.drop(record)
                if attempt >= 2:
                    raise self.unrestorable(record) from exc
            except SandboxGone as exc:
                self.metrics.sandbox_failed("crash")
                self.held.pop(record.id, None)
                record.sandbox = None
                if attempt == 3 or (attempt == 2 and not await self.ended_by_replay(record, lock)):
                    raise backend_unavailable(f"the session's sandbox died twice: {exc}") from exc
            except CallTimeout as exc:
                self.metrics.sandbox_failed("timeout")
                self.held.pop(record.id, None)
                if active:
                    await self.store.set_sandbox(record, None)
                raise ApiError(504, "Timeout", str(exc)) from exc
            finally:
                if not active:
                    await self.release_quietly(sandbox)
        raise AssertionError("unreachable")

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
