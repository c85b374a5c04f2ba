"""Session operations under faults found by reading the code: a reset whose lock is lost while
it claims a sandbox, a call_id reused after a reset, a recorded call that ends its runtime."""

from __future__ import annotations

from typing import Any

from envscaler.server.store import lock_key, session_key
from tests.integration.gateway_fixtures import (
    kill_sandbox,
    running_gateway,
    sandbox_alive,
    sandbox_handle,
)
from tests.reliability.helpers import (
    assert_error,
    audit_trajectory,
    call,
    entries,
    new_session,
    state,
)


async def test_a_reset_that_loses_its_lock_while_claiming_leaks_no_sandbox(make_settings,
                                                                           redis_client) -> None:
    """The session lock is renewed after a reset claims a new sandbox (a cold start may take a
    while); when that renewal fails the reset answers 503 SessionBusy, and the sandbox it claimed
    is ended, not left running with no session to end it. The session stays usable."""
    settings = make_settings(pool_size=0)
    async with running_gateway(settings) as (app, client):
        session_id = await new_session(client, scenario="counter-2")
        await call(client, session_id, "increment", {"name": "z"})
        old = sandbox_handle(redis_client, session_id)
        pool = app.state.pool
        claimed: list[Any] = []
        real_claim = pool.claim

        async def claim_then_lose_the_lock(session: str) -> Any:
            sandbox = await real_claim(session)
            claimed.append(sandbox)
            redis_client.delete(lock_key(session_id))  # its lease ran out
            return sandbox

        pool.claim = claim_then_lose_the_lock
        kill_sandbox(old, settings.socket_root)  # no reset in place: a new sandbox is claimed
        try:
            response = await client.post(f"/v1/sessions/{session_id}/reset")
        finally:
            pool.claim = real_claim
        assert_error(response, 503, "SessionBusy")
        assert len(claimed) == 1
        assert not sandbox_alive(claimed[0].handle.to_dict(), settings.socket_root)
        stats = pool.stats()  # the session's own died, the claimed ended: only warm ones are left
        assert stats.live == stats.ready, stats
        answer = await call(client, session_id, "increment", {"name": "z"})
        assert answer["result"]["data"]["before"] == 11  # rebuilt: the reset never happened


async def test_a_call_id_reused_after_a_reset_runs_in_the_new_epoch(make_settings,
                                                                    redis_client) -> None:
    """Idempotency keys are scoped to the epoch: the same call_id after a reset is a new call of
    the new episode (its retry then answers that one), never the previous episode's result."""
    async with running_gateway(make_settings()) as (_, client):
        session_id = await new_session(client, scenario="counter-2")
        first = await call(client, session_id, "increment", {"name": "z"}, call_id="step-1")
        again = await call(client, session_id, "increment", {"name": "z"}, call_id="step-1")
        assert again["duplicate"] is True and again["index"] == first["index"] == 0
        response = await client.post(f"/v1/sessions/{session_id}/reset")
        assert response.status_code == 200, response.text
        fresh = await call(client, session_id, "increment", {"name": "z"}, call_id="step-1")
        assert fresh["duplicate"] is False and fresh["index"] == 2, fresh
        assert fresh["result"]["data"]["before"] == 10
        retried = await call(client, session_id, "increment", {"name": "z"}, call_id="step-1")
        assert retried["duplicate"] is True and retried["index"] == 2
        assert (await state(client, session_id))["counters"]["z"] == 11
        trajectory = await entries(client, session_id)
        assert [e.get("name") or e["kind"] for e in trajectory] == [
            "increment", "reset", "increment"]
        audit_trajectory(trajectory)  # contiguous; no call_id twice within one epoch


async def test_a_call_that_ends_its_runtime_after_answering_does_not_poison_the_session(
        make_settings, redis_client) -> None:
    """``note_then_exit`` answers, then its runtime exits. Replayed, it would kill every rebuilt
    runtime again (each later call crashed, or 503 until a reset). The rebuild finds the call that
    ends the runtime, marks it ``ended_runtime`` (its effects died with its runtime, as a crashed
    call's do: the session goes on from the state before it), and every later request, and every
    later rebuild, succeeds."""
    settings = make_settings(pool_size=2)
    async with running_gateway(settings) as (_, client):
        session_id = await new_session(client, "self_destruct")
        assert (await call(client, session_id, "note", {"text": "a"}))["result"]["data"] == 1
        doomed = await call(client, session_id, "note_then_exit", {"text": "b"})
        assert doomed["ok"] is True and doomed["result"]["data"] == 2  # the answer it gave
        assert (await state(client, session_id))["log"] == ["a"]  # b died with its runtime
        second = await call(client, session_id, "note_then_exit", {"text": "b2"})
        assert second["ok"] is True and second["result"]["data"] == 2
        after = await call(client, session_id, "note", {"text": "c"})
        assert after["ok"] is True and after["result"]["data"] == 2, after  # [a, c]

        kill_sandbox(sandbox_handle(redis_client, session_id), settings.socket_root)
        again = await call(client, session_id, "note", {"text": "d"})  # a plain rebuild
        assert again["result"]["data"] == 3
        assert (await state(client, session_id))["log"] == ["a", "c", "d"]
        trajectory = await entries(client, session_id)
        assert [(e["name"], e["ok"], e["replay"], e.get("ended_runtime", False))
                for e in trajectory] == [("note", True, True, False),
                                         ("note_then_exit", True, False, True),
                                         ("note_then_exit", True, False, True),
                                         ("note", True, True, False),
                                         ("note", True, True, False)]
        assert trajectory[1]["result"] == doomed["result"]
        assert redis_client.hget(session_key(session_id), "executed") == "3"
