"""`SessionService`: the public operations on sessions, composed of the locks, the sandboxes and
the idle expiry (design: the package docstring)."""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from common.jsoncodec import dump_bytes, dumps
from sandbox.backends.base import SandboxBackend
from sandbox.checkers import CheckerPool, ChecksKilledChecker, ChecksStarved
from sandbox.errors import (
    CallTimeout,
    CapacityExhausted,
    RuntimeFault,
    SandboxError,
    SandboxGone,
)
from sandbox.pool import SandboxPool
from sandbox.sandbox import Snapshot
from server.auth import Principal, check_agent, token_hash, verify_agent
from server.catalogue import ServedCatalogue, ServedEnv
from server.errors import (
    ApiError,
    backend_unavailable,
    env_load_failed,
    invalid_request,
    not_found,
    redis_failed,
    redis_full,
    retry_after,
)
from server.metrics import Metrics
from server.redis_scripts import ScriptClient
from server.sessions.calls import (
    TOOL_ERRORS,
    CallOutcome,
    check_session_id,
    new_session_id,
    parse_arguments,
)
from server.sessions.expiry import SessionExpiry
from server.sessions.locking import SessionLocks
from server.sessions.sandboxes import STALE_SANDBOX, SessionSandboxes
from server.settings import Settings
from server.store import Record, SessionLock, SessionStore

log = logging.getLogger("envscaler.server.sessions")

STARVED_RETRY_AFTER = 2.0
# A trajectory entry's bytes beside its arguments, result or init_config: index, epoch, times,
# flags, and a tool name and call id of up to 200 characters each (6 bytes each when escaped).
ENTRY_OVERHEAD = 4096


