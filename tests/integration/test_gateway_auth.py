"""API keys and agent tokens: an agent may list and call its own session's tools, nothing else."""

from __future__ import annotations

from envscaler.server.store import session_key
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.gateway_fixtures import COUNTER, running_gateway

ADMIN = "admin-key-0123456789"


def headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_error(response, status: int, error_type: str) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.text
    assert response.json()["ok"] is False and response.json()["error"]["type"] == error_type, (
        response.text
    )


async def test_api_keys_are_required_when_configured(make_settings, redis_client) -> None:
    async with running_gateway(make_settings(api_keys=[ADMIN, "second-key-abcdef"])) as (_, client):
        for auth in (
            {},
            headers("wrong-key"),
            {"Authorization": f"Basic {ADMIN}"},
            {"Authorization": "Bearer"},
        ):
            response = await client.get("/v1/envs", headers=auth)
            assert_error(response, 401, "Unauthorized")
            challenge = response.headers["WWW-Authenticate"]  # says why (RFC 6750)
            message = response.json()["error"]["message"]
            assert challenge.startswith('Bearer error="invalid_') and \
                f'error_description="{message}"' in challenge, challenge
        assert_error(await client.post("/v1/sessions", json={"env": COUNTER}), 401, "Unauthorized")
        assert (await client.get("/v1/envs", headers=headers(ADMIN))).status_code == 200
        created = await client.post(
            "/v1/sessions",
            json={"env": COUNTER, "scenario": "counter-1"},
            headers=headers("second-key-abcdef"),
        )
        assert created.status_code == 201
        info = (
            await client.get(f"/v1/sessions/{created.json()['session_id']}", headers=headers(ADMIN))
        ).json()
        assert info["owner"].startswith("key:") and ADMIN not in info["owner"]
        # health and metrics stay open for probes and scrapers
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/readyz")).status_code == 200
        assert (await client.get("/metrics")).status_code == 200
        # only the hash of an agent token is stored
        session_id = created.json()["session_id"]
        record = redis_client.hgetall(session_key(session_id))
        assert created.json()["agent_token"] not in str(record)
        assert len(record["agent_token_hash"]) == 64


async def test_agent_token_may_only_list_and_call_its_own_sessions_tools(make_settings) -> None:
    async with running_gateway(make_settings(api_keys=[ADMIN]), token=ADMIN) as (_, client):
        created = (
            await client.post("/v1/sessions", json={"env": COUNTER, "scenario": "counter-1"})
        ).json()
        other = (
            await client.post("/v1/sessions", json={"env": COUNTER, "scenario": "counter-1"})
        ).json()
        session_id, agent = created["session_id"], headers(created["agent_token"])

        tools = await client.get(f"/v1/sessions/{session_id}/tools", headers=agent)
        assert tools.status_code == 200 and tools.json()["tools"] == created["tools"]
        called = await client.post(
            f"/v1/sessions/{session_id}/calls",
            headers=agent,
            json={"name": "increment", "arguments": {"name": "a"}},
        )
        assert called.status_code == 200 and called.json()["result"]["data"]["value"] == 2

        forbidden = [
            ("GET", f"/v1/sessions/{session_id}"),
            ("GET", f"/v1/sessions/{session_id}/state"),
            ("GET", f"/v1/sessions/{session_id}/trajectory"),
            ("POST", f"/v1/sessions/{session_id}/reset"),
            ("POST", f"/v1/sessions/{session_id}/validate"),
            ("DELETE", f"/v1/sessions/{session_id}"),
            ("GET", "/v1/envs"),
            ("GET", f"/v1/envs/{COUNTER}"),
            ("GET", f"/v1/envs/{COUNTER}/scenarios"),
            ("GET", f"/v1/sessions/{other['session_id']}/tools"),
        ]
        for method, path in forbidden:
            assert_error(await client.request(method, path, headers=agent), 403, "Forbidden")
        assert_error(
            await client.post("/v1/sessions", headers=agent, json={"env": COUNTER}),
            403,
            "Forbidden",
        )
        assert_error(
            await client.post(
                f"/v1/sessions/{other['session_id']}/calls",
                headers=agent,
                json={"name": "increment", "arguments": {"name": "a"}},
            ),
            403,
            "Forbidden",
        )

        # a forged token for this session (right id, wrong secret) is no token at all
        forged = headers(f"{session_id}.{'x' * 32}")
        assert_error(
            await client.get(f"/v1/sessions/{session_id}/tools", headers=forged),
            401,
            "Unauthorized",
        )
        assert_error(
            await client.post(
                f"/v1/sessions/{session_id}/calls",
                headers=forged,
                json={"name": "increment", "arguments": {"name": "a"}},
            ),
            401,
            "Unauthorized",
        )
        unknown = headers(f"{'Z' * 24}.{'x' * 32}")
        assert_error(
            await client.get(f"/v1/sessions/{'Z' * 24}/tools", headers=unknown), 401, "Unauthorized"
        )

        # nothing the agent was refused happened: one call, one increment, the other untouched
        assert [
            e["name"]
            for e in (await client.get(f"/v1/sessions/{session_id}/trajectory")).json()["entries"]
        ] == ["increment"]
        assert (await client.get(f"/v1/sessions/{session_id}")).json()["status"] == "active"
        assert (await client.get(f"/v1/sessions/{other['session_id']}")).json()["step"] == 0


async def test_without_keys_requests_are_admin_but_agent_tokens_stay_limited(make_settings) -> None:
    async with running_gateway(make_settings(api_keys=[])) as (_, client):
        created = (
            await client.post("/v1/sessions", json={"env": COUNTER, "scenario": "counter-1"})
        ).json()
        session_id, agent = created["session_id"], headers(created["agent_token"])
        assert (await client.get(f"/v1/sessions/{session_id}/state")).status_code == 200
        assert (await client.get(f"/v1/sessions/{session_id}")).json()["owner"] == "anonymous"
        assert (
            await client.post(
                f"/v1/sessions/{session_id}/calls",
                headers=agent,
                json={"name": "increment", "arguments": {"name": "a"}},
            )
        ).status_code == 200
        assert_error(
            await client.get(f"/v1/sessions/{session_id}/state", headers=agent), 403, "Forbidden"
        )
        assert_error(
            await client.post(f"/v1/sessions/{session_id}/validate", headers=agent),
            403,
            "Forbidden",
        )
