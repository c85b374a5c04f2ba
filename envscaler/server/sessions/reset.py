"""Reset: a session back to a scenario's start (its own, or another of its environment's) or to a
custom ``init_config``, as a new epoch of its trajectory."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from envscaler.common.jsoncodec import dumps
from envscaler.sandbox.errors import CallTimeout, RuntimeFault, SandboxGone
from envscaler.sandbox.sandbox import Sandbox
from envscaler.server.auth import Principal
from envscaler.server.catalogue import Initial, ServedCatalogue, ServedEnv
from envscaler.server.errors import backend_unavailable, invalid_request
from envscaler.server import statesize
from envscaler.server.sessions import faults
from envscaler.server.sessions.access import check_session_id, checked, require_active
from envscaler.server.sessions.claims import SandboxClaims, epoch_start
from envscaler.server.sessions.faults import Step
from envscaler.server.sessions.locking import SessionLocks
from envscaler.server.sessions.quota import within_quota
from envscaler.server.sessions.sandboxes import SessionSandboxes
from envscaler.server.settings import Settings
from envscaler.server.store import Record, SessionLock, SessionStore

log = logging.getLogger("envscaler.server.sessions")


def ended_epoch_start(record: Record) -> int:
    """Index of the first entry of the epoch a reset ends: its reset marker, if it has one. What
    comes before is dropped then, so the finished episode stays readable until the next one
    ends, and a session's stored trajectory never holds more than two."""
    return max(record.epoch_start - 1, 0)


@dataclass
class Resets:
    """``POST /v1/sessions/{id}/reset``."""

    settings: Settings
    store: SessionStore
    catalogue: ServedCatalogue
    locks: SessionLocks
    claims: SandboxClaims
    sandboxes: SessionSandboxes

    async def reset(
        self,
        caller: Principal,
        session_id: str,
        scenario_id: str | None,
        init_config: dict[str, Any] | None,
        seed: int | None,
    ) -> tuple[Record, str | None, bool]:
        """Back to a scenario's start (the current one, or another of the same env) or a custom
        ``init_config``; (record, task, whether the live sandbox was reset in place)."""
        check_session_id(session_id)
        if scenario_id is not None and init_config is not None:
            raise invalid_request(
                "give a scenario or an init_config, not both", field="init_config"
            )
        async with self.locks.locked(session_id) as held:
            record = checked(session_id, held.record, caller)
            require_active(record)
            env = self.catalogue.env(record.env)
            task = None
            if init_config is not None:
                initial = Initial.of(init_config)
            else:
                scenario_id = scenario_id or record.scenario
                if scenario_id is None:  # a custom session resets to its own start
                    initial = await epoch_start(self.store, record, env)
                else:
                    initial, task = env.initial(scenario_id), env.scenario(scenario_id).task
            new_seed = record.seed if seed is None else seed
            custom = scenario_id is None
            await self._trim(record, held.lock)
            within_quota(record, self.settings, initial.size if custom else 0, result=False)
            self.claims.admit(initial)
            sandbox = await self._reset_in_place(record, env, scenario_id, initial, new_seed)
            reused = sandbox is not None
            if sandbox is None:
                sandbox = await self.claims.claim_loaded(
                    session_id, env, initial, new_seed, scenario_id=scenario_id,
                    held=(held.lock, record)
                )
                self.sandboxes.adopt(session_id, sandbox)
            await self._record(record, held.lock, sandbox, scenario_id, initial, new_seed)
        log.info(
            "session reset session=%s env=%s scenario=%s seed=%d epoch=%d reused=%s",
            session_id,
            env.id,
            scenario_id or "-",
            new_seed,
            record.epoch,
            reused,
        )
        return record, task, reused

    async def _trim(self, record: Record, lock: SessionLock) -> None:
        """Drop the epochs before the one this reset ends (harmless should the reset fail: the
        current epoch is kept whole)."""
        if not await self.store.trim(record, lock, ended_epoch_start(record)):
            raise backend_unavailable(
                "the reset could not be recorded (the session lock's lease ran out)"
            )

    async def _reset_in_place(self, record: Record, env: ServedEnv, scenario_id: str | None,
                              initial: Initial, seed: int) -> Sandbox | None:
        """The live sandbox, reset; None when there is none or it died or timed out meanwhile
        (a fresh one is loaded instead)."""
        sandbox = await self.sandboxes.live_sandbox(record)
        if sandbox is None:
            return None
        try:
            await sandbox.reset(init_config=initial.text, init_patch=initial.patch, seed=seed,
                                timeout=statesize.load_timeout(self.settings, initial.size),
                                clock_start=env.clock_start(scenario_id))
        except RuntimeFault as exc:
            # The runtime's state after a failed reset is unknown: rebuild from the record.
            await self.sandboxes.drop(record)
            raise faults.api_error(exc, Step.RESET, env=record.env,
                                   custom=scenario_id is None) from exc
        except (SandboxGone, CallTimeout) as exc:
            await self.sandboxes.failed(record, sandbox, exc)
            return None
        return sandbox

    async def _record(self, record: Record, lock: SessionLock, sandbox: Sandbox,
                      scenario_id: str | None, initial: Initial, seed: int) -> None:
        """Start the new epoch: its marker in the trajectory and its counters at zero (releasing
        the lock). A reset that is not recorded
        drops its sandbox: the record still names the old epoch."""
        record.epoch += 1
        record.scenario, record.seed = scenario_id, seed
        custom = scenario_id is None
        record.epoch_start, record.step, record.executed, record.result_size = (
            record.length + 1, 0, 0, 0)
        record.sandbox = sandbox.handle.to_dict()
        marker: dict[str, Any] = {
            "kind": "reset",
            "index": record.length,
            "epoch": record.epoch,
            "scenario": scenario_id,
            "seed": seed,
            "time": time.time(),
        }
        fields = {
            "scenario": scenario_id or "",
            "seed": str(seed),
            "epoch": str(record.epoch),
            "epoch_start": str(record.epoch_start),
            "step": "0",
            "executed": "0",
            "result_size": "0",
            "sandbox": dumps(record.sandbox),
        }
        committed = False
        try:
            record.init = await self.store.put_init(initial.text) if custom else ""
            if custom:
                marker["init_sha256"] = record.init
            fields["init"] = record.init
            committed = await self.store.commit(
                record, lock, marker, fields=fields, release=True)
        finally:
            if not committed:
                await self.sandboxes.drop(record)
        if not committed:
            raise backend_unavailable(
                "the reset could not be recorded (the session lock's lease ran out)"
            )
