"""Session records and trajectories in Redis: the only session state there is.

Any gateway process on the same Redis can serve any session; a gateway keeps nothing that cannot be
rebuilt from these keys (its live sandbox connections are a cache). Every logical step is one round
trip (a pipeline; a MULTI/EXEC transaction when it writes), and every write refreshes the expiry of
all of a session's keys, so nothing leaks even when every gateway dies.

Keys
====

Every key of a session, and the shard of the live set that holds it, carry the session's hash tag
(``{<tag>}``, `slot_tag`: one of 64), so each script's keys are in one slot and the layout works on
Redis Cluster (``ENVSCALER_REDIS_URL=redis+cluster://...``), sessions spread over its masters.

``envscaler:session:{<tag>}:<id>`` — HASH, the session record
    ``env``               environment id
    ``scenario``          scenario id of the current epoch; empty for a custom ``init_config``
                          (a scenario's initial configuration is the catalogue's, never copied
                          here: a call never reads a database, however large)
    ``init``              hex sha256 of the current epoch's custom ``init_config`` text (its key
                          below); empty for a scenario
    ``seed``              integer seed of the current epoch
    ``epoch``             0 at creation, +1 per reset
    ``epoch_start``       index in the ``:calls`` list of the current epoch's first call
    ``length``            entries the session has recorded, all epochs, reset markers included (the
                          next entry's ``index``; ``calls`` in the API's session info)
    ``base``              index of the first entry still in the ``:calls`` list: a reset trims
                          the epochs before the one that just ended (`SessionStore.trim`), so a
                          session that serves a whole training run keeps two episodes at most
    ``step``              tool calls recorded in the current epoch, whatever their outcome
                          (``step`` in the API)
    ``executed``          calls of the current epoch whose effects the sandbox holds (``replay``
                          true): the runtime counts the same as its ``executed``, and a sandbox
                          whose count differs is not attached to
    ``sandbox``           JSON of the live sandbox's handle (``SandboxHandle.to_dict``), or empty;
                          with sandbox hosts, its ``instance`` names the host that holds it
    ``owner``             fingerprint of the API key that created it (``anonymous`` without keys)
    ``agent_token_hash``  hex sha256 of the session's agent token (the token itself is never stored)
    ``status``            ``active`` | ``expired`` | ``closed``
    ``size``              UTF-8 bytes of the ``:calls`` list's entries (`SessionStore.commit`), for
                          the session's quota (``ENVSCALER_MAX_TRAJECTORY_BYTES``)
    ``result_size``       UTF-8 bytes of the current epoch's results and errors
                          (``ENVSCALER_MAX_SESSION_RESULT_BYTES``)
    ``created``           unix time, seconds (float)
    ``updated``           unix time of the last activity
    ``committed``         lock token of the last commit (`COMMIT` is keyed by it: idempotent)

``envscaler:session:{<tag>}:<id>:calls`` — LIST, the trajectory, in order, from entry ``base``
  (the entry of index ``i`` is at position ``i - base``). Tool-call entries::

    {"index", "epoch", "call_id", "name", "arguments", "ok", "result" | "error",
     "replay", "time", "duration_ms"}

  ``replay`` is true when re-executing the entry on a fresh sandbox reproduces its effect (the call
  ran: a result, a ``ToolException`` or a ``ResultTooLarge``); false when nothing ran or the outcome
  was not the tool's (``ArgumentError``, ``Timeout``, ``SandboxCrashed``), and for a call found
  to end its runtime, while it ran or just after it answered (``ended_runtime`` true, set when a
  rebuild finds it: see `envscaler.server.sessions.sandboxes`). Reset markers::

    {"kind": "reset", "index", "epoch", "scenario", "seed", "time"[, "init_sha256"]}

  (``init_sha256``: a reset to a custom ``init_config``, named by its key below, never copied)

``envscaler:session:{<tag>}:<id>:call-ids`` — HASH, ``call_id`` -> index of its latest entry in
  ``:calls``. A call_id is scoped to its epoch: an index before ``epoch_start`` names a call of an
  earlier episode, and the same call_id after a reset is a new call

``envscaler:session:{<tag>}:<id>:lock`` — STRING, the session lock: a
  ``redis.asyncio.lock.Lock`` whose value is the holder's token, with a lease (``PX``) so that a
  dead gateway cannot hold it for ever

``envscaler:sessions:{<tag>}:live`` — ZSET, session id -> unix time of its last activity (active
  sessions), one shard per hash tag

``envscaler:init:<sha256>`` — STRING, a custom ``init_config``'s JSON text, keyed by its hex
  sha256: stored once, however many sessions start from it (`put_init`), read only to rebuild or
  reset one of them, never by a call. It outlives every session that names it: each use sets its
  expiry to ``session_ttl + record_ttl + INIT_REFRESH``, and a gateway that serves an active
  session naming it renews that at least every ``INIT_REFRESH`` seconds (`keep_init`), while the
  session's own keys get ``session_ttl + record_ttl`` at each activity and less once it ends.

Round trips of a tool call
==========================

1. One Lua script (`LOCK_AND_LOAD`): for an agent token, ``HGET session agent_token_hash``
   and nothing more when it is not the token's (a forged token neither takes the lock nor
   refreshes the session's idle time); then ``SET lock token NX PX lease``, then, only when it
   succeeds, ``HGETALL session`` [+ ``HGET call-ids call_id``]: the reads see a state no one else
   can change.
   (When the lock is taken, the gateway waits with ``Lock.acquire`` and then reads.)
2. One Lua script (`COMMIT`): if the lock still holds the caller's token, ``RPUSH`` the entry,
   ``HSET`` the call id and the record's changed fields, ``ZADD`` the live set, ``EXPIRE`` the
   session's keys and ``DEL`` the lock — all or nothing. Keyed by the lock's token, so a
   retry after a lost reply answers "already applied", and one whose outcome is unknown (timed
   out) is settled (`SETTLE`) rather than reported as discarded. A holder whose lease ran out writes
   nothing, nor does one whose record vanished meanwhile (expired, or lost with a Redis that kept
   no data): every write to a record is conditional on its existence (`COMMIT`, `UPDATE`), so a
   partial record is never created.

Expiry
======

On every activity (a commit, or taking the lock of an active session: a request that reaches it,
even one that then fails) the session's keys (record, trajectory, call ids) get
``EXPIRE session_ttl + record_ttl`` and the session's score in the live set is the time. When a
session is closed or expires, they get ``EXPIRE record_ttl``: the record and trajectory stay
readable for that long (``GET /v1/sessions/{id}``, ``/trajectory``, ``/state``, ``/validate``),
then vanish.
"""

