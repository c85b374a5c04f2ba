"""Check functions that hang, raise, return non-bools, end their interpreter, flood their output
or mutate what they are given (tests/fixtures/hostile_envs/bad_checks), through the gateway's
validate: each one costs only its own verdict, reported with an error; the reward counts it as
failed; the other checks still run and the session goes on."""

from __future__ import annotations

import time

from tests.integration.gateway_fixtures import running_gateway
from tests.reliability.helpers import call, new_session

EXPECTED = [  # (passed, a fragment of the error) in checklist order
    (True, None),
    (False, "exceeded its CPU time budget of 1 s"),
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


async def test_misbehaving_checks_cost_only_their_own_verdict(make_settings) -> None:
    async with running_gateway(make_settings(check_cpu_seconds=1.0)) as (_, client):
        session_id = await new_session(client, "bad_checks", scenario="bad_checks-1")
        untouched = (await client.post(f"/v1/sessions/{session_id}/validate")).json()
        assert untouched["passed"] == 1 and untouched["total"] == len(EXPECTED)  # the mutator

        await call(client, session_id, "set_flag", {"name": "a"})
        started = time.monotonic()
        response = await client.post(f"/v1/sessions/{session_id}/validate")
        elapsed = time.monotonic() - started
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
        assert elapsed < 10, elapsed  # one hanging check costs its own deadline, not the run's

        # The checks changed nothing: the state is intact and the session goes on.
        state = (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"]
        assert state == {"flags": {"a": True}}
        await call(client, session_id, "set_flag", {"name": "b"})
        again = (await client.post(f"/v1/sessions/{session_id}/validate")).json()
        assert [c["passed"] for c in again["checks"]] == [c["passed"] for c in validation["checks"]]
        assert (await client.get("/readyz")).status_code == 200


async def test_greedy_checks_cannot_starve_the_others(make_settings) -> None:
    """A check that forks without end or eats all memory runs in a checker sandbox, under its
    limits: it fails, and the checks beside it still get their verdicts."""
    async with running_gateway(make_settings(check_cpu_seconds=2.0, sandbox_memory="256m")) as (
        _, client,
    ):
        session_id = await new_session(client, "bad_checks", scenario="bad_checks-2")
        await call(client, session_id, "set_flag", {"name": "a"})
        response = await client.post(f"/v1/sessions/{session_id}/validate")
        assert response.status_code == 200, response.text
        assert "Traceback" not in response.text
        checks = response.json()["checks"]
        assert [c["passed"] for c in checks] == [True, False, False, True], checks
        assert all(c["error"] for c in checks[1:3]), checks
        # Nothing of those checks outlives them: validating again gives the same verdicts.
        again = await client.post(f"/v1/sessions/{session_id}/validate")
        assert again.status_code == 200, again.text
        assert [c["passed"] for c in again.json()["checks"]] == [True, False, False, True]
        await call(client, session_id, "set_flag", {"name": "b"})
        assert (await client.get("/readyz")).status_code == 200
