"""Sessions: create, call, state, trajectory, reset, validate, delete, expire — the gateway's core.

A session is a record and a trajectory in Redis (layout: `server.store`) plus, somewhere, a live
sandbox holding the environment's state. The sandbox is a cache of the trajectory:

Durability by deterministic replay
    Each request reads the record. If this process holds a live `Sandbox` for the record's sandbox,
    it is used; otherwise the gateway attaches to the record's sandbox handle (socket paths are on
    the shared host) and pings it. When that fails (container killed, runtime crashed, gateway
    restarted on a host whose sandboxes died), a fresh sandbox is claimed from the pool, the
    environment is loaded with the current epoch's ``init_config`` and ``seed``, and every entry of
    the current epoch whose ``replay`` flag is set is executed again, in order. The runtime makes
    execution deterministic for a given seed, so the state and every later result are what they
    would have been; each replayed result is compared with the recorded one, and a difference is
    logged and counted (``envscaler_replay_mismatches_total``), never hidden.

Serialization
    Calls on one session never interleave: a per-session `asyncio.Lock` orders requests inside the
    process (FIFO, no polling), and a Redis lock (``redis.asyncio.lock.Lock`` on
    ``envscaler:session:{id}:lock``, with a lease) orders them across gateways on one Redis.
    Different sessions run in parallel. Every wait is bounded: a request that cannot take the
    lock within ``session_lock_wait`` answers 503 ``SessionBusy`` with ``Retry-After``.

Idempotency
    A call with a ``call_id`` already in the session's ``:call-ids`` hash returns the stored entry
    (with ``duplicate: true``) and executes nothing. The check happens inside the lock, so two
    concurrent retries of one call execute it at most once.

What is recorded
    Every call the sandbox saw: results, tool errors (``ToolException``, ``ArgumentError``,
    ``ResultTooLarge``), ``Timeout`` and ``SandboxCrashed``. Calls rejected before any sandbox saw
    them (unknown tool, arguments that do not match the schema, closed or expired session, busy
    lock) are not recorded: they did nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.exceptions import LockError, RedisError

from sandbox.backends.base import SandboxBackend, SandboxHandle
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
from server.auth import (
    SESSION_ID_RE,
    Principal,
    check_agent,
    token_hash,
    verify_agent,
)
from server.catalogue import ServedCatalogue, ServedEnv
from server.errors import (
    ApiError,
    backend_unavailable,
    invalid_arguments,
    invalid_request,
    not_found,
    retry_after,
)
from server.metrics import Metrics
from server.redis_scripts import ScriptClient
from server.settings import Settings
from server.store import Record, SessionLock, SessionStore, dumps

log = logging.getLogger("envscaler.server.sessions")

T = TypeVar("T")

ATTACH_PING_TIMEOUT = 2.0
TOOL_ERRORS = {
    "ToolException": True,
    "ResultTooLarge": True,
    "ArgumentError": False,
}  # kind -> replay
BUSY_RETRY_AFTER = 1.0
CONCURRENT_VALIDATIONS = max(1, (os.cpu_count() or 1) // 2)  # per gateway process; see validate
# Runtime errors that mean the sandbox does not hold the session's recorded state: it lost its
# environment, or it ran a call the trajectory lacks (``Diverged``: a gateway died between
# running a call and recording it while another gateway held the same sandbox). The sandbox is
# dropped and the session rebuilt by replay.
STALE_SANDBOX = {"NotLoaded", "Diverged"}


def new_session_id() -> str:
    return secrets.token_urlsafe(18)  # 24 URL-safe characters, 144 bits


def check_session_id(session_id: str) -> None:
    if not SESSION_ID_RE.match(session_id):
        raise not_found("UnknownSession", "no such session (malformed id)")


def parse_arguments(arguments: dict[str, Any] | str) -> dict[str, Any]:
    """An object as is; a JSON string decoded (an empty string is ``{}``)."""
    if isinstance(arguments, dict):
        return arguments
    text = arguments.strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise invalid_arguments(f"arguments is not valid JSON: {exc}", field="arguments") from None
    if not isinstance(value, dict):
        raise invalid_arguments(
            f"arguments must be a JSON object, not {type(value).__name__}", field="arguments"
        )
    return value


@dataclass
class _LocalLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


@dataclass
class Held:
    """A held session lock and what was read under it."""

    lock: SessionLock
    record: Record | None
    seen: int | None = None  # index of the entry of an already seen call_id


@dataclass
class CallOutcome:
    entry: dict[str, Any]
    duplicate: bool = False

    @property
    def status(self) -> int:
        error = self.entry.get("error") or {}
        return 504 if not self.entry["ok"] and error.get("type") == "Timeout" else 200

    def body(self) -> dict[str, Any]:
        entry = self.entry
        body: dict[str, Any] = {"ok": entry["ok"]}
        if entry["ok"]:
            body["result"] = entry.get("result")
        else:
            body["error"] = entry.get("error")
        body.update(
            index=entry["index"],
            call_id=entry.get("call_id"),
            duplicate=self.duplicate,
            duration_ms=entry.get("duration_ms", 0.0),
        )
        return body


class SessionService:
    def __init__(
        self,
        settings: Settings,
        redis: Redis,
        catalogue: ServedCatalogue,
        pool: SandboxPool,
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
        self.lock_wait = settings.session_lock_wait
        # The lease must outlast the longest step between two renewals: a call, or a load.
        self.lock_lease = max(10.0, 2 * max(settings.call_timeout, settings.load_timeout) + 5.0)
        self._sandboxes: dict[str, Sandbox] = {}  # session id -> live sandbox this process holds
        self._locks: dict[str, _LocalLock] = {}
        self._releases: set[asyncio.Task[None]] = set()  # see _release_later
        self._checking = asyncio.Semaphore(CONCURRENT_VALIDATIONS)  # see validate
        self._expirer: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._expirer = asyncio.create_task(self._expire_forever(), name="envscaler-session-expiry")

    async def close(self) -> None:
        if self._expirer is not None:
            self._expirer.cancel()
            try:
                await self._expirer
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        for task in list(self._releases):
            task.cancel()
        # Sessions stay active in Redis; another gateway (or this one restarted) rebuilds them.
        for sandbox in list(self._sandboxes.values()):
            sandbox.client.close()
        self._sandboxes.clear()
        if self.scripts is not None:
            self.scripts.close()

    @property
    def expire_interval(self) -> float:
        return min(5.0, max(0.1, self.settings.session_ttl / 4))

    # ------------------------------------------------------------------ locking

    @asynccontextmanager
    async def _locked(
        self,
        session_id: str,
        wait: float | None = None,
        call_id: str | None = None,
        touch: bool = True,
    ) -> AsyncIterator[Held]:
        """Hold the session and read its record: first this process's lock, then the Redis lock
        (taken together with the reads in one round trip when free); every wait bounded. Taking
        it is activity (``touch``: the session is not idle), except for the idle expiry's own."""
        wait = self.lock_wait if wait is None else wait
        deadline = time.monotonic() + wait
        local = self._locks.get(session_id)
        if local is None:
            local = self._locks[session_id] = _LocalLock()
        local.users += 1
        try:
            try:
                async with asyncio.timeout(wait):
                    await local.lock.acquire()
            except TimeoutError:
                raise self._busy(session_id) from None
            try:
                lock = self.store.lock(session_id, self.lock_lease, wait)
                try:
                    acquired, record, seen = await self.store.lock_and_load(
                        lock, session_id, call_id, touch
                    )
                    if not acquired:
                        if wait <= 0 or not await lock.acquire(
                            blocking_timeout=max(deadline - time.monotonic(), 0.0)
                        ):
                            raise self._busy(session_id)
                        record, seen = await self.store.load_for_call(session_id, call_id)
                except RedisError as exc:
                    self._release_later(lock)
                    raise backend_unavailable(f"Redis is unavailable: {exc}") from exc
                try:
                    yield Held(lock, record, seen)
                finally:
                    if lock.held():
                        token = lock.local.token
                        try:
                            await lock.release()
                        except LockError:
                            log.warning(
                                "session lock lease ran out before release session=%s lease=%g",
                                session_id,
                                self.lock_lease,
                            )
                        except RedisError as exc:
                            log.warning(
                                "session lock release failed session=%s error=%s", session_id, exc
                            )
                            lock.take(token)
                            self._release_later(lock)
            finally:
                local.lock.release()
        finally:
            local.users -= 1
            if local.users == 0:
                self._locks.pop(session_id, None)

    def _release_later(self, lock: SessionLock) -> None:
        """Release a lock that this process may hold but could not release (Redis was away, or
        a SET of ours may still land): retried in the background until Redis answers, so the
        session is not left locked for a whole lease after Redis comes back."""
        token = lock.local.token
        lock.drop()
        if token is None:
            return
        deadline = time.monotonic() + self.lock_lease

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
        return ApiError(
            503,
            "SessionBusy",
            f"session {session_id} is busy with another request; retry",
            headers=retry_after(BUSY_RETRY_AFTER),
        )

    # ------------------------------------------------------------------ records

    async def _record(self, session_id: str, caller: Principal) -> Record:
        check_session_id(session_id)
        try:
            record = await self.store.load(session_id)
        except RedisError as exc:
            raise backend_unavailable(f"Redis is unavailable: {exc}") from exc
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

    # ------------------------------------------------------------------ sandboxes

    async def _claim(self, session_id: str) -> Sandbox:
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

    async def _load(
        self, sandbox: Sandbox, env: ServedEnv, init_config: dict[str, Any], seed: int, custom: bool
    ) -> None:
        """Load ``env`` into a fresh sandbox; on failure destroy the sandbox and raise ApiError."""
        try:
            await sandbox.load(
                source=env.source,
                class_name=env.class_name,
                tools=env.tool_names,
                init_config=init_config,
                seed=seed,
                max_result_bytes=self.settings.max_result_bytes,
                timeout=self.settings.load_timeout,
            )
        except RuntimeFault as exc:
            await sandbox.destroy()
            if exc.kind == "LoadError" and custom:
                raise invalid_request(
                    f"the environment does not start from this init_config: {exc.message}",
                    field="init_config",
                ) from exc
            log.error("environment failed to load env=%s error=%s", env.id, exc)
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
        except SandboxGone as exc:
            self.metrics.sandbox_failed("crash")
            raise backend_unavailable(
                f"the sandbox died while loading the environment: {exc}"
            ) from exc
        except BaseException:
            await sandbox.destroy()
            raise

    def _adopt(self, session_id: str, sandbox: Sandbox) -> None:
        old = self._sandboxes.get(session_id)
        self._sandboxes[session_id] = sandbox
        if old is not None and old is not sandbox and not old.destroyed:
            self._destroy_later(old)

    def _destroy_later(self, sandbox: Sandbox) -> None:
        task = asyncio.create_task(self._destroy_quietly(sandbox))
        task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)

    async def _destroy_quietly(self, sandbox: Sandbox) -> None:
        try:
            await sandbox.destroy()
        except Exception as exc:  # noqa: BLE001 - best effort; reapers remove what is left
            log.warning("sandbox destroy failed sandbox=%s error=%s", sandbox.id[:12], exc)

    async def _live_sandbox(self, record: Record) -> Sandbox | None:
        """The record's sandbox if it answers (held by this process, or attached via its handle)."""
        handle = record.sandbox
        held = self._sandboxes.get(record.id)
        if held is not None:
            same = bool(handle) and held.id == handle.get("id")
            if same and not held.destroyed:
                return held
            self._sandboxes.pop(record.id, None)
            if same:
                return None  # this process saw it die (deadline, crash): no need to probe it
            if not held.destroyed:
                self._destroy_later(held)  # superseded by a rebuild elsewhere
        if not handle:
            return None
        try:
            sandbox = Sandbox(SandboxHandle.from_dict(handle), self.backend)
        except (KeyError, TypeError):
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
            await self._destroy_quietly(sandbox)
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
            await self._destroy_quietly(sandbox)
            return None
        self._sandboxes[record.id] = sandbox
        return sandbox

    async def _sandbox(self, record: Record, lock: SessionLock, *, persist: bool = True) -> Sandbox:
        """A live sandbox in the record's current state, rebuilt by replay when needed."""
        sandbox = await self._live_sandbox(record)
        if sandbox is not None:
            return sandbox
        return await self._rebuild(record, lock, persist=persist)

    async def _rebuild(self, record: Record, lock: SessionLock, *, persist: bool = True) -> Sandbox:
        """Claim a sandbox, load the current epoch's start, replay its trajectory, record the
        handle.

        With ``persist=False`` (reads of expired or closed sessions) the record is left alone and
        the caller destroys the sandbox afterwards.
        """
        env = self._env(record)
        started = time.perf_counter()
        sandbox = await self._claim(record.id)
        try:
            await self._renew(lock, record)  # a cold start may have taken a while
            await self._load(
                sandbox, env, record.init_config, record.seed, custom=record.scenario is None
            )
            await self._renew(lock, record)
            entries = await self.store.entries(record.id, record.epoch_start)
            replayed = await self._replay(record, sandbox, entries, lock)
            if persist:
                await self.store.set_sandbox(record, sandbox.handle.to_dict())
        except BaseException:
            await self._destroy_quietly(sandbox)
            raise
        if persist:
            self._adopt(record.id, sandbox)
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

    async def _replay(
        self, record: Record, sandbox: Sandbox, entries: list[dict[str, Any]], lock: SessionLock
    ) -> int:
        renewed = time.monotonic()
        count = 0
        for entry in entries:
            if entry.get("kind") == "reset" or not entry.get("replay"):
                continue
            if time.monotonic() - renewed > self.lock_lease / 3:
                await self._renew(lock, record)
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
                raise backend_unavailable(
                    f"the sandbox died replaying call {entry['index']}: {exc}"
                ) from exc
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

    async def _renew(self, lock: SessionLock, record: Record, seconds: float | None = None) -> None:
        """Restart the lock's lease (to at least ``seconds``) before a long step: a load, a stretch
        of replay, a run of check functions."""
        try:
            if seconds is not None and seconds > self.lock_lease:
                await lock.extend(seconds, replace_ttl=True)
            else:
                await lock.reacquire()
        except LockError as exc:
            raise ApiError(
                503,
                "SessionBusy",
                f"session {record.id} lost its lock during a long operation; retry",
                headers=retry_after(BUSY_RETRY_AFTER),
            ) from exc

    def _stale(self, record: Record, sandbox: Sandbox, exc: RuntimeFault) -> None:
        self.metrics.sandbox_failed("stale")
        log.warning(
            "session sandbox does not hold the recorded state session=%s sandbox=%s error=%s",
            record.id,
            sandbox.id[:12],
            exc,
        )

    @staticmethod
    def _unrestorable(record: Record) -> ApiError:
        """Even a sandbox rebuilt from the trajectory does not match the record: the record
        changed or vanished while this request held it (e.g. it expired). Retrying re-reads it."""
        return backend_unavailable(
            f"session {record.id} could not be restored to its recorded state (its record "
            "changed or vanished meanwhile); retry"
        )

    async def _drop_sandbox(self, record: Record) -> None:
        """Kill the record's sandbox, whoever holds it."""
        held = self._sandboxes.pop(record.id, None)
        if held is not None and not held.destroyed:
            await self._destroy_quietly(held)
        handle = record.sandbox
        if handle and (held is None or held.id != handle.get("id")):
            try:
                await self.backend.destroy(SandboxHandle.from_dict(handle))
            except Exception as exc:  # noqa: BLE001
                log.warning("sandbox destroy failed session=%s error=%s", record.id, exc)

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
        sandbox = await self._claim(session_id)
        await self._load(sandbox, env, init_config, seed, custom=scenario_id is None)
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
            await self._destroy_quietly(sandbox)
            if isinstance(exc, RedisError):
                raise backend_unavailable(f"Redis is unavailable: {exc}") from exc
            raise
        self._sandboxes[session_id] = sandbox
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

    async def tools(self, caller: Principal, session_id: str) -> tuple[Record, ServedEnv]:
        record = await self._record(session_id, caller)
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
        arguments = parse_arguments(arguments)
        started = time.perf_counter()
        async with self._locked(session_id, call_id=call_id) as held:
            record = self._checked(session_id, held.record, caller)
            if held.seen is not None:
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
            entry = await self._execute(record, env, held.lock, name, arguments, call_id)
            record.step += 1
            record.executed += bool(entry.get("replay"))
            fields = {"step": str(record.step), "executed": str(record.executed)}
            if record.sandbox is None:
                fields["sandbox"] = ""  # it died during the call; the next request rebuilds
            try:
                committed = await self.store.commit(
                    record, held.lock, entry, fields=fields, release=True
                )
            except BaseException as exc:
                committed = False
                if not isinstance(exc, RedisError):
                    await self._drop_sandbox(record)
                    raise
            if not committed:
                # The sandbox ran a call that the trajectory does not have, so it no longer matches
                # the record: kill it; the next request rebuilds from the trajectory.
                await self._drop_sandbox(record)
                raise backend_unavailable(
                    "the call could not be recorded (Redis unavailable, or the session "
                    "lock's lease ran out, or its record expired); its effects were discarded"
                )
        elapsed = time.perf_counter() - started
        self.metrics.tool_call_seconds.labels(env.id, name).observe(elapsed)
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
        for attempt in (1, 2):
            sandbox = await self._sandbox(record, lock)
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
                    self._stale(record, sandbox, exc)
                    await self._drop_sandbox(record)
                    if attempt == 1:
                        continue
                    raise self._unrestorable(record) from exc
                log.error("runtime error session=%s tool=%s error=%s", record.id, name, exc)
                raise ApiError(
                    500, "InternalError", "the sandbox runtime rejected the request"
                ) from exc
            except CallTimeout:
                self.metrics.sandbox_failed("timeout")
                self._sandboxes.pop(record.id, None)  # destroyed; the next request rebuilds
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
                self._sandboxes.pop(record.id, None)
                record.sandbox = None
                log.warning(
                    "sandbox died during a call session=%s tool=%s attempt=%d error=%s",
                    record.id,
                    name,
                    attempt,
                    exc,
                )
                if attempt == 2:
                    entry.update(
                        ok=False,
                        error={"type": "SandboxCrashed", "message": str(exc)},
                        replay=False,
                    )
        entry.update(time=now, duration_ms=round((time.perf_counter() - started) * 1e3, 3))
        return entry

    # ------------------------------------------------------------------ state and validation

    async def _with_sandbox(
        self, record: Record, lock: SessionLock, op: Callable[[Sandbox], Awaitable[T]]
    ) -> T:
        """Run ``op`` on the session's sandbox; on a non-active session on a temporary one."""
        active = record.status == "active"
        for attempt in (1, 2):
            sandbox = (
                await self._sandbox(record, lock)
                if active
                else await self._rebuild(record, lock, persist=False)
            )
            try:
                return await op(sandbox)
            except RuntimeFault as exc:
                if exc.kind not in STALE_SANDBOX:
                    raise
                self._stale(record, sandbox, exc)
                await self._drop_sandbox(record)
                if attempt == 2:
                    raise self._unrestorable(record) from exc
            except SandboxGone as exc:
                self.metrics.sandbox_failed("crash")
                self._sandboxes.pop(record.id, None)
                record.sandbox = None
                if attempt == 2:
                    raise backend_unavailable(f"the session's sandbox died twice: {exc}") from exc
            except CallTimeout as exc:
                self.metrics.sandbox_failed("timeout")
                self._sandboxes.pop(record.id, None)
                if active:
                    await self.store.set_sandbox(record, None)
                raise ApiError(504, "Timeout", str(exc)) from exc
            finally:
                if not active:
                    await self._destroy_quietly(sandbox)
        raise AssertionError("unreachable")

    async def state(self, caller: Principal, session_id: str) -> tuple[Record, dict[str, Any]]:
        check_session_id(session_id)
        async with self._locked(session_id) as held:
            record = self._checked(session_id, held.record, caller)
            state = await self._with_sandbox(
                record,
                held.lock,
                lambda s: s.state(timeout=self.settings.call_timeout, executed=record.executed),
            )
            if record.status == "active":
                await self.store.commit(record, held.lock, release=True)
        return record, state

    async def validate(self, caller: Principal, session_id: str) -> dict[str, Any]:
        check_session_id(session_id)
        async with self._locked(session_id) as held:
            record = self._checked(session_id, held.record, caller)
            env = self._env(record)
            if record.scenario is None:
                raise ApiError(
                    409,
                    "NoChecklist",
                    "this session started from a custom init_config; "
                    "there are no check functions to run",
                )
            scenario = env.scenario(record.scenario)
            checklist = list(scenario.checklist)
            if not checklist:
                raise ApiError(409, "NoChecklist", f"scenario {scenario.id} has no checklist")
            checks = [item.check_func for item in checklist]
            # Check functions run on wall-clock deadlines, each in a fresh interpreter: a burst of
            # validations (a rollout batch ending) would starve them of CPU until they time out and
            # count as failed. Queued here instead, they run with the machine to themselves.
            async with self._checking:
                await self._renew(held.lock, record,
                                  self.settings.check_timeout * len(checks) + 10.0)
                results = await self._with_sandbox(
                    record,
                    held.lock,
                    lambda s: s.check(checks, timeout_per_check=self.settings.check_timeout,
                                      executed=record.executed),
                )
            if record.status == "active":
                await self.store.commit(record, held.lock, release=True)
        passed = sum(1 for r in results if r.get("passed") is True)
        total = len(checklist)
        reward = round(passed / total, 4)
        self.metrics.reward.labels(env.id).observe(reward)
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
        async with self._locked(session_id) as held:
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
            sandbox = await self._live_sandbox(record)
            reused = False
            if sandbox is not None:
                try:
                    await sandbox.reset(
                        init_config=init_config, seed=new_seed, timeout=self.settings.load_timeout
                    )
                    reused = True
                except RuntimeFault as exc:
                    # The runtime's state after a failed reset is unknown: rebuild from the record.
                    await self._drop_sandbox(record)
                    if exc.kind == "LoadError" and custom:
                        raise invalid_request(
                            f"the environment does not start from this init_config: {exc.message}",
                            field="init_config",
                        ) from exc
                    raise ApiError(
                        500, "InternalError", "the sandbox runtime failed to reset"
                    ) from exc
                except (SandboxGone, CallTimeout) as exc:
                    self.metrics.sandbox_failed(
                        "crash" if isinstance(exc, SandboxGone) else "timeout"
                    )
                    self._sandboxes.pop(record.id, None)
            if not reused:
                sandbox = await self._claim(session_id)
                await self._renew(lock, record)
                await self._load(sandbox, env, init_config, new_seed, custom=custom)
                self._adopt(session_id, sandbox)
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
                    await self._drop_sandbox(record)
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
        async with self._locked(session_id) as held:
            record = self._checked(session_id, held.record, caller)
            if record.status == "closed":
                return record
            await self._drop_sandbox(record)
            await self.store.finish(record, "closed")
        log.info("session closed session=%s env=%s calls=%d", session_id, record.env, record.length)
        return record

    async def expire_idle(self) -> int:
        """Expire sessions idle longer than ``session_ttl``: kill the sandbox, keep the record."""
        cutoff = time.time() - self.settings.session_ttl
        expired = 0
        for session_id in await self.store.idle(cutoff):
            try:
                async with self._locked(session_id, wait=0.0, touch=False) as held:
                    last = await self.store.last_activity(session_id)
                    if last is None or last > cutoff:
                        continue  # touched meanwhile, or already finished
                    record = held.record
                    if record is None or record.status != "active":
                        await self.store.forget_live(session_id)
                        continue
                    await self._drop_sandbox(record)
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
        await self._forget_stale()
        return expired

    async def _forget_stale(self) -> None:
        """Drop held sandboxes of sessions that another gateway closed or expired."""
        held = list(self._sandboxes)
        if not held:
            return
        for session_id, live in zip(held, await self.store.live_among(held), strict=True):
            if not live and session_id not in self._locks:
                sandbox = self._sandboxes.pop(session_id, None)
                if sandbox is not None and not sandbox.destroyed:
                    await self._destroy_quietly(sandbox)

    async def _expire_forever(self) -> None:
        while True:
            await asyncio.sleep(self.expire_interval)
            try:
                await self.expire_idle()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("session expiry pass failed; will retry")

    async def live_count(self) -> int:
        return await self.store.live_count()


__all__ = [
    "CallOutcome",
    "SessionService",
    "check_session_id",
    "parse_arguments",
]
