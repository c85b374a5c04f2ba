"""The EnvScaler release fixture, imported, then served by a real gateway (real Redis, real
sandboxes on each backend): the imported environments are listed with their derived tools, an
unverified scenario is validated by running its checks (reward in [0, 1) untouched, 1.0 once the
task is done through the tools), and the release's private helpers are not callable."""

from __future__ import annotations

from pathlib import Path

import pytest

from envscaler.importers.envscaler_release import import_release, locate
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.gateway_fixtures import running_gateway

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "envscaler_release" / "hf"
MESSAGING = "envscaler_env_1_rl"
SUBSCRIPTIONS = "envscaler_env_2_rl"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("imported") / "envs"
    report = import_release(*locate(FIXTURE), root)
    assert [env.env_id for env in report.imported] == [MESSAGING, SUBSCRIPTIONS]
    return root


async def session(client, env: str, scenario: str) -> dict:  # type: ignore[no-untyped-def]
    response = await client.post("/v1/sessions", json={"env": env, "scenario": scenario})
    assert response.status_code == 201, response.text
    return response.json()


async def call(client, session_id: str, name: str, **arguments) -> dict:  # type: ignore[no-untyped-def]
    response = await client.post(f"/v1/sessions/{session_id}/calls",
                                 json={"name": name, "arguments": arguments})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["ok"] and body["result"]["success"], body
    return body["result"]


async def validate(client, session_id: str) -> dict:  # type: ignore[no-untyped-def]
    response = await client.post(f"/v1/sessions/{session_id}/validate")
    assert response.status_code == 200, response.text
    return response.json()


async def test_imported_release_is_served_and_its_unverified_scenarios_validate(
        make_settings, imported: Path) -> None:
    async with running_gateway(make_settings(catalogue=imported)) as (_, client):
        envs = {env["id"]: env for env in (await client.get("/v1/envs")).json()["envs"]}
        assert set(envs) == {MESSAGING, SUBSCRIPTIONS}
        assert envs[MESSAGING]["tools"] == 10 and envs[MESSAGING]["scenarios"] == 2
        listing = (await client.get(f"/v1/envs/{MESSAGING}/scenarios")).json()["scenarios"]
        assert [(s["id"], s["split"]) for s in listing] == [("env_1_rl-task_1", "rl"),
                                                            ("env_1_rl-task_2", "rl")]

        created = await session(client, MESSAGING, "env_1_rl-task_1")
        session_id = created["session_id"]
        assert "5036481912" in created["task"]
        names = {tool["function"]["name"] for tool in created["tools"]}
        assert "send_message" in names and "_generate_message_id" not in names

        untouched = await validate(client, session_id)
        assert 0.0 <= untouched["reward"] < 1.0
        assert (untouched["passed"], untouched["total"]) == (1, 4)  # only "MSG-1 left unread"
        assert untouched["reward"] == 0.25

        # the release would let an agent call its private helper; the gateway does not
        hidden = await client.post(f"/v1/sessions/{session_id}/calls",
                                   json={"name": "_generate_message_id", "arguments": {}})
        assert hidden.status_code == 404 and hidden.json()["error"]["type"] == "UnknownTool"

        valid = await call(client, session_id, "validate_phone_number",
                           phone_number="5036481912")
        assert valid["data"] == {"valid": True}
        await call(client, session_id, "add_contact", user_id="USER2",
                   contact_name="Jade Williams", contact_phone_number="5036481912")
        await call(client, session_id, "mark_message_as_read", message_id="MSG-2")
        await call(client, session_id, "send_message", sender_id="USER2", receiver_id="USER3",
                   content="Thanks Jade, saved your new number!")
        done = await validate(client, session_id)
        assert done["reward"] == 1.0 and done["passed"] == done["total"] == 4
        assert all(check["passed"] and check["error"] is None for check in done["checks"])


async def test_a_partly_done_task_gets_a_partial_reward(make_settings, imported: Path) -> None:
    async with running_gateway(make_settings(catalogue=imported)) as (_, client):
        session_id = (await session(client, SUBSCRIPTIONS, "env_2_rl-task_1"))["session_id"]
        before = await validate(client, session_id)
        assert (before["passed"], before["total"]) == (1, 4)  # SUB-0003 untouched holds already
        subscriptions = await call(client, session_id, "list_user_subscriptions",
                                   user_id="USR001", status="active")
        assert {sub["subscription_id"] for sub in subscriptions["data"]} == {"SUB-0001",
                                                                             "SUB-0002"}
        await call(client, session_id, "cancel_subscription", subscription_id="SUB-0001")
        await call(client, session_id, "change_frequency", subscription_id="SUB-0002",
                   frequency="quarterly")
        partial = await validate(client, session_id)
        assert (partial["passed"], partial["total"]) == (3, 4) and partial["reward"] == 0.75
        await call(client, session_id, "update_shipping_address", user_id="USR001",
                   new_address="88 Harbor Lane, Portland, OR 97201")
        assert (await validate(client, session_id))["reward"] == 1.0
