"""A session's point, copied: fork (N new sessions exactly where a session is) and snapshot (the
point stored by content, any gateway opening sessions there later).

A point is what a record says about the current epoch (its start, seed, counters) plus that
epoch's trajectory, which is all a sandbox needs to be rebuilt by deterministic replay. To spare
each copy that replay, the parent's runtime also exports its live objects (`EnvHost.export`: the
instance, the module's globals, the generators, the virtual clock), and each new sandbox, loaded
with the same start, imports them. The gateway never reads that export: it is untrusted data,
passed from one sandbox of the environment to another. An import is checked (the state's digest
must be the exporter's); a point that cannot be exported (objects pickle cannot copy), or whose
import differs, leaves the new session without a sandbox, and its first request rebuilds it by
replay, as after any lost sandbox. Either way each copy answers its next call as the parent would.

Snapshots live at ``envscaler:snapshot:<sha256>`` (STRING, the point's JSON; its key is the
sha256 of that text, so the same point is stored once), for ``ENVSCALER_SNAPSHOT_TTL`` seconds
from the last time it was taken or opened.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from envscaler.common.jsoncodec import dumps, loads
from envscaler.sandbox.errors import PointMismatch, RuntimeFault
from envscaler.sandbox.sandbox import Point, Sandbox
from envscaler.server.auth import Principal, token_hash
from envscaler.server.catalogue import ServedCatalogue
from envscaler.server.errors import invalid_request, not_found, redis_failed
from envscaler.server.metrics import Metrics
from envscaler.server.sessions.access import check_session_id, checked, new_session_id, require_active
from envscaler.server.sessions.claims import SandboxClaims, epoch_start
from envscaler.server.sessions.locking import SessionLocks
from envscaler.server.sessions.reset import ended_epoch_start
from envscaler.server.sessions.sandboxes import SessionSandboxes
from envscaler.server.settings import Settings
from envscaler.server.store import PREFIX, Record, SessionStore, init_key

log = logging.getLogger("envscaler.server.sessions")

MAX_FORKS = 64
SNAPSHOT_ID_RE = re.compile(r"[0-9a-f]{64}")


def snapshot_key(snapshot_id: str) -> str:
    return f"{PREFIX}:snapshot:{snapshot_id}"


@dataclass(frozen=True)
class SessionPoint:
    """Where a session is: its current epoch's start and counters, and that epoch's entries
    (from its reset marker, if any), with the runtime's export when it has one."""

    env: str
    scenario: str | None
    init: str
    seed: int
    epoch: int
    epoch_start: int
    length: int
    step: int
    executed: int
    result_size: int
    entries: list[dict[str, Any]]
    point: Point | None

    @classmethod
    def of(cls, record: Record, entries: list[dict[str, Any]], point: Point | None
           ) -> SessionPoint:
        return cls(record.env, record.scenario, record.init, record.seed, record.epoch,
                   record.epoch_start, record.length, record.step, record.executed,
                   record.result_size, entries, point)

    def to_json(self) -> str:
        fields = dataclasses.asdict(self)
        fields["point"] = dataclasses.asdict(self.point) if self.point else None
        return dumps(fields)

    @classmethod
    def from_json(cls, text: str) -> SessionPoint:
        fields = loads(text)
        point = fields.pop("point")
        return cls(**fields, point=Point(**point) if point else None)

    def record(self, session_id: str, owner: str, agent_token: str) -> Record:
        """A new session's record at this point (with no sandbox yet)."""
        now = time.time()
        encoded = [dumps(entry) for entry in self.entries]
        return Record(
            id=session_id, env=self.env, scenario=self.scenario, seed=self.seed,
            epoch=self.epoch, epoch_start=self.epoch_start, length=self.length, step=self.step,
            executed=self.executed, sandbox=None,
            owner=owner, agent_token_hash=token_hash(agent_token), status="active",
            created=now, updated=now, size=sum(len(text.encode()) for text in encoded),
            result_size=self.result_size, init=self.init,
            base=self.length - len(self.entries))


@dataclass(frozen=True)
class Opened:
    """A session opened at a point: its record and agent token."""

    record: Record
    agent_token: str


