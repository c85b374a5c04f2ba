"""Rebuilding a session's sandbox by deterministic replay, and finding a recorded call that ends
its runtime.

A recorded call may end its runtime: while it runs (``os._exit``, a fatal signal), which is
recorded as ``SandboxCrashed`` and never replayed, or just after it answered (a signal to PID 1,
a thread that exits), which is recorded as the answer it gave. Replaying such a call kills every
rebuilt runtime again, so when a runtime dies under a rebuild (during the replay, or under the
first call after it) the call that ended it is found (`Rebuilds.find_killer`): fresh runtimes
replay ever shorter prefixes of the trajectory and are given ``ENDED_GRACE`` to die by
themselves. That call is then marked ``ended_runtime`` (its answer stays what the agent saw; its
effects died with its runtime, as a crashed call's do), and the session goes on without it.
A death that no replay reproduces came from outside (an operator, the OOM killer): a retryable
503.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from envscaler.sandbox.errors import CallTimeout, RuntimeFault, SandboxError, SandboxGone
from envscaler.sandbox.sandbox import Sandbox
from envscaler.server.catalogue import ServedCatalogue
from envscaler.server.errors import backend_unavailable
from envscaler.server.metrics import Metrics
from envscaler.server.sessions import faults
from envscaler.server.sessions.claims import PING_TIMEOUT, SandboxClaims, epoch_start
from envscaler.server.sessions.faults import Step
from envscaler.server.sessions.locking import SessionLocks
from envscaler.server.settings import Settings
from envscaler.server.store import Record, SessionLock, SessionStore

log = logging.getLogger("envscaler.server.sessions")

ENDED_GRACE = 0.2  # seconds a runtime is given to die by itself after a replay (find_killer)
MAX_ENDED = 3  # calls found to end the runtime in one rebuild before it gives up (503)


class ReplayDied(Exception):
    """The runtime died replaying ``entries[position]``."""

    def __init__(self, position: int, cause: SandboxGone) -> None:
        super().__init__(str(cause))
        self.position = position
        self.cause = cause


@dataclass
class Rebuilds:
    """A fresh sandbox in a record's state: the epoch's start loaded, its calls replayed."""

    settings: Settings
    store: SessionStore
    catalogue: ServedCatalogue
    locks: SessionLocks
    claims: SandboxClaims
    metrics: Metrics

    async def rebuild(self, record: Record, lock: SessionLock, *, persist: bool = True) -> Sandbox:
        """Claim a sandbox, load the current epoch's start, replay its trajectory, record the
        handle (the caller holds the sandbox). With ``persist=False`` (reads of expired or closed
        sessions) the record is left alone and the caller destroys the sandbox afterwards."""
        started = time.perf_counter()
        for _ in range(MAX_ENDED + 1):
            entries = await self.store.entries(record, record.epoch_start)
            sandbox = await self._claim_for(record, lock)
            try:
                replayed = await self._replay(record, sandbox, entries, lock)
                if persist:
                    await self.store.set_sandbox(record, sandbox.handle.to_dict())
                break
            except ReplayDied as died:
                await self.claims.destroy_quietly(sandbox)
                if not await self._end_killer(record, lock, entries[:died.position + 1]):
                    raise faults.api_error(died.cause, Step.REPLAY,
                                           index=entries[died.position]["index"]) from died.cause
            except BaseException:
                await self.claims.destroy_quietly(sandbox)
                raise
        else:
            raise backend_unavailable(f"session {record.id} could not be rebuilt: more than "
                                      f"{MAX_ENDED} of its calls ended their runtime")
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
        initial = await epoch_start(self.store, record, env)
        sandbox = await self.claims.claim_loaded(record.id, env, initial, record.seed,
                                                 scenario_id=record.scenario,
                                                 held=(lock, record))
        try:
            await self.locks.renew(lock, record)
        except BaseException:
            await self.claims.destroy_quietly(sandbox)
            raise
        return sandbox

    async def ended_by_replay(self, record: Record, lock: SessionLock) -> bool:
        """A rebuilt runtime died under the first request after its replay: whether a recorded
        call ended it (found and marked: rebuild and try again), else the request did."""
        entries = await self.store.entries(record, record.epoch_start)
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
            raise faults.unrestorable(record.id)
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
            await sandbox.ping(timeout=PING_TIMEOUT)
        except ReplayDied:
            return True
        except SandboxError:  # the ping: gone, or no answer
            return True
        finally:
            await self.claims.destroy_quietly(sandbox)
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
            except (RuntimeFault, CallTimeout, SandboxGone) as exc:
                fault = faults.counted(exc, self.metrics)
                if fault is faults.CRASHED:
                    raise ReplayDied(position, exc) from exc
                if fault is faults.TIMEOUT or not fault.recorded:
                    raise faults.api_error(exc, Step.REPLAY, index=entry["index"]) from exc
                outcome = {"ok": False, "error": faults.recorded_error(exc, entry["name"])}
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
