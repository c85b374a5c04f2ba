"""What a session may still record: a call's arguments and the session's quotas, checked before
anything runs (``ENVSCALER_MAX_ARGUMENT_BYTES``, ``_SESSION_CALLS``, ``_TRAJECTORY_BYTES``,
``_SESSION_RESULT_BYTES``)."""

from __future__ import annotations

from typing import Any

from envscaler.common.jsoncodec import dump_bytes
from envscaler.server.errors import ApiError, arguments_too_large
from envscaler.server.settings import Settings
from envscaler.server.store import Record

# A trajectory entry's bytes beside its arguments, result or init_config: index, epoch, times,
# flags, and a tool name and call id of up to 200 characters each (6 bytes each when escaped).
ENTRY_OVERHEAD = 4096


def argument_bytes(arguments: dict[str, Any], settings: Settings) -> int:
    """The JSON size of a call's (strict JSON) arguments, as stored and sent; 413 beyond the
    limit (a call's body is bounded by it already: this bounds arguments given as a JSON
    string)."""
    size = len(dump_bytes(arguments))
    if size > settings.max_argument_bytes:
        raise arguments_too_large(f"the arguments take {size} bytes of JSON; the limit is "
                                  f"{settings.max_argument_bytes} (ENVSCALER_MAX_ARGUMENT_BYTES)",
                                  field="arguments")
    return size


def within_quota(record: Record, settings: Settings, adding: int, result: bool = True) -> None:
    """413 ``QuotaExceeded`` unless the session's current epoch may take one more trajectory
    entry holding ``adding`` bytes of the caller's (arguments, or a reset's ``init_config``)
    and, for a call (``result``), the largest result a call may return. Checked before anything runs,
    against the worst case, so an episode never passes its quotas. Per epoch, never by the
    session's age: a reset starts the counts again (and trims the stored trajectory, see
    `envscaler.server.sessions.reset`), so a session can serve a whole training run. Nothing is
    recorded; reads, validation, reset and deletion still work."""
    worst = settings.max_result_bytes if result else 0
    in_epoch = record.length - record.epoch_start
    if result and in_epoch >= settings.max_session_calls:
        reason = (f"has {in_epoch} trajectory entries in this episode, the most one may have "
                  f"(ENVSCALER_MAX_SESSION_CALLS={settings.max_session_calls})")
    elif record.size + ENTRY_OVERHEAD + adding + worst > settings.max_trajectory_bytes:
        reason = (f"keeps a trajectory of {record.size} bytes; an entry of {adding} bytes"
                  + (f" and a result of up to {worst} (ENVSCALER_MAX_RESULT_BYTES)"
                     if result else "")
                  + f" could pass ENVSCALER_MAX_TRAJECTORY_BYTES="
                  f"{settings.max_trajectory_bytes}")
    elif result and record.result_size + worst > settings.max_session_result_bytes:
        reason = (f"has had {record.result_size} bytes of results in this episode; one more of "
                  f"up to {worst} (ENVSCALER_MAX_RESULT_BYTES) could pass "
                  f"ENVSCALER_MAX_SESSION_RESULT_BYTES={settings.max_session_result_bytes}")
    else:
        return
    raise ApiError(413, "QuotaExceeded", f"session {record.id} {reason}; nothing was run or "
                   "recorded: reset the session or open a new one")