@dataclass
class Points:
    """``POST /v1/sessions/{id}/fork``, ``POST /v1/sessions/{id}/snapshot`` and ``POST
    /v1/sessions`` with a ``snapshot``."""

    settings: Settings
    redis: Redis
    store: SessionStore
    catalogue: ServedCatalogue
    locks: SessionLocks
    claims: SandboxClaims
    sandboxes: SessionSandboxes
    metrics: Metrics

    async def fork(self, caller: Principal, session_id: str, count: int) -> list[Opened]:
        """``count`` new sessions at the session's point; the session goes on."""
        if not 1 <= count <= MAX_FORKS:
            raise invalid_request(f"count must be from 1 to {MAX_FORKS}", field="count")
        _, point = await self._take(caller, session_id)
        started = time.perf_counter()
        opened = await self._open_many(caller, point, count)
        log.info("session forked session=%s forks=%d exported=%s ms=%.1f", session_id, count,
                 point.point is not None, (time.perf_counter() - started) * 1e3)
        return opened

    async def snapshot(self, caller: Principal, session_id: str) -> tuple[str, float, Record]:
        """The id of the session's point, stored by content; (id, seconds it is kept, the
        session's record)."""
        record, point = await self._take(caller, session_id)
        text = point.to_json()
        snapshot_id = hashlib.sha256(text.encode()).hexdigest()
        ttl = int(self.settings.snapshot_ttl)
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.set(snapshot_key(snapshot_id), text, ex=ttl)
                if point.init:  # the start a rebuild reads must outlive the snapshot
                    pipe.expire(init_key(point.init), ttl, gt=True)
                await pipe.execute()
        except RedisError as exc:
            raise redis_failed(exc) from exc
        return snapshot_id, ttl, record

    async def open_snapshot(self, caller: Principal, snapshot_id: str,
                            env_id: str | None = None) -> Opened:
        """A new session at the snapshot's point (``env_id``, when given, must be its
        environment)."""
        if not SNAPSHOT_ID_RE.fullmatch(snapshot_id):
            raise invalid_request("a snapshot id is 64 hexadecimal digits", field="snapshot")
        try:
            text = await self.redis.getex(snapshot_key(snapshot_id),
                                          ex=int(self.settings.snapshot_ttl))
        except RedisError as exc:
            raise redis_failed(exc) from exc
        if text is None:
            raise not_found("UnknownSnapshot", f"no snapshot {snapshot_id} (never taken, or "
                            "expired: ENVSCALER_SNAPSHOT_TTL)")
        point = SessionPoint.from_json(text)
        if env_id is not None and env_id != point.env:
            raise invalid_request(f"snapshot {snapshot_id} is of environment {point.env!r}, "
                                  f"not {env_id!r}", field="env")
        self.catalogue.env(point.env)  # 404 for an environment no longer served
        return (await self._open_many(caller, point, 1))[0]

    async def _take(self, caller: Principal, session_id: str) -> tuple[Record, SessionPoint]:
        """The session's point, read under its lock (the runtime's export with it)."""
        check_session_id(session_id)
        async with self.locks.locked(session_id) as held:
            record = checked(session_id, held.record, caller)
            require_active(record)
            env = self.catalogue.env(record.env)
            entries = await self.store.entries(record, ended_epoch_start(record))
            exported = await self.sandboxes.read(
                record, held.lock, env,
                lambda sandbox, timeout: _export(sandbox, timeout, record.executed))
        return record, SessionPoint.of(record, entries, exported)

    async def _open_many(self, caller: Principal, point: SessionPoint, count: int
                         ) -> list[Opened]:
        results = await asyncio.gather(*(self._open(caller, point) for _ in range(count)),
                                       return_exceptions=True)
        opened = [result for result in results if isinstance(result, Opened)]
        failure = next((r for r in results if isinstance(r, BaseException)), None)
        if failure is not None:  # all or nothing: the caller cannot use a part of a group
            await asyncio.gather(*(self._close(o.record) for o in opened),
                                 return_exceptions=True)
            raise failure
        return opened

    async def _open(self, caller: Principal, point: SessionPoint) -> Opened:
        session_id = new_session_id()
        agent_token = f"{session_id}.{secrets.token_urlsafe(24)}"
        record = point.record(session_id, caller.owner, agent_token)
        sandbox = await self._sandbox_at(record, point)
        record.sandbox = sandbox.handle.to_dict() if sandbox is not None else None
        try:
            await self.store.create(record, point.entries)
        except BaseException as exc:
            if sandbox is not None:
                await self.claims.destroy_quietly(sandbox)
            if isinstance(exc, RedisError):
                raise redis_failed(exc) from exc
            raise
        if sandbox is not None:
            self.sandboxes.adopt(session_id, sandbox)
        self.metrics.sessions_created.labels(point.env).inc()
        return Opened(record, agent_token)

    async def _sandbox_at(self, record: Record, point: SessionPoint) -> Sandbox | None:
        """A sandbox loaded with the epoch's start that imported the point; None (the first
        request rebuilds by replay) when there is no export or its import is not exact."""
        if point.point is None:
            return None
        env = self.catalogue.env(point.env)
        initial = await epoch_start(self.store, record, env)
        sandbox = await self.claims.claim_loaded(record.id, env, initial, point.seed,
                                                 scenario_id=point.scenario)
        try:
            await sandbox.import_point(point.point, timeout=self.settings.load_timeout)
        except (RuntimeFault, PointMismatch) as exc:
            log.warning("a point could not be imported session=%s env=%s error=%s; the session "
                        "is rebuilt by replay", record.id, point.env, exc)
            self.metrics.sandbox_failed("point_import")
            await self.claims.release_quietly(sandbox, point.env)
            return None
        except BaseException:
            await self.claims.destroy_quietly(sandbox)
            raise
        return sandbox

    async def _close(self, record: Record) -> None:
        sandbox = self.sandboxes.held.pop(record.id, None)
        if sandbox is not None:
            await self.claims.destroy_quietly(sandbox)
        await self.store.finish(record, "closed")


async def _export(sandbox: Sandbox, timeout: float, executed: int) -> Point | None:
    try:
        return await sandbox.export(timeout=timeout, executed=executed)
    except RuntimeFault as exc:
        if exc.kind != "NotExportable":
            raise
        log.info("a session's objects cannot be exported (%s); its forks replay", exc.message)
        return None