from __future__ import annotations

import hashlib
import os
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.lock import Lock
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from envscaler.common.jsoncodec import dumps, loads
from envscaler.server.redis_scripts import ScriptClient

PREFIX = "envscaler"
INIT_REFRESH = 600  # seconds: how often a gateway renews an active session's custom init's expiry
MAX_INITS_KEPT = 4096  # digests whose last renewal a gateway remembers
SLOTS = 64  # hash tags: the live set's shards, spread over a Redis Cluster's masters


def slot_tag(session_id: str) -> str:
    """The hash tag of a session's keys and of its live set's shard (``{0}`` .. ``{63}``):
    one slot for everything a script touches, on Redis Cluster too."""
    return f"{{{zlib.crc32(session_id.encode('utf-8', 'surrogatepass')) % SLOTS}}}"


def session_key(session_id: str) -> str:
    return f"{PREFIX}:session:{slot_tag(session_id)}:{session_id}"


def calls_key(session_id: str) -> str:
    return f"{session_key(session_id)}:calls"


def call_ids_key(session_id: str) -> str:
    return f"{session_key(session_id)}:call-ids"


def lock_key(session_id: str) -> str:
    return f"{session_key(session_id)}:lock"


def live_key(session_id: str) -> str:
    """The shard of the live set that holds the session (in its keys' slot)."""
    return f"{PREFIX}:sessions:{slot_tag(session_id)}:live"


LIVE_KEYS = [f"{PREFIX}:sessions:{{{n}}}:live" for n in range(SLOTS)]


def init_key(digest: str) -> str:
    return f"{PREFIX}:init:{digest}"


def init_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def order_next(order: str, epoch: int) -> int:
    """The next ``seq`` that a record's ``order`` field names for ``epoch`` (0 for another
    epoch's, or none)."""
    order_epoch, _, number = order.partition(":")
    return int(number) if order_epoch == str(epoch) and number.isdigit() else 0


