"""The order of a session's calls that carry ``seq``: call n of an episode takes effect only after
calls 0..n-1 of it.

Why: a trainer that runs a turn's tool calls concurrently (verl's ``max_parallel_calls``) sends
them at once; they reach the gateway, or its several workers, in any order, and the session lock
serializes them in the order they arrive, not the order the model wrote them: the same input then
gives different trajectories and rewards. The caller numbers its calls from 0 after each open or
reset (``seq``) and the gateway, which sees every worker's calls through Redis, enforces it.

How: the record keeps ``order`` = ``"<epoch>:<next seq>"`` (a reset starts a new epoch, so the
numbering restarts at 0). A call with seq n polls the record, without the lock, until the next
seq is n; an ordered call recorded in the trajectory, or refused (unknown tool, bad arguments,
quota, a closed session), moves the order past it. One that failed otherwise (the sandbox
backend unavailable: 503, which clients retry with the same ``call_id`` and ``seq``) keeps its
turn. A retried ``call_id`` answers its
stored result as always. The wait is bounded: when the session stays idle (no request holds it,
the order does not move) for ``ENVSCALER_CALL_ORDER_WAIT`` seconds, the calls before n are taken
as lost (a request refused before it reached the session, a client that died) and call n runs; a
call whose turn has passed is refused with 409 ``CallOutOfOrder``, never run out of order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from redis.exceptions import RedisError

from envscaler.server.errors import ApiError, redis_failed
from envscaler.server.store import Record, SessionStore

log = logging.getLogger("envscaler.server.sessions")

POLL_FIRST = 0.002  # seconds between two reads of the order: doubled up to POLL_MAX
POLL_MAX = 0.05
GAP_STAGGER = 0.05
"""Extra idle time per missing call before this one (up to `STAGGERED` calls), as a share of
the wait: of several calls waiting for a lost one, the lowest gives up first, and the others
then see the order move."""
STAGGERED = 16
MAX_AHEAD = 1024
"""How far past the episode's next seq a call may be: a turn's calls are a few; a seq further
ahead is a client's mistake, answered at once rather than after a wait."""


@dataclass
class CallOrder:
    store: SessionStore
    wait: float  # ENVSCALER_CALL_ORDER_WAIT

    async def wait_turn(self, session_id: str, seq: int) -> None:
        """Return when call ``seq`` may go to the session lock: the calls before it took effect,
        its turn passed (the lock's holder then refuses it), or the session stayed idle too long
        for the missing ones (see the module docstring). No record: at once (the lock's holder
        answers why)."""
        last: int | None = None
        idle_since = time.monotonic()
        delay = POLL_FIRST
        while True:
            try:
                state = await self.store.order_state(session_id)
            except RedisError as exc:
                raise redis_failed(exc) from exc
            if state is None or state[0] >= seq:
                return
            next_seq, busy = state
            if seq - next_seq > MAX_AHEAD:
                raise out_of_order(f"call seq {seq} is more than {MAX_AHEAD} calls ahead of "
                                   f"this episode's next, seq {next_seq}")
            now = time.monotonic()
            if busy or next_seq != last:
                last, idle_since = next_seq, now
            elif now - idle_since >= self.wait * (1 + GAP_STAGGER * min(seq - next_seq - 1,
                                                                         STAGGERED)):
                log.warning("ordered call runs without the calls before it session=%s seq=%d "
                            "missing=%d..%d idle_s=%.1f", session_id, seq, next_seq, seq - 1,
                            now - idle_since)
                return
            await asyncio.sleep(delay)
            delay = min(2 * delay, POLL_MAX)


def check_turn(record: Record, seq: int) -> None:
    """Under the session lock: 409 ``CallOutOfOrder`` when call ``seq``'s turn has passed."""
    if seq < record.next_seq:
        raise out_of_order(f"call seq {seq} arrived after call seq {record.next_seq - 1} of this "
                           "episode took effect (it came more than ENVSCALER_CALL_ORDER_WAIT "
                           "seconds late, or its seq was used twice)")


def out_of_order(why: str) -> ApiError:
    return ApiError(409, "CallOutOfOrder",
                    f"{why}; number a session's ordered calls 0, 1, 2... from each open or reset",
                    field="seq")


def passed(record: Record, seq: int) -> dict[str, str]:
    """The record field that moves the episode's order past call ``seq``."""
    return {"order": f"{record.epoch}:{max(seq + 1, record.next_seq)}"}
