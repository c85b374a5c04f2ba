"""Rewards an environment cannot forge: check functions run in checker sandboxes that never load
environment code, on the states the session's sandbox reports. An environment that patches its
runtime, a check runner's process and JSON machinery, builtins and the result limit, writes forged
verdicts to files and leaves a process running (tests/fixtures/hostile_envs/forger) gets exactly
the verdicts its state deserves, and its oversized result is refused by the gateway."""

from __future__ import annotations

import pytest

from tests.integration.gateway_fixtures import running_gateway
from tests.reliability.helpers import call, new_session, state

SCENARIO = "forger-1"


def deserved(final: dict, initial: dict) -> list[bool]:
    """The checklist of forger-1, evaluated here on plain data."""
    flags = final["flags"]
    return [flags.get("a") is True, flags.get("b") is True,
            not any(initial["flags"].values()),
            all(flags.values()) and len(flags) == 2]


async def _verdicts(client, session_id: str) -> list[bool]:
    response = await client.post(f"/v1/sessions/{session_id}/validate")
    assert response.status_code == 200, response.text
    return [check["passed"] for check in response.json()["checks"]]


@pytest.mark.parametrize("runtime", [None, "runsc"])
async def test_a_patched_runtime_gets_the_verdicts_its_state_deserves(make_settings,
                                                                      runtime) -> None:
    settings = make_settings(sandbox_runtime=runtime, sandbox_pids=128 if runtime else 64)
    async with running_gateway(settings) as (_, client):
        session_id = await new_session(client, "forger", scenario=SCENARIO)
        initial = await state(client, session_id)
        forged = await call(client, session_id, "forge", {})
        assert forged["ok"] is True, forged

        verdicts = await _verdicts(client, session_id)
        assert verdicts == deserved(await state(client, session_id), initial) \
            == [False, False, True, False]

        await call(client, session_id, "set_flag", {"name": "a"})
        assert await _verdicts(client, session_id) == [True, False, True, False]
        await call(client, session_id, "set_flag", {"name": "b"})
        final = await state(client, session_id)
        assert await _verdicts(client, session_id) == deserved(final, initial) == [True] * 4

        huge = await call(client, session_id, "huge", {})
        assert huge["ok"] is False and huge["error"]["type"] == "ResultTooLarge", huge
        assert await state(client, session_id) == final  # the session goes on, untouched
