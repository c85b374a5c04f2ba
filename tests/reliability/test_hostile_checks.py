"""Check functions that raise, return non-bools, end their interpreter, flood their output or
mutate what they are given (tests/fixtures/hostile_envs/bad_checks), through the gateway's
validate: each one costs only its own verdict, reported with an error; the reward counts it as
failed; the other checks still run and the session goes on.

A check that runs out of its CPU time or memory (one that hangs, one that eats all memory, one
that forks up to the process limit and then waits) was never judged: the validation answers
500 ``CheckExhausted`` naming that check, and no reward; the session goes on and other sessions
are unharmed."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.deadlines import scaled
from tests.integration.gateway_fixtures import running_gateway
from tests.reliability.helpers import call, new_session

EXPECTED = [  # (passed, a fragment of the error) in checklist order
    (True, None),
    (False, "ValueError: broken check"),
    (False, "returned int, not bool"),
    (False, "returned NoneType, not bool"),
    (False, "returned str, not bool"),
    (False, "returned list, not bool"),
    (False, "without a verdict"),
    (False, "SystemExit: 0"),
    (False, "bytes of verdict"),
    (True, None),
]


def assert_judged(response: httpx.Response) -> dict:
    """A 200 validation of bad_checks-1 after ``set_flag a``, with the verdicts of EXPECTED."""
    assert response.status_code == 200, response.text
    assert "Traceback" not in response.text
    validation = response.json()
    got = [(c["passed"], c["error"]) for c in validation["checks"]]
    for (passed, error), (want_passed, fragment) in zip(got, EXPECTED, strict=True):
        assert passed is want_passed, got
        if fragment is None:
            assert error is None, got
        else:
            assert error and fragment in error, (fragment, got)
    assert validation["passed"] == 2 and validation["total"] == len(EXPECTED)
    assert validation["reward"] == round(2 / len(EXPECTED), 4)
    return validation


def assert_exhausted(response: httpx.Response, index: int, item: str, resource: str,
                     fragments: tuple[str, ...], total: int) -> str:
    """A 500 CheckExhausted naming checklist[index] alone, what ran out, and that retrying
    cannot help; no reward in the answer."""
    assert response.status_code == 500, response.text
    assert "Traceback" not in response.text and "reward" not in response.json()
    error = response.json()["error"]
    assert error["type"] == "CheckExhausted", error
    message = error["message"]
    assert f"1 of {total} checks ran out of their budget, so no reward was computed" in message
    assert f"checklist[{index}] ({item!r}) ran out of {resource}" in message, message
    assert all(fragment in message for fragment in fragments), (fragments, message)
    assert "Retrying cannot help" in message
    return message


async def test_misbehaving_checks_cost_only_their_own_verdict(make_settings) -> None:
    async with running_gateway(make_settings(check_cpu_seconds=1.0)) as (_, client):
        session_id = await new_session(client, "bad_checks", scenario="bad_checks-1")
        untouched = (await client.post(f"/v1/sessions/{session_id}/validate")).json()
        assert untouched["passed"] == 1 and untouched["total"] == len(EXPECTED)  # the mutator

        await call(client, session_id, "set_flag", {"name": "a"})
        validation = assert_judged(await client.post(f"/v1/sessions/{session_id}/validate"))

        # The checks changed nothing: the state is intact and the session goes on.
        state = (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"]
        assert state == {"flags": {"a": True}}
        await call(client, session_id, "set_flag", {"name": "b"})
        again = (await client.post(f"/v1/sessions/{session_id}/validate")).json()
        assert [c["passed"] for c in again["checks"]] == [c["passed"] for c in validation["checks"]]
        assert (await client.get("/readyz")).status_code == 200


@pytest.mark.parametrize(("scenario", "item", "resource", "fragments"), [
    ("bad_checks-2", "Does the check hang?", "time",
     ("exceeded its CPU time budget of 1 s", "ENVSCALER_CHECK_CPU_SECONDS=1")),
    ("bad_checks-3", "Does the check eat all memory?", "memory",
     ("MemoryError", "ENVSCALER_CHECK_MEMORY=128m", "ENVSCALER_SANDBOX_MEMORY=256m")),
], ids=["hangs", "eats-memory"])
async def test_a_check_that_runs_out_of_its_budget_answers_check_exhausted(
        make_settings, scenario: str, item: str, resource: str,
        fragments: tuple[str, ...]) -> None:
    settings = make_settings(check_cpu_seconds=1.0, check_memory="128m", sandbox_memory="256m")
    async with running_gateway(settings) as (_, client):
        session_id = await new_session(client, "bad_checks", scenario=scenario)
        bystander = await new_session(client, "bad_checks", scenario="bad_checks-1")
        await call(client, session_id, "set_flag", {"name": "a"})
        await call(client, bystander, "set_flag", {"name": "a"})
        started = time.monotonic()
        exhausted, judged = await asyncio.gather(
            client.post(f"/v1/sessions/{session_id}/validate"),
            client.post(f"/v1/sessions/{bystander}/validate"))
        elapsed = time.monotonic() - started
        first = assert_exhausted(exhausted, 1, item, resource, fragments, total=2)
        assert_judged(judged)  # the other session's checks were judged meanwhile
        # an exhausted check costs its own budget, not the run's
        assert elapsed < scaled(10), elapsed

        # Nothing was recorded as a reward; the session goes on, and the answer does not change.
        metrics = (await client.get("/metrics")).text
        assert 'envscaler_validations_total{outcome="exhausted"} 1.0' in metrics
        state = (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"]
        assert state == {"flags": {"a": True}}
        await call(client, session_id, "set_flag", {"name": "b"})
        again = await client.post(f"/v1/sessions/{session_id}/validate")
        assert assert_exhausted(again, 1, item, resource, fragments, total=2) == first
        assert (await client.get("/readyz")).status_code == 200


async def test_greedy_checks_cannot_starve_the_others(make_settings) -> None:
    """A check that forks without end runs in a checker sandbox, under its limits: it fills the
    process limit, then (catching the error) waits for a free slot until its wall deadline, out
    of time (or, on a machine slow to fork, spends its CPU budget forking first: out of time
    too); it alone is named, and the checks beside it are judged."""
    async with running_gateway(make_settings(check_cpu_seconds=2.0, sandbox_memory="256m")) as (
        _, client,
    ):
        session_id = await new_session(client, "bad_checks", scenario="bad_checks-4")
        await call(client, session_id, "set_flag", {"name": "a"})
        # Nothing of those checks outlives them: validating again gives the same answer.
        for _ in range(2):
            response = await client.post(f"/v1/sessions/{session_id}/validate")
            message = assert_exhausted(response, 1, "Does the check fork without end?", "time",
                                       ("ENVSCALER_CHECK_CPU_SECONDS=2",), total=3)
            assert ("blocked for 15 s without finishing (it waited, not computed)" in message
                    or "exceeded its CPU time budget of 2 s" in message), message
        await call(client, session_id, "set_flag", {"name": "b"})
        assert (await client.get("/readyz")).status_code == 200