def _utf8_bytes(text: str) -> int:
    """What a text takes in Redis (the ``size`` of a session's entries)."""
    return len(text.encode("utf-8", "surrogatepass"))


@dataclass
class Record:
    id: str
    env: str
    scenario: str | None
    seed: int
    epoch: int
    epoch_start: int
    length: int
    step: int
    executed: int
    sandbox: dict[str, str] | None
    owner: str
    agent_token_hash: str
    status: str
    created: float
    updated: float
    size: int = 0
    result_size: int = 0
    init: str = ""  # the custom init_config's digest (its key): empty for a scenario
    base: int = 0  # index of the first entry still stored (`SessionStore.trim`)
    order: str = ""  # "<epoch>:<next seq>" of the ordered calls (`envscaler.server.sessions.ordering`)

    def position(self, index: int) -> int:
        """Where the entry of ``index`` is in the stored list."""
        return index - self.base

    @property
    def next_seq(self) -> int:
        """The ``seq`` of this episode's next ordered call: 0 until one took effect in it."""
        return order_next(self.order, self.epoch)

    @classmethod
    def parse(cls, session_id: str, raw: dict[str, str]) -> Record:
        sandbox = raw.get("sandbox") or ""
        return cls(
            id=session_id,
            env=raw["env"],
            scenario=raw.get("scenario") or None,
            seed=int(raw.get("seed", 0)),
            epoch=int(raw.get("epoch", 0)),
            epoch_start=int(raw.get("epoch_start", 0)),
            length=int(raw.get("length", 0)),
            step=int(raw.get("step", 0)),
            executed=int(raw.get("executed", 0)),
            sandbox=loads(sandbox) if sandbox else None,
            owner=raw.get("owner", ""),
            agent_token_hash=raw.get("agent_token_hash", ""),
            status=raw.get("status", "active"),
            created=float(raw.get("created", 0.0)),
            updated=float(raw.get("updated", 0.0)),
            size=int(raw.get("size", 0)),
            result_size=int(raw.get("result_size", 0)),
            init=raw.get("init", ""),
            base=int(raw.get("base", 0)),
            order=raw.get("order", ""),
        )

    def fields(self) -> dict[str, str]:
        return {
            "env": self.env,
            "scenario": self.scenario or "",
            "seed": str(self.seed),
            "epoch": str(self.epoch),
            "epoch_start": str(self.epoch_start),
            "length": str(self.length),
            "step": str(self.step),
            "executed": str(self.executed),
            "sandbox": dumps(self.sandbox) if self.sandbox else "",
            "owner": self.owner,
            "agent_token_hash": self.agent_token_hash,
            "status": self.status,
            "created": repr(self.created),
            "updated": repr(self.updated),
            "size": str(self.size),
            "result_size": str(self.result_size),
            "init": self.init,
            "base": str(self.base),
            "order": self.order,
        }


# KEYS: lock, session, call-ids, calls, live
# ARGV: token, lease (ms), call_id ("" for none), session id, now, ttl, touch ("1"/"0"),
#       agent token hash ("" for an admin)
# An agent token is checked first: a wrong one answers 0 and changes nothing (no lock, no touch).
# Taking the lock of an active session is activity: its idle time restarts and its keys' expiry is
# refreshed, so a session whose client keeps trying (through a stalled rebuild, a gateway restart)
# is never expired as idle, nor its record dropped, under that client's feet.
# One script rather than a pipeline of SET NX / HGETALL / HGET: the same reads after the same SET,
# for one command's client-side cost instead of three (a tenth of a tool call in the gateway).
# A lock already holding ARGV[1] is this very request's: a retry whose first attempt took it and
# whose reply was lost (a dropped connection). It is taken, not waited for for a whole lease.
LOCK_AND_LOAD = """
if ARGV[8] ~= '' and redis.call('HGET', KEYS[2], 'agent_token_hash') ~= ARGV[8] then return 0 end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if ARGV[7] == '1' and redis.call('ZSCORE', KEYS[5], ARGV[4]) then
  redis.call('ZADD', KEYS[5], ARGV[5], ARGV[4])
  redis.call('EXPIRE', KEYS[2], ARGV[6])
  redis.call('EXPIRE', KEYS[4], ARGV[6])
  redis.call('EXPIRE', KEYS[3], ARGV[6])
end
if ARGV[3] == '' then return {redis.call('HGETALL', KEYS[2])} end
return {redis.call('HGETALL', KEYS[2]), redis.call('HGET', KEYS[3], ARGV[3])}
"""

