"""A tool call: its arguments in, the session lock, the sandbox, the trajectory entry, the outcome
a route renders. The spine of the gateway's hot path (the route's and the MCP door's)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from envscaler.common.jsoncodec import dump_bytes
from envscaler.sandbox.errors import SandboxError
from envscaler.sandbox.sandbox import Sandbox
from envscaler.server import jsonlimits
from envscaler.server.auth import Principal, check_agent
from envscaler.server.callsummary import CallSummary
from envscaler.server.catalogue import ServedCatalogue, ServedEnv
from envscaler.server.errors import ApiError, backend_unavailable, invalid_arguments, redis_failed, redis_full
from envscaler.server.jsonlimits import JsonLimits
from envscaler.server.metrics import Metrics
from envscaler.server.sessions import faults
from envscaler.server.sessions.access import check_session_id, checked, require_active
from envscaler.server.sessions.faults import Fault, Step
from envscaler.server.sessions.locking import SessionLocks
from envscaler.server.sessions.ordering import CallOrder, check_turn, passed
from envscaler.server.sessions.quota import argument_bytes, within_quota
from envscaler.server.sessions.sandboxes import SessionSandboxes
from envscaler.server.settings import Settings
from envscaler.server.store import Record, SessionLock, SessionStore

log = logging.getLogger("envscaler.server.sessions")


def parse_arguments(arguments: dict[str, Any] | str, limits: JsonLimits) -> dict[str, Any]:
    """An object as is (its body was checked against ``limits``); a JSON string decoded and
    checked against them (an empty string is ``{}``)."""
    if isinstance(arguments, dict):
        return arguments
    text = arguments.strip()
    if not text:
        return {}
    try:
        value = jsonlimits.loads(text, limits, "body.arguments")
    except ValueError as exc:
        raise invalid_arguments(f"arguments is not valid JSON: {exc}", field="arguments") from None
    if not isinstance(value, dict):
        raise invalid_arguments(
            f"arguments must be a JSON object, not {type(value).__name__}", field="arguments"
        )
    return value


@dataclass
class CallOutcome:
    """A call's trajectory entry, as the API answers it (``CallResult``)."""

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


