"""Which session a request names, and whether its caller may use it: session ids are made and
checked here, and every record read is checked against its caller before anything else."""

from __future__ import annotations

import secrets

from redis.exceptions import RedisError

from envscaler.server.auth import SESSION_ID_RE, Principal, verify_agent
from envscaler.server.errors import ApiError, not_found, redis_failed, session_expired
from envscaler.server.store import Record, SessionStore


def new_session_id() -> str:
    """24 URL-safe characters (144 bits), never starting with ``-``: a command line would take
    such an id for an option (``envscaler session call -x...`` is a usage error)."""
    while (session_id := secrets.token_urlsafe(18)).startswith("-"):
        continue
    return session_id


def check_session_id(session_id: str) -> None:
    if not SESSION_ID_RE.match(session_id):
        raise not_found("UnknownSession", "no such session (malformed id)")


def checked(session_id: str, record: Record | None, caller: Principal) -> Record:
    """The record, if it exists and ``caller`` may use it (401/403/404 otherwise; an agent whose
    token is not the session's learns nothing, not even whether it exists)."""
    if record is None:
        if not caller.is_admin:
            verify_agent(caller, session_id, None)
        raise not_found(
            "UnknownSession",
            f"no session {session_id!r} (never created, or its record expired)",
        )
    verify_agent(caller, session_id, record.agent_token_hash)
    return record


async def read_checked(store: SessionStore, session_id: str, caller: Principal) -> Record:
    """The record read without the session lock (reads that change nothing), checked."""
    check_session_id(session_id)
    try:
        record = await store.load(session_id)
    except RedisError as exc:
        raise redis_failed(exc) from exc
    return checked(session_id, record, caller)


def require_active(record: Record) -> None:
    """409 for a deleted session, 410 for an expired one: neither takes calls or resets."""
    if record.status == "closed":
        raise ApiError(409, "SessionClosed", f"session {record.id} was deleted")
    if record.status == "expired":
        raise session_expired(f"session {record.id} expired after being idle; its trajectory, "
                              "state and validation can still be read")