# KEYS: lock, session, calls, call-ids, live
# ARGV: token, entry JSON ("" for none), call_id ("" for none), index, now, ttl, release ("1"/"0"),
#       session id, then field/value pairs of the record (``committed`` = token among them)
# Idempotent: a commit is keyed by its lock's token (one commit per holding), so a retry of one
# that was applied (its reply lost with a dropped connection) answers 2, "already applied", and
# writes nothing again.
COMMIT = """
if redis.call('HGET', KEYS[2], 'committed') == ARGV[1] then return 2 end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
if ARGV[2] ~= '' then redis.call('RPUSH', KEYS[3], ARGV[2]) end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[4], ARGV[3], ARGV[4]) end
if #ARGV > 8 then redis.call('HSET', KEYS[2], unpack(ARGV, 9)) end
redis.call('ZADD', KEYS[5], ARGV[5], ARGV[8])
redis.call('EXPIRE', KEYS[2], ARGV[6])
redis.call('EXPIRE', KEYS[3], ARGV[6])
redis.call('EXPIRE', KEYS[4], ARGV[6])
if ARGV[7] == '1' then redis.call('DEL', KEYS[1]) end
return 1
"""


# KEYS: lock, session; ARGV: token. After a commit whose outcome is unknown (it timed out: Redis
# may have applied it, or may still apply it when it wakes): 1 when it was applied; else 0, and
# the lock is deleted first, so that the pending commit, should it ever run, writes nothing.
SETTLE = """
if redis.call('HGET', KEYS[2], 'committed') == ARGV[1] then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS: lock, session, calls; ARGV: token, index, the entry as marked, the change of its size
# (bytes). A recorded call found to
# end its runtime (`SessionSandboxes.find_killer`) no longer counts as executed; idempotent (a
# retry finds the entry marked already).
MARK_ENDED = """
if redis.call('LINDEX', KEYS[3], ARGV[2]) == ARGV[3] then return 2 end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('LSET', KEYS[3], ARGV[2], ARGV[3])
redis.call('HINCRBY', KEYS[2], 'executed', -1)
redis.call('HINCRBY', KEYS[2], 'size', ARGV[4])
return 1
"""

# KEYS: lock, session, calls, call-ids; ARGV: token, index of the first entry to keep. The entries
# before it are dropped (their bytes leave ``size``) and ``base`` names it; the call ids go too
# (a call_id names a call of its epoch only). Returns the bytes dropped, or -1 when the lock is
# not the caller's.
TRIM = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local base = tonumber(redis.call('HGET', KEYS[2], 'base') or '0')
local keep = tonumber(ARGV[2])
if keep <= base then return 0 end
local dropped = 0
for _, entry in ipairs(redis.call('LRANGE', KEYS[3], 0, keep - base - 1)) do
  dropped = dropped + #entry
end
redis.call('LTRIM', KEYS[3], keep - base, -1)
redis.call('DEL', KEYS[4])
redis.call('HSET', KEYS[2], 'base', keep)
redis.call('HINCRBY', KEYS[2], 'size', -dropped)
return dropped
"""

# KEYS: session; ARGV: field/value pairs. Writes only to a record that exists: a record that
# vanished under a request (expired while its lock was stalled, Redis restarted without
# persistence) must never come back as a partial hash.
UPDATE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""

# KEYS: session, calls, call-ids, live; ARGV: session id, seconds to keep, then field/value
# pairs. A session closed or expired: the fields written (only to a record that exists, as
# `UPDATE`), out of the live set, every key kept ARGV[2] seconds. One script rather than a MULTI
# around `UPDATE`: a Redis Cluster client sends no script inside a transaction.
FINISH = """
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], unpack(ARGV, 3)) end
redis.call('ZREM', KEYS[4], ARGV[1])
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ARGV[2]) end
return 1
"""


class TokenRefused(Exception):
    """The agent token is not the session's (or the session does not exist)."""


