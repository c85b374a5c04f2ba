"""Reads of a session that change nothing: its record, its tools, its trajectory, its state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envscaler.server.auth import Principal
from envscaler.server.catalogue import ServedCatalogue, ServedEnv
from envscaler.server.sessions.access import check_session_id, checked, read_checked, require_active
from envscaler.server.sessions.locking import SessionLocks
from envscaler.server.sessions.sandboxes import SessionSandboxes
from envscaler.server.store import Record, SessionStore


@dataclass
class Reads:
    """``GET /v1/sessions/{id}``, ``/tools``, ``/trajectory`` and ``/state``."""

    store: SessionStore
    catalogue: ServedCatalogue
    locks: SessionLocks
    sandboxes: SessionSandboxes

    async def info(self, caller: Principal, session_id: str) -> Record:
        return await read_checked(self.store, session_id, caller)

    async def tools(
        self, caller: Principal, session_id: str, active: bool = False
    ) -> tuple[Record, ServedEnv]:
        """The session and its environment; ``active``: only while tools can be called (the MCP
        door refuses a closed or expired session before its client starts)."""
        record = await read_checked(self.store, session_id, caller)
        if active:
            require_active(record)
        return record, self.catalogue.env(record.env)

    async def trajectory(
        self, caller: Principal, session_id: str
    ) -> tuple[Record, list[dict[str, Any]]]:
        record = await read_checked(self.store, session_id, caller)
        entries = await self.store.entries(record, stop=record.length - 1)
        return record, entries

    async def state(self, caller: Principal, session_id: str) -> tuple[Record, dict[str, Any]]:
        """The environment's state, under the lock (a closed or expired session's is rebuilt
        on a temporary sandbox). Reading an active session's state is activity."""
        check_session_id(session_id)
        async with self.locks.locked(session_id) as held:
            record = checked(session_id, held.record, caller)
            state = await self.sandboxes.read(
                record, held.lock, self.catalogue.env(record.env),
                lambda sandbox, timeout: sandbox.state(timeout=timeout, executed=record.executed))
        return record, state