@dataclass
class ToolCalls:
    """``POST /v1/sessions/{id}/calls`` and MCP ``tools/call``."""

    settings: Settings
    store: SessionStore
    catalogue: ServedCatalogue
    locks: SessionLocks
    sandboxes: SessionSandboxes
    metrics: Metrics
    summary: CallSummary

    def __post_init__(self) -> None:
        self.json_limits = self.settings.json_limits()
        self.order = CallOrder(self.store, self.settings.call_order_wait)

    async def call(
        self,
        caller: Principal,
        session_id: str,
        name: str,
        arguments: dict[str, Any] | str,
        call_id: str | None,
        seq: int | None = None,
    ) -> CallOutcome:
        """Run the call once (a ``call_id`` already recorded in this epoch answers its entry)
        and record it; rejected calls (unknown tool, bad arguments, quota) record nothing. A
        ``seq`` runs it in its episode's order (`envscaler.server.sessions.ordering`)."""
        check_session_id(session_id)
        check_agent(caller, session_id)
        if seq is not None:
            await self.order.wait_turn(session_id, seq)
        started = time.perf_counter()
        async with self.locks.locked(session_id, call_id=call_id,
                                     token_hash=caller.token_hash) as held:
            record = checked(session_id, held.record, caller)
            # A call_id names a call of its epoch: one reused after a reset runs anew, never
            # answers the previous episode's result.
            if held.seen_index is not None and held.seen_index >= record.epoch_start:
                stored = await self.store.entry(record, held.seen_index)
                if stored is not None:
                    log.debug("duplicate call session=%s call_id=%s index=%d", session_id,
                             call_id, held.seen_index)
                    return CallOutcome(stored, duplicate=True)
            if seq is not None:
                check_turn(record, seq)
            # only an active session's order moves: a closed one's record is not written again
            order = passed(record, seq) if seq is not None and record.status == "active" else {}
            try:
                env = self.catalogue.env(record.env)
                checked_arguments = self._checked(record, env, name, arguments)
            except ApiError:
                if order:  # a refused call takes its turn too: the next one need not wait
                    await self._pass_turn(record, held.lock, order)
                raise
            # A failure from here on is retried with the same call_id and seq: it keeps its turn.
            entry = await self._execute(record, env, held.lock, name, checked_arguments, call_id)
            await self._record(record, held.lock, entry, order)
        elapsed = time.perf_counter() - started
        self.metrics.tool_call(env.id, name, elapsed)
        self.summary.add(elapsed, entry["ok"])
        if log.isEnabledFor(logging.DEBUG):
            error = entry.get("error") or {}
            log.debug(
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

    async def _pass_turn(self, record: Record, lock: SessionLock, order: dict[str, str]) -> None:
        """Move the order past a refused call; when Redis fails, the refusal is still answered
        (the next call then waits ENVSCALER_CALL_ORDER_WAIT for this one)."""
        try:
            await self.store.commit(record, lock, fields=order)
        except RedisError as exc:
            log.warning("could not record an ordered call's refusal session=%s error=%s",
                        record.id, exc)

    def _checked(self, record: Record, env: ServedEnv, name: str,
                 arguments: dict[str, Any] | str) -> dict[str, Any]:
        """The call's arguments, parsed, once the call may run (the session active, the tool
        known, the arguments matching its schema, the quotas); else the refusal's `ApiError`."""
        parsed = parse_arguments(arguments, self.json_limits)
        require_active(record)
        self.catalogue.validate_arguments(env, name, parsed)
        within_quota(record, self.settings, argument_bytes(parsed, self.settings))
        return parsed

    async def _execute(
        self,
        record: Record,
        env: ServedEnv,
        lock: SessionLock,
        name: str,
        arguments: dict[str, Any],
        call_id: str | None,
    ) -> dict[str, Any]:
        """Run one call on the session's sandbox (rebuilding it if needed); the trajectory entry.
        The sandbox's failures are recovered from, recorded or answered as `faults` says."""
        now = time.time()
        entry: dict[str, Any] = {
            "index": record.length,
            "epoch": record.epoch,
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
        }
        started = time.perf_counter()

        async def run(sandbox: Sandbox) -> dict[str, Any]:
            nonlocal started
            started = time.perf_counter()  # the last attempt's: a rebuild is not the call's
            result = await sandbox.call(name, arguments, timeout=self.settings.call_timeout,
                                        executed=record.executed)
            return {"ok": True, "result": result, "replay": True}

        async def settle(exc: SandboxError, fault: Fault) -> dict[str, Any]:
            if not fault.recorded:
                raise faults.api_error(exc, Step.CALL, env=env.id, tool=name) from exc
            return {"ok": False, "error": faults.recorded_error(exc, name),
                    "replay": fault.replayed}

        entry |= await self.sandboxes.with_sandbox(record, lock, run, settle)
        entry.update(time=now, duration_ms=round((time.perf_counter() - started) * 1e3, 3))
        return entry

    async def _record(self, record: Record, lock: SessionLock, entry: dict[str, Any],
                      order: dict[str, str]) -> None:
        """Append the entry and count it (releasing the lock), with the ``order`` it moves (an
        ordered call's); a sandbox whose call may be missing from the trajectory is dropped, so
        that the next request rebuilds it."""
        record.step += 1
        record.executed += bool(entry.get("replay"))
        record.result_size += len(dump_bytes(entry.get("result") if entry["ok"]
                                             else entry.get("error")))
        fields = {"step": str(record.step), "executed": str(record.executed),
                  "result_size": str(record.result_size), **order}
        if record.sandbox is None:
            fields["sandbox"] = ""  # it died during the call; the next request rebuilds
        try:
            committed = await self.store.commit(record, lock, entry, fields=fields, release=True)
        except BaseException as exc:
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