class SessionService:
    def __init__(
        self,
        settings: Settings,
        redis: Redis,
        catalogue: ServedCatalogue,
        pool: SandboxPool,
        checkers: CheckerPool,
        backend: SandboxBackend,
        metrics: Metrics,
    ) -> None:
        self.settings = settings
        self.redis = redis
        self.scripts = (ScriptClient.for_url(settings.redis_url, settings.redis_timeout,
                                             settings.redis_timeout)
                        if settings.redis_url else None)
        self.store = SessionStore(redis, settings.session_ttl, settings.record_ttl, self.scripts)
        self.catalogue = catalogue
        self.pool = pool
        self.backend = backend
        self.metrics = metrics
        self.locks = SessionLocks(settings, self.store)
        self.sandboxes = SessionSandboxes(
            settings, self.store, catalogue, pool, backend, metrics, self.locks
        )
        self.expiry = SessionExpiry(settings, self.store, self.locks, self.sandboxes, metrics)
        self.checkers = checkers
        self.check_budget = settings.check_budget()
        self.json_limits = settings.json_limits()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.locks.start()
        self.expiry.start()

    async def close(self) -> None:
        await self.expiry.close()
        self.locks.close()
        self.sandboxes.close()
        if self.scripts is not None:
            self.scripts.close()

    # ------------------------------------------------------------------ records

    async def _record(self, session_id: str, caller: Principal) -> Record:
        check_session_id(session_id)
        try:
            record = await self.store.load(session_id)
        except RedisError as exc:
            raise redis_failed(exc) from exc
        return self._checked(session_id, record, caller)

    def _checked(self, session_id: str, record: Record | None, caller: Principal) -> Record:
        if record is None:
            if not caller.is_admin:
                verify_agent(caller, session_id, None)  # 401/403: an agent learns nothing
            raise not_found(
                "UnknownSession",
                f"no session {session_id!r} (never created, or its record expired)",
            )
        verify_agent(caller, session_id, record.agent_token_hash)
        return record

    @staticmethod
    def _require_active(record: Record) -> None:
        if record.status == "closed":
            raise ApiError(409, "SessionClosed", f"session {record.id} was deleted")
        if record.status == "expired":
            raise ApiError(
                410,
                "SessionExpired",
                f"session {record.id} expired after being idle; its trajectory, state and "
                "validation can still be read",
            )

    def _env(self, record: Record) -> ServedEnv:
        return self.catalogue.env(record.env)

    # ------------------------------------------------------------------ create

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
            scenario = env.scenario(scenario_id)
            init_config, task = scenario.init_config, scenario.task
        elif init_config is None:
            init_config = {}
        session_id = new_session_id()
        agent_token = f"{session_id}.{secrets.token_urlsafe(24)}"
        started = time.perf_counter()
        sandbox = await self.sandboxes.claim_loaded(session_id, env, init_config, seed,
                                                    custom=scenario_id is None,
                                                    clock_start=env.clock_start(scenario_id))
        now = time.time()
        record = Record(
            id=session_id,
            env=env.id,
            scenario=scenario_id,
            seed=seed,
            init_config=init_config,
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
            await self.store.create(record)
        except BaseException as exc:
            await self.sandboxes.destroy_quietly(sandbox)
            if isinstance(exc, RedisError):
                raise redis_failed(exc) from exc
            raise
        self.sandboxes.held[session_id] = sandbox
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

    # ------------------------------------------------------------------ read-only

    async def info(self, caller: Principal, session_id: str) -> Record:
        return await self._record(session_id, caller)

    async def tools(
        self, caller: Principal, session_id: str, active: bool = False
    ) -> tuple[Record, ServedEnv]:
        """The session and its environment; ``active``: only while tools can be called (the MCP
        door refuses a closed or expired session before its client starts)."""
        record = await self._record(session_id, caller)
        if active:
            self._require_active(record)
        return record, self._env(record)

    async def trajectory(
        self, caller: Principal, session_id: str
    ) -> tuple[Record, list[dict[str, Any]]]:
        record = await self._record(session_id, caller)
        entries = (
            await self.store.entries(session_id, 0, record.length - 1) if record.length else []
        )
        return record, entries

    # ------------------------------------------------------------------ call

    async def call(
        self,
        caller: Principal,
        session_id: str,
        name: str,
        arguments: dict[str, Any] | str,
        call_id: str | None,
    ) -> CallOutcome:
        check_session_id(session_id)
        check_agent(caller, session_id)
        arguments = parse_arguments(arguments, self.json_limits)
        started = time.perf_counter()
        async with self.locks.locked(session_id, call_id=call_id,
                                     token_hash=caller.token_hash) as held:
            record = self._checked(session_id, held.record, caller)
            # A call_id names a call of its epoch: one reused after a reset runs anew, never
            # answers the previous episode's result.
            if held.seen is not None and held.seen >= record.epoch_start:
                stored = await self.store.entry(session_id, held.seen)
                if stored is not None:
                    log.info(
                        "duplicate call session=%s call_id=%s index=%d",
                        session_id,
                        call_id,
                        held.seen,
                    )
                    return CallOutcome(stored, duplicate=True)
            self._require_active(record)
            env = self._env(record)
            self.catalogue.validate_arguments(env, name, arguments)
            self._within_quota(record, self._argument_bytes(arguments))
            entry = await self._execute(record, env, held.lock, name, arguments, call_id)
            record.step += 1
            record.executed += bool(entry.get("replay"))
            record.result_size += len(dump_bytes(entry.get("result") if entry["ok"]
                                                 else entry.get("error")))
            fields = {"step": str(record.step), "executed": str(record.executed),
                      "result_size": str(record.result_size)}
            if record.sandbox is None:
                fields["sandbox"] = ""  # it died during the call; the next request rebuilds
            try:
                committed = await self.store.commit(
                    record, held.lock, entry, fields=fields, release=True
                )
            except BaseException as exc:
                # The sandbox ran a call that the trajectory may lack, so it may no longer match
                # the record: kill it; the next request rebuilds from the trajectory.
                await self.sandboxes.drop(record)
                if not isinstance(exc, RedisError):
                    raise
                if redis_full(exc):
                    raise redis_failed(exc) from exc
                raise backend_unavailable(
                    f"Redis did not confirm whether the call was recorded ({exc}); retry it with "
                    "the same call_id: a recorded call answers its result, one that was not runs"
                ) from exc
            if not committed:
                await self.sandboxes.drop(record)
                raise backend_unavailable(
                    "the call could not be recorded (the session lock's lease ran out, or its "
                    "record expired); its effects were discarded"
                )
        elapsed = time.perf_counter() - started
        self.metrics.tool_call(env.id, name, elapsed)
        if log.isEnabledFor(logging.INFO):
            error = entry.get("error") or {}
            log.info(
                "call session=%s env=%s tool=%s index=%d ok=%s%s ms=%.2f",
                session_id,
                env.id,
                name,
                entry["index"],
                entry["ok"],
                f" error={error.get('type')}" if error else "",
                elapsed * 1e3,
            )
        return CallOutcome(entry)

    def _argument_bytes(self, arguments: dict[str, Any]) -> int:
        """The JSON size of a call's (strict JSON) arguments, as stored and sent; 413 beyond the
        limit (a call's body is bounded by it already: this bounds arguments given as a JSON
        string)."""
        size = len(dump_bytes(arguments))
        if size > self.settings.max_argument_bytes:
            raise ApiError(413, "ArgumentsTooLarge", f"the arguments take {size} bytes of JSON; "
                           f"the limit is {self.settings.max_argument_bytes} "
                           "(ENVSCALER_MAX_ARGUMENT_BYTES)", field="arguments")
        return size

    def _within_quota(self, record: Record, adding: int, result: bool = True) -> None:
        """413 ``QuotaExceeded`` unless the session may take one more trajectory entry holding
        ``adding`` bytes of the caller's (arguments, or a reset's ``init_config``) and, for a
        ``result``, the largest result a call may return. Checked before anything runs, against
        the worst case, so a session's trajectory and results never pass their quotas. Nothing is
        recorded; reads, validation and deletion still work, and the caller opens a new
        session."""
        settings = self.settings
        worst = settings.max_result_bytes if result else 0
        if record.length >= settings.max_session_calls:
            reason = (f"has {record.length} trajectory entries, the most a session may have "
                      f"(ENVSCALER_MAX_SESSION_CALLS={settings.max_session_calls})")
        elif record.size + ENTRY_OVERHEAD + adding + worst > settings.max_trajectory_bytes:
            reason = (f"has a trajectory of {record.size} bytes; an entry of {adding} bytes"
                      + (f" and a result of up to {worst} (ENVSCALER_MAX_RESULT_BYTES)"
                         if result else "")
                      + f" could pass ENVSCALER_MAX_TRAJECTORY_BYTES="
                      f"{settings.max_trajectory_bytes}")
        elif result and record.result_size + worst > settings.max_session_result_bytes:
            reason = (f"has had {record.result_size} bytes of results; one more of up to {worst} "
                      f"(ENVSCALER_MAX_RESULT_BYTES) could pass ENVSCALER_MAX_SESSION_RESULT_BYTES="
                      f"{settings.max_session_result_bytes}")
        else:
            return
        raise ApiError(413, "QuotaExceeded", f"session {record.id} {reason}; nothing was run or "
                       "recorded: open a new session")

    async def _execute(
        self,
        record: Record,
        env: ServedEnv,
        lock: SessionLock,
        name: str,
        arguments: dict[str, Any],
        call_id: str | None,
    ) -> dict[str, Any]:
        """Run one call on the session's sandbox (rebuilding it if needed); the trajectory entry."""
        now = time.time()
        entry: dict[str, Any] = {
            "index": record.length,
            "epoch": record.epoch,
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
        }
        for attempt in (1, 2, 3):
            sandbox = await self.sandboxes.sandbox(record, lock)
            started = time.perf_counter()
            try:
                result = await sandbox.call(name, arguments, timeout=self.settings.call_timeout,
                                            executed=record.executed)
                entry.update(ok=True, result=result, replay=True)
                break
            except RuntimeFault as exc:
                if exc.kind in TOOL_ERRORS:
                    entry.update(
                        ok=False,
                        error={"type": exc.kind, "message": exc.message},
                        replay=TOOL_ERRORS[exc.kind],
                    )
                    break
                if exc.kind == "ToolNotFound":
                    raise not_found(
                        "UnknownTool", f"environment {env.id!r} has no tool {name!r}"
                    ) from exc
                if exc.kind in STALE_SANDBOX:
                    self.sandboxes.stale(record, sandbox, exc)
                    await self.sandboxes.drop(record)
                    if attempt < 3:
                        continue
                    raise self.sandboxes.unrestorable(record) from exc
                log.error("runtime error session=%s tool=%s error=%s", record.id, name, exc)
                raise ApiError(
                    500, "InternalError", "the sandbox runtime rejected the request"
                ) from exc
            except CallTimeout:
                self.metrics.sandbox_failed("timeout")
                self.sandboxes.held.pop(record.id, None)  # destroyed; the next request rebuilds
                record.sandbox = None
                entry.update(
                    ok=False,
                    error={
                        "type": "Timeout",
                        "message": f"tool {name} exceeded its "
                        f"deadline of {self.settings.call_timeout:g} s; its effects were discarded "
                        "and the session goes on from its state before the call",
                    },
                    replay=False,
                )
                break
            except SandboxGone as exc:
                self.metrics.sandbox_failed("crash")
                self.sandboxes.held.pop(record.id, None)
                record.sandbox = None
                log.warning(
                    "sandbox died during a call session=%s tool=%s attempt=%d error=%s",
                    record.id,
                    name,
                    attempt,
                    exc,
                )
                # On a rebuilt sandbox: the call ended it, unless a recorded call ended it just
                # after its replay (found, marked, and the call runs once more on a rebuild).
                if attempt == 3 or (
                    attempt == 2 and not await self.sandboxes.ended_by_replay(record, lock)
                ):
                    entry.update(
                        ok=False,
                        error={"type": "SandboxCrashed", "message": str(exc)},
                        replay=False,
                    )
                    break
        entry.update(time=now, duration_ms=round((time.perf_counter() - started) * 1e3, 3))
        return entry

    # ------------------------------------------------------------------ state and validation

    async def state(self, caller: Principal, session_id: str) -> tuple[Record, dict[str, Any]]:
        check_session_id(session_id)
        async with self.locks.locked(session_id) as held:
            record = self._checked(session_id, held.record, caller)
            state = await self.sandboxes.with_sandbox(
                record,
                held.lock,
                lambda s: s.state(timeout=self.settings.call_timeout, executed=record.executed),
            )
            if record.status == "active":
                await self.store.commit(record, held.lock, release=True)
        return record, state

    async def validate(self, caller: Principal, session_id: str) -> dict[str, Any]:
        check_session_id(session_id)
        started = time.perf_counter()
        async with self.locks.locked(session_id) as held:
            record = self._checked(session_id, held.record, caller)
            env = self._env(record)
            scenario = self._scenario_with_checks(record, env)
            checklist = list(scenario.checklist)
            snapshot = await self.sandboxes.with_sandbox(
                record,
                held.lock,
                lambda s: s.snapshot(timeout=self.settings.call_timeout, executed=record.executed),
            )
            if record.status == "active":
                await self.store.commit(record, held.lock, release=True)
        # Judged after the lock is released: the states are taken, the session may go on.
        results = await self._judge([item.check_func for item in checklist], snapshot)
        passed = sum(1 for r in results if r.get("passed") is True)
        total = len(checklist)
        reward = round(passed / total, 4)
        self.metrics.reward.labels(env.id).observe(reward)
        self.metrics.validations.labels("judged").inc()
        self.metrics.validate_seconds.observe(time.perf_counter() - started)
        log.info(
            "validate session=%s env=%s scenario=%s reward=%.4f passed=%d total=%d",
            session_id,
            env.id,
            scenario.id,
            reward,
            passed,
            total,
        )
        return {
            "session_id": session_id,
            "scenario": scenario.id,
            "reward": reward,
            "passed": passed,
            "total": total,
            "checks": [
                {"item": item.item, "passed": r.get("passed") is True, "error": r.get("error")}
                for item, r in zip(checklist, results, strict=True)
            ],
        }

    @staticmethod
    def _scenario_with_checks(record: Record, env: ServedEnv) -> Any:
        if record.scenario is None:
            raise ApiError(
                409,
                "NoChecklist",
                "this session started from a custom init_config; "
                "there are no check functions to run",
            )
        scenario = env.scenario(record.scenario)
        if not scenario.checklist:
            raise ApiError(409, "NoChecklist", f"scenario {scenario.id} has no checklist")
        return scenario

    async def _judge(self, checks: list[str], snapshot: Snapshot) -> list[dict[str, Any]]:
        """The checkers' verdicts; a verdict the machine could not afford is a retryable 503,
        never a failed check."""
        try:
            return await self.checkers.check(checks, snapshot, self.check_budget)
        except ChecksStarved as exc:
            self.metrics.validations.labels("starved").inc()
            raise ApiError(503, "ChecksStarved", f"{exc}; retry",
                           headers=retry_after(STARVED_RETRY_AFTER)) from exc
        except CapacityExhausted as exc:
            self.metrics.validations.labels("busy").inc()
            raise ApiError(503, "CapacityExhausted", str(exc),
                           headers=retry_after(exc.retry_after)) from exc
        except ChecksKilledChecker as exc:
            return [{"passed": False, "error": str(exc)} for _ in checks]
        except SandboxError as exc:
            raise backend_unavailable(f"no checker could judge the checks: {exc}") from exc

    # ------------------------------------------------------------------ reset

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
            lock = held.lock
            record = self._checked(session_id, held.record, caller)
            self._require_active(record)
            env = self._env(record)
            task = None
            if init_config is None:
                scenario_id = scenario_id or record.scenario
                if scenario_id is None:
                    init_config = record.init_config  # a custom session resets to its own start
                else:
                    scenario = env.scenario(scenario_id)
                    init_config, task = scenario.init_config, scenario.task
            new_seed = record.seed if seed is None else seed
            custom = scenario_id is None
            self._within_quota(record, len(dump_bytes(init_config)) if custom else 0,
                               result=False)
            sandbox = await self.sandboxes.live_sandbox(record)
            reused = False
            if sandbox is not None:
                try:
                    await sandbox.reset(
                        init_config=init_config, seed=new_seed, timeout=self.settings.load_timeout,
                        clock_start=env.clock_start(scenario_id),
                    )
                    reused = True
                except RuntimeFault as exc:
                    # The runtime's state after a failed reset is unknown: rebuild from the record.
                    await self.sandboxes.drop(record)
                    if exc.kind == "LoadError" and custom:
                        raise invalid_request(
                            f"the environment does not start from this init_config: {exc.message}",
                            field="init_config",
                        ) from exc
                    if exc.kind == "LoadError":
                        raise env_load_failed(env.id, exc.message) from exc
                    raise ApiError(
                        500, "InternalError", "the sandbox runtime failed to reset"
                    ) from exc
                except (SandboxGone, CallTimeout) as exc:
                    self.metrics.sandbox_failed(
                        "crash" if isinstance(exc, SandboxGone) else "timeout"
                    )
                    self.sandboxes.held.pop(record.id, None)
            if not reused:
                sandbox = await self.sandboxes.claim_loaded(
                    session_id, env, init_config, new_seed, custom=custom, held=(lock, record),
                    clock_start=env.clock_start(scenario_id),
                )
                self.sandboxes.adopt(session_id, sandbox)
            assert sandbox is not None
            record.epoch += 1
            record.scenario, record.seed, record.init_config = scenario_id, new_seed, init_config
            record.epoch_start, record.step, record.executed, record.sandbox = (
                record.length + 1,
                0,
                0,
                sandbox.handle.to_dict(),
            )
            marker: dict[str, Any] = {
                "kind": "reset",
                "index": record.length,
                "epoch": record.epoch,
                "scenario": scenario_id,
                "seed": new_seed,
                "time": time.time(),
            }
            if custom:
                marker["init_config"] = init_config
            fields = {
                "scenario": scenario_id or "",
                "seed": str(new_seed),
                "init_config": dumps(init_config),
                "epoch": str(record.epoch),
                "epoch_start": str(record.epoch_start),
                "step": "0",
                "executed": "0",
                "sandbox": dumps(record.sandbox),
            }
            try:
                committed = await self.store.commit(
                    record, lock, marker, fields=fields, release=True
                )
            except BaseException:
                committed = False
                raise
            finally:
                if not committed:
                    await self.sandboxes.drop(record)
            if not committed:
                raise backend_unavailable(
                    "the reset could not be recorded (the session lock's lease ran out)"
                )
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

    # ------------------------------------------------------------------ delete and expiry

    async def delete(self, caller: Principal, session_id: str) -> Record:
        check_session_id(session_id)
        async with self.locks.locked(session_id) as held:
            record = self._checked(session_id, held.record, caller)
            if record.status == "closed":
                return record
            await self.sandboxes.drop(record)
            await self.store.finish(record, "closed")
        log.info("session closed session=%s env=%s calls=%d", session_id, record.env, record.length)
        return record

    async def expire_idle(self) -> int:
        """Expire sessions idle longer than ``session_ttl``: kill the sandbox, keep the record."""
        return await self.expiry.expire_idle()

    async def live_count(self) -> int:
        return await self.store.live_count()
