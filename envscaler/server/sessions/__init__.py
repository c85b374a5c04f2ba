"""Sessions: create, call, state, trajectory, reset, validate, delete, expire — the gateway's core.

A session is a record and a trajectory in Redis (layout: `envscaler.server.store`) plus, somewhere, a live
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
    process (FIFO, no polling), and a Redis lock (`envscaler.server.store.SessionLock`, a
    ``redis.asyncio.lock.Lock`` on ``envscaler:session:{<tag>}:<id>:lock``, with a lease that
    `locking.SessionLocks` renews while its request works) orders them across gateways on one
    Redis.
    Different sessions run in parallel. A request that cannot take both locks within
    ``session_lock_wait`` answers 503 ``SessionBusy`` with ``Retry-After``.

Idempotency
    A call with a ``call_id`` already in the session's ``:call-ids`` hash returns the stored entry
    (with ``duplicate: true``) and executes nothing. The check happens inside the lock, so two
    concurrent retries of one call execute it at most once.

What is recorded
    Every call the sandbox saw: results, tool errors (``ToolException``, ``ArgumentError``,
    ``ResultTooLarge``), ``Timeout`` and ``SandboxCrashed``. Calls rejected before any sandbox saw
    them (unknown tool, arguments that do not match the schema, closed or expired session, busy
    lock) are not recorded: they did nothing.

A tool call's path
    `envscaler.server.fastcall.FastCalls` (or the documented route, `envscaler.server.routes.sessions.call_tool`)
    -> `envscaler.server.calls.answer_call` -> `toolcall.ToolCalls.call`: `access` checks the
    id, `locking.SessionLocks.locked` takes the lock and reads the record (`envscaler.server.store`),
    `access` checks the caller, `envscaler.server.catalogue` the arguments and `quota` the quotas. Then
    `ToolCalls._execute` runs `envscaler.sandbox.sandbox.Sandbox.call` through
    `sandboxes.SessionSandboxes.with_sandbox`, the one loop of every operation on a sandbox: the
    session's sandbox (held, attached, or rebuilt by `replay` on a sandbox from `claims`), and on a
    failure what `faults` says (a fault the call records is the call's answer);
    `ToolCalls._record` commits the entry (`envscaler.server.store`), and the route answers
    `toolcall.CallOutcome`.

Layout
    `service` composes `SessionService` from the operations, one module each: `lifecycle`
    (create, delete), `toolcall` (a tool call: arguments, execution, recording, its outcome),
    `reset`, `reads` (record, tools, trajectory, state), `validation`, and `expiry` (the idle
    expiry). Beneath them, each using only those after it: `access` (session ids, the caller's
    right to a record), `quota`, `sandboxes` (the live sandbox of each session), `replay` (a
    sandbox rebuilt from the trajectory), `claims` (sandboxes from the pool, loaded), `locking`
    (the two-level session lock) and `faults` (what a sandbox failure means, and answers).
"""

from envscaler.server.sessions.access import check_session_id, new_session_id
from envscaler.server.sessions.service import SessionService
from envscaler.server.sessions.toolcall import CallOutcome, parse_arguments

__all__ = [
    "CallOutcome",
    "SessionService",
    "check_session_id",
    "new_session_id",
    "parse_arguments",
]