class SessionLock(Lock):
    """``redis.asyncio.lock.Lock`` (same key, token and lease semantics) with a fast path:
    `SessionStore.lock_and_load` takes it and reads the session in one round trip, and
    `SessionStore.commit` releases it together with the write. The holder's token is read and
    set only here (`token`, `take`, `drop`): redis-py keeps it in ``self.local``, where its own
    methods (``release``, ``reacquire``, ``extend``) read it."""

    @property
    def token(self) -> bytes | None:
        """The holder's token; set before a ``SET`` that may take the lock is sent."""
        token: bytes | None = self.local.token
        return token

    def held(self) -> bool:
        return self.token is not None

    def take(self, token: bytes) -> None:
        self.local.token = token

    def drop(self) -> None:
        self.local.token = None

    async def do_acquire(self, token: str | bytes) -> bool:
        """``SET NX``, or the lock already holds ``token``: a retried ``SET`` whose first
        attempt took the lock but whose reply was lost must not wait out its own lease."""
        if await super().do_acquire(token):
            return True
        held = await self.redis.get(self.name)
        mine = token.decode() if isinstance(token, bytes) else token
        return held is not None and (held.decode() if isinstance(held, bytes) else held) == mine


class SessionStore:
    def __init__(self, redis: Redis, session_ttl: float, record_ttl: float,
                 scripts: ScriptClient | None = None) -> None:
        self.redis = redis
        # The two scripts of every tool call (LOCK_AND_LOAD, COMMIT) go through this lean client
        # when given (`envscaler.server.redis_scripts`: a third of the gateway's CPU per call), else redis-py.
        self.scripts = scripts
        self.active_ttl = int(session_ttl + record_ttl) + 1
        self.record_ttl = int(record_ttl) + 1
        self.init_ttl = self.active_ttl + INIT_REFRESH
        self._inits_kept: dict[str, float] = {}  # digest -> when this gateway last renewed it
        self._commit = redis.register_script(COMMIT)
        self._update = redis.register_script(UPDATE)
        self._finish = redis.register_script(FINISH)
        self._settle = redis.register_script(SETTLE)
        self._mark_ended = redis.register_script(MARK_ENDED)
        self._trim = redis.register_script(TRIM)
        self._lock_and_load = redis.register_script(LOCK_AND_LOAD)

    async def _hot(self, script: AsyncScript, keys: list[Any], args: list[Any]) -> Any:
        if self.scripts is not None:
            return await self.scripts.evalsha(script, keys, args)
        return await script(keys=keys, args=args)

    def lock(self, session_id: str, lease: float, wait: float) -> SessionLock:
        return SessionLock(
            self.redis,
            lock_key(session_id),
            timeout=lease,
            sleep=0.005,
            blocking=wait > 0,
            blocking_timeout=wait,
            thread_local=False,
        )

    def _expire_all(self, pipe: Any, session_id: str, seconds: int) -> None:
        pipe.expire(session_key(session_id), seconds)
        pipe.expire(calls_key(session_id), seconds)
        pipe.expire(call_ids_key(session_id), seconds)

    async def put_init(self, text: str) -> str:
        """Store a custom ``init_config``'s text once (a second session with the same text only
        renews its expiry); its digest, for the record's ``init``."""
        digest = init_digest(text)
        key = init_key(digest)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(key, text, nx=True, ex=self.init_ttl)
            pipe.expire(key, self.init_ttl)
            await pipe.execute()
        self._inits_kept[digest] = time.monotonic()
        return digest

    async def init_text(self, digest: str) -> str | None:
        """A custom ``init_config``'s text by its digest (its expiry renewed); None when gone."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.get(init_key(digest))
            pipe.expire(init_key(digest), self.init_ttl)
            raw, _ = await pipe.execute()
        return raw.decode() if isinstance(raw, bytes) else raw

    async def keep_init(self, digest: str) -> None:
        """Renew the expiry of an active session's custom ``init_config`` when this gateway has
        not for ``INIT_REFRESH`` seconds: no round trip on most requests."""
        now, last = time.monotonic(), self._inits_kept.get(digest)
        if last is not None and now - last < INIT_REFRESH:
            return
        if len(self._inits_kept) >= MAX_INITS_KEPT:
            self._inits_kept.clear()
        self._inits_kept[digest] = now
        await self.redis.expire(init_key(digest), self.init_ttl)

    async def create(self, record: Record, entries: Sequence[dict[str, Any]] = ()) -> None:
        """Store a new session's record (its custom ``init_config`` stored first: `put_init`)
        and, for one opened at another's point, the entries it starts with."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(session_key(record.id), mapping=record.fields())
            if entries:
                pipe.rpush(calls_key(record.id), *(dumps(entry) for entry in entries))
            pipe.zadd(live_key(record.id), {record.id: record.updated})
            self._expire_all(pipe, record.id, self.active_ttl)
            await pipe.execute()

    async def lock_and_load(
        self, lock: SessionLock, session_id: str, call_id: str | None, touch: bool = True,
        token_hash: str | None = None,
    ) -> tuple[bool, Record | None, int | None]:
        """Try the lock and read the record (and ``call_id``'s index) in one round trip; with
        ``touch``, taking it is activity (see `LOCK_AND_LOAD`; the idle-session expiry does not).
        With an agent's ``token_hash``, nothing is done unless it is the session's: `TokenRefused`.

        Returns (acquired, record, index); the reads are meaningful only when acquired.
        """
        token = os.urandom(16).hex().encode()  # as uuid4().hex (which costs four times as much)
        # Taken before the SET is sent: when the round trip fails, the SET may still land (a hung
        # Redis runs it when it wakes up), so the caller must be able to release it.
        lock.take(token)
        replies = await self._hot(
            self._lock_and_load,
            [lock.name, session_key(session_id), call_ids_key(session_id),
             calls_key(session_id), live_key(session_id)],
            [token, int(lock.timeout * 1000), call_id or "", session_id, repr(time.time()),
             self.active_ttl, "1" if touch else "0", token_hash or ""],
        )
        if replies == 0:
            lock.drop()
            raise TokenRefused(session_id)
        if not replies:
            lock.drop()
            return False, None, None
        fields = iter(replies[0])
        raw = dict(zip(fields, fields))
        index = replies[1] if len(replies) > 1 else None
        return (
            True,
            (Record.parse(session_id, raw) if raw else None),
            (int(index) if index is not None else None),
        )

    async def agent_token_hash(self, session_id: str) -> str | None:
        return await self.redis.hget(session_key(session_id), "agent_token_hash")

    async def load(self, session_id: str) -> Record | None:
        raw = await self.redis.hgetall(session_key(session_id))
        return Record.parse(session_id, raw) if raw else None

    async def load_for_call(
        self, session_id: str, call_id: str | None
    ) -> tuple[Record | None, int | None]:
        """The record and, when ``call_id`` was seen before, its entry's index: one round trip."""
        if call_id is None:
            return await self.load(session_id), None
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(session_key(session_id))
            pipe.hget(call_ids_key(session_id), call_id)
            raw, index = await pipe.execute()
        record = Record.parse(session_id, raw) if raw else None
        return record, (int(index) if index is not None else None)

    async def order_state(self, session_id: str) -> tuple[int, bool] | None:
        """(the next ``seq`` of the session's episode, whether a request holds its lock), in one
        round trip without the lock; None when there is no record."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hmget(session_key(session_id), ["epoch", "order"])
            pipe.exists(lock_key(session_id))
            (epoch, order), held = await pipe.execute()
        if epoch is None:
            return None
        return order_next(order or "", int(epoch)), bool(held)

    async def entry(self, record: Record, index: int) -> dict[str, Any] | None:
        if index < record.base:
            return None
        raw = await self.redis.lindex(calls_key(record.id), record.position(index))
        return loads(raw) if raw is not None else None

    async def entries(self, record: Record, start: int | None = None,
                      stop: int | None = None) -> list[dict[str, Any]]:
        """The stored entries from index ``start`` (default: the first kept) to ``stop``
        included (default: the last)."""
        first = max(0, record.position(record.base if start is None else start))
        last = -1 if stop is None else record.position(stop)
        if stop is not None and last < first:
            return []
        return [loads(raw) for raw in await self.redis.lrange(calls_key(record.id), first, last)]

    async def trim(self, record: Record, lock: SessionLock, keep: int) -> bool:
        """Drop the entries before index ``keep`` (and the call ids), under ``lock``; False when
        the lock's lease ran out (nothing dropped)."""
        dropped = int(await self._trim(keys=[lock.name, session_key(record.id),
                                             calls_key(record.id), call_ids_key(record.id)],
                                       args=[lock.token, keep]))
        if dropped < 0:
            return False
        if keep > record.base:
            record.base, record.size = keep, record.size - dropped
        return True

    async def commit(
        self,
        record: Record,
        lock: SessionLock,
        entry: dict[str, Any] | None = None,
        *,
        fields: dict[str, str] | None = None,
        release: bool = False,
    ) -> bool:
        """Append ``entry`` (at index ``record.length``), write ``fields`` and the activity time,
        and refresh the expiry — only if ``lock`` is still held; optionally release it. One round
        trip.

        ``record`` is updated in place first (length when an entry is appended; ``updated``).
        False (and nothing written) when the lock's lease ran out. A commit that fails without
        an answer (timed out, connection lost past the retries) is settled (`SETTLE`): True when
        Redis applied it, else False and it never will; RedisError only when Redis cannot say.
        """
        now = time.time()
        record.updated = now
        token = lock.token
        changed: dict[str, Any] = {"updated": repr(now), **(fields or {}), "committed": token}
        encoded = dumps(entry) if entry is not None else ""
        if entry is not None:
            record.length += 1
            record.size += _utf8_bytes(encoded)
            changed["length"] = str(record.length)
            changed["size"] = str(record.size)
        args: list[Any] = [
            token,
            encoded,
            (entry or {}).get("call_id") or "",
            (entry or {}).get("index", ""),
            repr(now),
            self.active_ttl,
            "1" if release else "0",
            record.id,
        ]
        for name, value in changed.items():
            args += [name, value]
        keys = [
            lock.name,
            session_key(record.id),
            calls_key(record.id),
            call_ids_key(record.id),
            live_key(record.id),
        ]
        try:
            done = bool(await self._hot(self._commit, keys, args))
        except (RedisConnectionError, RedisTimeoutError):  # no answer: it may have been applied
            done = bool(await self._settle(keys=[lock.name, session_key(record.id)], args=[token]))
            lock.drop()  # applied: released with it; not applied: deleted by the settling
            return done
        if done and release:
            lock.drop()
        return done

    async def mark_ended(self, record: Record, lock: SessionLock, entry: dict[str, Any]) -> bool:
        """Record that ``entry``'s call ended its runtime: ``replay`` false (its effects died
        with the runtime; a rebuild goes on without it), ``ended_runtime`` true, one call fewer
        executed. False (nothing written) when the lock or the record is gone."""
        marked = {**entry, "replay": False, "ended_runtime": True}
        encoded = dumps(marked)
        growth = _utf8_bytes(encoded) - _utf8_bytes(dumps(entry))
        done = await self._mark_ended(
            keys=[lock.name, session_key(record.id), calls_key(record.id)],
            args=[lock.token, record.position(entry["index"]), encoded, growth])
        if done:
            record.executed -= 1
            record.size += growth
            entry.update(marked)
        return bool(done)

    async def set_sandbox(self, record: Record, handle: dict[str, str] | None) -> None:
        record.sandbox = handle
        await self._update(keys=[session_key(record.id)],
                           args=["sandbox", dumps(handle) if handle else ""])

    async def finish(self, record: Record, status: str) -> None:
        """Mark a session ``closed`` or ``expired``: no sandbox, not live, kept ``record_ttl``."""
        now = time.time()
        record.status, record.sandbox, record.updated = status, None, now
        await self._finish(
            keys=[session_key(record.id), calls_key(record.id), call_ids_key(record.id),
                  live_key(record.id)],
            args=[record.id, self.record_ttl, "status", status, "sandbox", "", "updated",
                  repr(now)])

    async def idle(self, cutoff: float, limit: int = 200) -> list[str]:
        """The longest idle sessions since before ``cutoff``, at most ``limit``, over every
        shard of the live set."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in LIVE_KEYS:
                pipe.zrangebyscore(key, "-inf", cutoff, start=0, num=limit, withscores=True)
            shards = await pipe.execute()
        idle = sorted((pair for shard in shards for pair in shard), key=lambda pair: pair[1])
        return [session_id for session_id, _ in idle[:limit]]

    async def last_activity(self, session_id: str) -> float | None:
        return await self.redis.zscore(live_key(session_id), session_id)

    async def forget_live(self, session_id: str) -> None:
        await self.redis.zrem(live_key(session_id), session_id)

    async def live_among(self, session_ids: list[str]) -> list[bool]:
        if not session_ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for session_id in session_ids:
                pipe.zscore(live_key(session_id), session_id)
            scores = await pipe.execute()
        return [score is not None for score in scores]

    async def live_count(self) -> int:
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in LIVE_KEYS:
                pipe.zcard(key)
            return sum(await pipe.execute())
