"""A session's start, life and end: create (a loaded sandbox, then the record), keep alive, and
delete."""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from envscaler.server.auth import Principal, token_hash
from envscaler.server.catalogue import Initial, ServedCatalogue, ServedEnv
from envscaler.server.errors import ApiError, invalid_request, redis_failed
from envscaler.server.metrics import Metrics
from envscaler.server.sessions.access import check_session_id, checked, new_session_id, require_active
from envscaler.server.sessions.claims import SandboxClaims
from envscaler.server.sessions.locking import SessionLocks
from envscaler.server.sessions.sandboxes import SessionSandboxes
from envscaler.server.store import Record, SessionStore

log = logging.getLogger("envscaler.server.sessions")


@dataclass
class Lifecycle:
    """``POST /v1/sessions`` and ``DELETE /v1/sessions/{id}``."""

    store: SessionStore
    catalogue: ServedCatalogue
    locks: SessionLocks
    claims: SandboxClaims
    sandboxes: SessionSandboxes
    metrics: Metrics

    async def create(
        self,
        caller: Principal,
        env_id: str,
        scenario_id: str | None,
        init_config: dict[str, Any] | None,
        seed: int,
    ) -> tuple[Record, ServedEnv, str, str | None]:
        """A new session on a loaded sandbox: (record, env, agent token, task)."""
        env = self.catalogue.env(env_id)
        task = None
        if scenario_id is not None:
            if init_config is not None:
                raise invalid_request(
                    "give a scenario or an init_config, not both", field="init_config"
                )
            initial, task = env.initial(scenario_id), env.scenario(scenario_id).task
        else:
            initial = Initial.of(init_config or {})
        session_id = new_session_id()
        agent_token = f"{session_id}.{secrets.token_urlsafe(24)}"
        started = time.perf_counter()
        sandbox = await self.claims.claim_loaded(session_id, env, initial, seed,
                                                 scenario_id=scenario_id)
        now = time.time()
        record = Record(
            id=session_id,
            env=env.id,
            scenario=scenario_id,
            seed=seed,
            epoch=0,
            epoch_start=0,
            length=0,
            step=0,
            executed=0,
            sandbox=sandbox.handle.to_dict(),
            owner=caller.owner,
            agent_token_hash=token_hash(agent_token),
            status="active",
            created=now,
            updated=now,
        )
        try:
            if scenario_id is None:
                record.init = await self.store.put_init(initial.text)
            await self.store.create(record)
        except BaseException as exc:
            await self.claims.destroy_quietly(sandbox)
            if isinstance(exc, RedisError):
                raise redis_failed(exc) from exc
            raise
        self.sandboxes.adopt(session_id, sandbox)
        self.metrics.sessions_created.labels(env.id).inc()
        log.info(
            "session created session=%s env=%s scenario=%s seed=%d sandbox=%s owner=%s ms=%.1f",
            session_id,
            env.id,
            scenario_id or "-",
            seed,
            sandbox.id[:12],
            caller.owner,
            (time.perf_counter() - started) * 1e3,
        )
        return record, env, agent_token, task

    async def touch(self, caller: Principal, session_id: str) -> None:
        """Activity without a call (a client's keep-alive, as ORS's ``/ping``): the session's
        idle clock starts again. A session a request holds is active already: not waited for."""
        check_session_id(session_id)
        try:
            async with self.locks.locked(session_id, wait=0) as held:
                require_active(checked(session_id, held.record, caller))
        except ApiError as exc:
            if exc.type != "SessionBusy":
                raise

    async def delete(self, caller: Principal, session_id: str) -> Record:
        """Close the session and end its sandbox; idempotent. Its record stays readable."""
        check_session_id(session_id)
        async with self.locks.locked(session_id) as held:
            record = checked(session_id, held.record, caller)
            if record.status == "closed":
                return record
            await self.sandboxes.drop(record)
            await self.store.finish(record, "closed")
        log.info("session closed session=%s env=%s calls=%d", session_id, record.env,
                 record.length)
        return record
