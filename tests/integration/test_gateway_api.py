"""The gateway's API end to end: catalogue, sessions, calls, state, trajectory, validation, reset,
delete, health, metrics and the OpenAPI document, on a real Redis and real sandboxes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from envscaler.format.loader import load_env
from envscaler.server.embedded_redis import EmbeddedRedis
from envscaler.common.jsoncodec import dumps
from envscaler.server.store import INIT_REFRESH, init_digest, init_key, live_key, session_key
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.gateway_fixtures import (
    COUNTER,
    COUNTER_SCENARIOS,
    LIBRARY,
    kill_sandbox,
    REPO_ROOT,
    running_gateway,
    sandbox_released,
    sandbox_handle,
    session_record,
)

LIBRARY_ENV = load_env(REPO_ROOT / "generated_envs" / LIBRARY)  # reads files only; runs nothing
SCENARIO = LIBRARY_ENV.scenario("library_loans-001")


async def create(client, env: str, **body) -> dict:  # type: ignore[no-untyped-def]
    response = await client.post("/v1/sessions", json={"env": env, **body})
    assert response.status_code == 201, response.text
    return response.json()


async def call(client, session_id: str, name: str, arguments, **extra) -> dict:  # type: ignore[no-untyped-def]
    response = await client.post(
        f"/v1/sessions/{session_id}/calls", json={"name": name, "arguments": arguments, **extra}
    )
    assert response.status_code == 200, response.text
    return response.json()


async def test_catalogue_lists_envs_tools_and_scenarios_but_never_checks(make_settings) -> None:
    async with running_gateway(make_settings()) as (_, client):
        envs = {env["id"]: env for env in (await client.get("/v1/envs")).json()["envs"]}
        assert envs[LIBRARY] == {
            "id": LIBRARY,
            "summary": LIBRARY_ENV.manifest.summary,
            "tools": len(LIBRARY_ENV.manifest.tools),
            "scenarios": len(LIBRARY_ENV.scenarios),
        }
        assert envs[COUNTER]["scenarios"] == len(COUNTER_SCENARIOS)

        detail = (await client.get(f"/v1/envs/{LIBRARY}")).json()
        assert detail["tools"] == LIBRARY_ENV.manifest.tools
        assert detail["class_name"] == "LibraryLoanSystem" and detail["scenarios"] == len(
            LIBRARY_ENV.scenarios
        )

        listing = (await client.get(f"/v1/envs/{LIBRARY}/scenarios")).json()
        assert [s["id"] for s in listing["scenarios"]] == [s.id for s in LIBRARY_ENV.scenarios]
        for item in listing["scenarios"]:
            assert set(item) == {"id", "split", "task"}
        text = json.dumps(listing)
        assert "check_func" not in text and "solution" not in text and "checklist" not in text
        rl = (await client.get(f"/v1/envs/{LIBRARY}/scenarios", params={"split": "rl"})).json()[
            "scenarios"
        ]
        assert [s["id"] for s in rl] == [s.id for s in LIBRARY_ENV.scenarios if s.split == "rl"]


async def test_whole_session_on_library_loans(make_settings, redis_client) -> None:
    async with running_gateway(make_settings()) as (_, client):
        created = await create(client, LIBRARY, scenario=SCENARIO.id, seed=3)
        session_id = created["session_id"]
        assert created["task"] == SCENARIO.task and created["tools"] == LIBRARY_ENV.manifest.tools
        assert (
            created["status"] == "active"
            and created["seed"] == 3
            and created["scenario"] == SCENARIO.id
        )
        assert created["agent_token"].startswith(session_id + ".")

        info = (await client.get(f"/v1/sessions/{session_id}")).json()
        assert (info["status"], info["step"], info["epoch"], info["calls"]) == ("active", 0, 0, 0)

        initial = (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"]
        assert initial["members"] == SCENARIO.init_config["members"]

        as_object = await call(client, session_id, "get_member", {"member_id": "M-1001"})
        as_string = await call(client, session_id, "get_member", '{"member_id": "M-1001"}')
        assert as_object["ok"] and as_object["result"]["data"]["name"] == "Priya Raman"
        assert as_string["result"] == as_object["result"]
        assert (as_object["index"], as_string["index"]) == (0, 1)

        # The reference solution, half of it with arguments as JSON strings.
        for number, step in enumerate(SCENARIO.solution):
            arguments = json.dumps(step.arguments) if number % 2 else step.arguments
            answer = await call(
                client, session_id, step.name, arguments, call_id=f"solution-{number}"
            )
            assert answer["ok"] and answer["result"]["success"], answer

        trajectory = (await client.get(f"/v1/sessions/{session_id}/trajectory")).json()
        entries = trajectory["entries"]
        assert [e["index"] for e in entries] == list(range(2 + len(SCENARIO.solution)))
        assert [e["name"] for e in entries[2:]] == [s.name for s in SCENARIO.solution]
        assert [e["arguments"] for e in entries[2:]] == [s.arguments for s in SCENARIO.solution]
        assert all(
            e["ok"] and e["replay"] and e["epoch"] == 0 and e["kind"] == "call" for e in entries
        )
        assert entries[2]["call_id"] == "solution-0" and entries[0]["call_id"] is None
        assert entries[0]["result"] == as_object["result"]

        validation = (await client.post(f"/v1/sessions/{session_id}/validate")).json()
        assert validation["reward"] == 1.0
        assert validation["passed"] == validation["total"] == len(SCENARIO.checklist)
        assert [c["item"] for c in validation["checks"]] == [c.item for c in SCENARIO.checklist]
        assert all(c["passed"] and c["error"] is None for c in validation["checks"])

        state = (await client.get(f"/v1/sessions/{session_id}/state")).json()
        assert state["step"] == 2 + len(SCENARIO.solution)
        assert state["state"]["members"]["M-1001"]["email"] == "priya.raman@fastmail.example"
        # validate changed nothing
        assert (await client.post(f"/v1/sessions/{session_id}/validate")).json()["reward"] == 1.0
        assert (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"] == state[
            "state"
        ]

        untouched = await create(client, LIBRARY, scenario=SCENARIO.id, seed=3)
        low = (await client.post(f"/v1/sessions/{untouched['session_id']}/validate")).json()
        assert low["reward"] < 1.0 and low["passed"] < low["total"]
        assert low["reward"] == round(low["passed"] / low["total"], 4)

        handle = sandbox_handle(redis_client, session_id)
        deleted = await client.delete(f"/v1/sessions/{session_id}")
        assert deleted.status_code == 200 and deleted.json() == {
            "session_id": session_id,
            "status": "closed",
        }
        # in a thread: the gateway recycles it on this event loop meanwhile
        assert await asyncio.to_thread(sandbox_released, handle, Path(make_settings().socket_root))
        again = await client.delete(f"/v1/sessions/{session_id}")
        assert again.status_code == 200 and again.json()["status"] == "closed"
        assert (await client.get(f"/v1/sessions/{session_id}")).json()["status"] == "closed"
        closed = await client.post(
            f"/v1/sessions/{session_id}/calls",
            json={"name": "get_member", "arguments": {"member_id": "M-1001"}},
        )
        assert closed.status_code == 409 and closed.json()["error"]["type"] == "SessionClosed"
        # The record outlives the sandbox: trajectory, state and reward are still there.
        assert len(
            (await client.get(f"/v1/sessions/{session_id}/trajectory")).json()["entries"]
        ) == len(entries)
        assert (await client.post(f"/v1/sessions/{session_id}/validate")).json()["reward"] == 1.0
        assert (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"] == state[
            "state"
        ]
        record = session_record(redis_client, session_id)
        assert record["status"] == "closed" and record["sandbox"] == ""
        assert redis_client.zscore(live_key(session_id), session_id) is None


async def test_custom_init_config_session_has_no_checklist(make_settings) -> None:
    async with running_gateway(make_settings()) as (_, client):
        created = await create(client, COUNTER, init_config={"counters": {"q": 7}}, seed=1)
        assert created["task"] is None and created["scenario"] is None
        session_id = created["session_id"]
        assert (await call(client, session_id, "increment", {"name": "q"}))["result"]["data"][
            "value"
        ] == 8
        response = await client.post(f"/v1/sessions/{session_id}/validate")
        assert response.status_code == 409 and response.json()["error"]["type"] == "NoChecklist"
        empty = await create(client, COUNTER)  # neither scenario nor init_config: {}
        state = (await client.get(f"/v1/sessions/{empty['session_id']}/state")).json()["state"]
        assert state["counters"] == {} and state["init_config"] == {}


async def test_reset_same_seed_new_seed_other_scenario_and_init_config_in_the_same_sandbox(
    make_settings, redis_client
) -> None:
    async with running_gateway(make_settings()) as (_, client):
        created = await create(client, COUNTER, scenario="counter-1", seed=0)
        session_id = created["session_id"]
        state_url = f"/v1/sessions/{session_id}/state"
        initial = (await client.get(state_url)).json()["state"]
        sandbox_id = (await client.get(f"/v1/sessions/{session_id}")).json()["sandbox_id"]
        first_token = (await call(client, session_id, "token", {}))["result"]["data"]
        await call(client, session_id, "increment", {"name": "a"})

        reset = await client.post(f"/v1/sessions/{session_id}/reset")
        assert reset.status_code == 200, reset.text
        assert reset.json() | {"task": None} == {
            "session_id": session_id,
            "epoch": 1,
            "scenario": "counter-1",
            "seed": 0,
            "task": None,
            "sandbox_reused": True,
        }
        assert (await client.get(state_url)).json()["state"] == initial
        # same seed: the same "random" values again
        assert (await call(client, session_id, "token", {}))["result"]["data"] == first_token

        reset = (await client.post(f"/v1/sessions/{session_id}/reset", json={"seed": 5})).json()
        assert (reset["epoch"], reset["seed"], reset["sandbox_reused"]) == (2, 5, True)
        assert (await client.get(state_url)).json()["state"] == initial
        assert (await call(client, session_id, "token", {}))["result"]["data"][
            "uuid"
        ] != first_token["uuid"]

        reset = (
            await client.post(f"/v1/sessions/{session_id}/reset", json={"scenario": "counter-2"})
        ).json()
        assert (reset["scenario"], reset["seed"], reset["epoch"]) == ("counter-2", 5, 3)
        assert reset["task"] == COUNTER_SCENARIOS[1]["task"]
        assert (await client.get(state_url)).json()["state"]["counters"] == {"z": 10}
        await call(client, session_id, "increment", {"name": "z"})
        validation = (await client.post(f"/v1/sessions/{session_id}/validate")).json()
        assert (validation["scenario"], validation["reward"], validation["total"]) == (
            "counter-2",
            1.0,
            1,
        )

        reset = (
            await client.post(
                f"/v1/sessions/{session_id}/reset", json={"init_config": {"counters": {"k": 4}}}
            )
        ).json()
        assert reset["scenario"] is None and reset["task"] is None
        assert (await client.get(state_url)).json()["state"]["counters"] == {"k": 4}

        info = (await client.get(f"/v1/sessions/{session_id}")).json()
        assert info["sandbox_id"] == sandbox_id and info["epoch"] == 4 and info["step"] == 0
        assert sandbox_handle(redis_client, session_id)["id"] == sandbox_id

        # The trajectory keeps the episode the last reset ended and the current one.
        entries = (await client.get(f"/v1/sessions/{session_id}/trajectory")).json()["entries"]
        markers = [e for e in entries if e["kind"] == "reset"]
        assert [(m["epoch"], m["scenario"], m["seed"]) for m in markers] == [
            (3, "counter-2", 5),
            (4, None, 5),
        ]
        assert markers[-1]["init_sha256"] == init_digest(dumps({"counters": {"k": 4}}))
        assert [e["index"] for e in entries] == list(range(entries[0]["index"],
                                                           info["calls"]))


async def test_health_readiness_metrics_and_openapi(make_settings) -> None:
    settings = make_settings(pool_size=2)
    async with running_gateway(settings) as (app, client):
        assert (await client.get("/healthz")).json() == {"ok": True, "instance": settings.instance}
        ready = await client.get("/readyz")
        assert ready.status_code == 200, ready.text
        body = ready.json()
        assert body["ready"] is True and body["isolation"] == app.state.backend.isolation
        assert body["components"]["redis"]["ok"] and body["components"]["sandbox_backend"]["ok"]
        checkers = body["components"]["checkers"]
        assert checkers["ok"] and checkers["detail"]["checkers"] == settings.checkers
        assert (
            set(body["pool"]) == {"ready", "target", "live", "capacity"}
            and body["pool"]["target"] == 2
        )

        session_id = (await create(client, COUNTER, scenario="counter-1"))["session_id"]
        await call(client, session_id, "increment", {"name": "a", "by": 2})
        await call(client, session_id, "increment", {"name": "b"})
        assert (await client.post(f"/v1/sessions/{session_id}/validate")).json()["reward"] == 1.0
        metrics = await client.get("/metrics")
        assert metrics.status_code == 200 and metrics.headers["content-type"].startswith(
            "text/plain"
        )
        text = metrics.text
        assert f'envscaler_tool_call_seconds_count{{env="{COUNTER}",tool="increment"}} 2.0' in text
        assert "envscaler_sessions_live 1.0" in text
        assert f'envscaler_reward_count{{env="{COUNTER}"}} 1.0' in text
        assert f'envscaler_reward_sum{{env="{COUNTER}"}} 1.0' in text
        for name in (
            "envscaler_pool_ready",
            "envscaler_pool_live",
            "envscaler_sandbox_starts_total",
            'envscaler_sandbox_failures_total{reason="create"}',
            "envscaler_session_rebuilds_total",
            "envscaler_replay_mismatches_total",
        ):
            assert name in text, name

        spec = (await client.get("/openapi.json")).json()
        expected = {
            ("/healthz", "get"),
            ("/readyz", "get"),
            ("/metrics", "get"),
            ("/v1/envs", "get"),
            ("/v1/envs/{env}", "get"),
            ("/v1/envs/{env}/scenarios", "get"),
            ("/v1/sessions", "post"),
            ("/v1/sessions/{session_id}", "get"),
            ("/v1/sessions/{session_id}", "delete"),
            ("/v1/sessions/{session_id}/tools", "get"),
            ("/v1/sessions/{session_id}/calls", "post"),
            ("/v1/sessions/{session_id}/state", "get"),
            ("/v1/sessions/{session_id}/trajectory", "get"),
            ("/v1/sessions/{session_id}/reset", "post"),
            ("/v1/sessions/{session_id}/validate", "post"),
        }
        present = {(path, method) for path, item in spec["paths"].items() for method in item}
        assert expected <= present
        for path, method in expected:
            operation = spec["paths"][path][method]
            assert operation.get("summary"), (path, method)
            if path.startswith("/v1/"):
                errors = {code: r for code, r in operation["responses"].items() if code[0] in "45"}
                assert "401" in errors and "403" in errors, (path, method)
                for response in errors.values():
                    schema = response["content"]["application/json"]["schema"]
                    assert schema["$ref"].endswith("/ErrorResponse"), (path, method)
        calls = spec["paths"]["/v1/sessions/{session_id}/calls"]["post"]["responses"]
        assert {"404", "409", "410", "422", "429", "503", "504"} <= set(calls)
        schemas = spec["components"]["schemas"]
        assert {
            "ErrorResponse",
            "ErrorDetail",
            "CallRequest",
            "CallResult",
            "CreateSession",
            "SessionCreated",
            "Validation",
            "Trajectory",
            "ResetRequest",
            "Readiness",
        } <= set(schemas)
        argument_types = {
            option.get("type")
            for option in schemas["CallRequest"]["properties"]["arguments"]["anyOf"]
        }
        assert argument_types == {"object", "string"}


async def test_readyz_answers_503_naming_redis_when_redis_is_down(make_settings, tmp_path) -> None:
    with EmbeddedRedis(tmp_path / "redis", persistent=False) as private:
        async with running_gateway(make_settings(redis_url=private.url)) as (_, client):
            assert (await client.get("/readyz")).status_code == 200
            private.stop()
            response = await client.get("/readyz")
            assert response.status_code == 503
            body = response.json()
            assert body["ready"] is False and body["components"]["redis"]["ok"] is False
            assert body["components"]["redis"]["error"]
            assert body["components"]["sandbox_backend"]["ok"] is True
            # and a session request says which backend is missing, with Retry-After
            failed = await client.get("/v1/sessions/" + "a" * 24)
            assert (
                failed.status_code == 503 and failed.json()["error"]["type"] == "BackendUnavailable"
            )
            assert int(failed.headers["Retry-After"]) >= 1


async def test_redis_layout_of_a_session(make_settings, redis_client) -> None:
    settings = make_settings(session_ttl=300.0, record_ttl=1000.0)
    async with running_gateway(settings) as (_, client):
        session_id = (await create(client, COUNTER, scenario="counter-1", seed=4))["session_id"]
        await call(client, session_id, "increment", {"name": "a"}, call_id="first")
        await client.post(f"/v1/sessions/{session_id}/reset", json={"seed": 9})
        await call(client, session_id, "increment", {"name": "b"})

        key = session_key(session_id)
        record = redis_client.hgetall(key)
        assert {
            "env",
            "scenario",
            "seed",
            "epoch",
            "sandbox",
            "owner",
            "agent_token_hash",
            "status",
            "step",
            "created",
            "updated",
        } <= set(record)
        assert (
            record["env"],
            record["scenario"],
            record["seed"],
            record["epoch"],
            record["step"],
            record["status"],
        ) == (COUNTER, "counter-1", "9", "1", "1", "active")
        # a scenario's initial configuration is the catalogue's: never copied into Redis
        assert "init_config" not in record and record["init"] == ""
        assert (
            json.loads(record["sandbox"])["id"]
            == (await client.get(f"/v1/sessions/{session_id}")).json()["sandbox_id"]
        )

        calls = [json.loads(raw) for raw in redis_client.lrange(f"{key}:calls", 0, -1)]
        assert [c.get("kind", "call") for c in calls] == ["call", "reset", "call"]
        assert set(calls[0]) == {
            "index",
            "epoch",
            "call_id",
            "name",
            "arguments",
            "ok",
            "result",
            "replay",
            "time",
            "duration_ms",
        }
        assert calls[1] == {
            "kind": "reset",
            "index": 1,
            "epoch": 1,
            "scenario": "counter-1",
            "seed": 9,
            "time": calls[1]["time"],
        }
        assert redis_client.hgetall(f"{key}:call-ids") == {"first": "0"}
        assert redis_client.zscore(live_key(session_id), session_id) == pytest.approx(
            float(record["updated"])
        )
        for suffix in ("", ":calls", ":call-ids"):
            assert 1250 < redis_client.ttl(key + suffix) <= 1301, suffix
        assert not redis_client.exists(f"{key}:lock")  # released after every request

        await client.delete(f"/v1/sessions/{session_id}")
        for suffix in ("", ":calls", ":call-ids"):
            assert 950 < redis_client.ttl(key + suffix) <= 1001, suffix


async def test_a_custom_init_config_is_stored_once_for_every_session_that_uses_it(
        make_settings, redis_client) -> None:
    """The caller's own start is stored once under its digest, however many sessions start from
    it (read to rebuild or reset, never by a call); the records name it; it outlives them."""
    settings = make_settings(session_ttl=300.0, record_ttl=1000.0)
    own, other = {"counters": {"x": 41}}, {"counters": {"y": 7}}
    digest = init_digest(dumps(own))
    init_ttl = 300 + 1000 + INIT_REFRESH
    async with running_gateway(settings) as (_, client):
        sessions = [(await create(client, COUNTER, init_config=own))["session_id"]
                    for _ in range(3)]
        session_id = sessions[0]
        assert [redis_client.hget(session_key(s), "init") for s in sessions] == [digest] * 3
        assert "init_config" not in redis_client.hgetall(session_key(session_id))
        assert redis_client.keys("envscaler:init:*") == [init_key(digest)]
        assert json.loads(redis_client.get(init_key(digest))) == own
        await call(client, session_id, "increment", {"name": "x"})
        assert init_ttl - 50 < redis_client.ttl(init_key(digest)) <= init_ttl + 1
        # a rebuild starts from it: the sandbox killed, the next call replays on a new one
        kill_sandbox(sandbox_handle(redis_client, session_id), Path(settings.socket_root))
        assert (await call(client, session_id, "increment", {"name": "x"}))["result"]["data"][
            "value"] == 43
        reset = await client.post(f"/v1/sessions/{session_id}/reset", json={})
        assert reset.status_code == 200, reset.text
        assert (await call(client, session_id, "increment", {"name": "x"}))["result"]["data"][
            "value"] == 42
        await client.post(f"/v1/sessions/{session_id}/reset", json={"init_config": other})
        assert len(redis_client.keys("envscaler:init:*")) == 2
        await client.post(f"/v1/sessions/{session_id}/reset", json={"scenario": "counter-1"})
        assert redis_client.hget(session_key(session_id), "init") == ""
        # the others still start from the shared copy
        kill_sandbox(sandbox_handle(redis_client, sessions[1]), Path(settings.socket_root))
        assert (await call(client, sessions[1], "increment", {"name": "x"}))["result"]["data"][
            "value"] == 42
        for closed in sessions:
            await client.delete(f"/v1/sessions/{closed}")
        assert redis_client.ttl(init_key(digest)) > redis_client.ttl(session_key(sessions[1]))


async def test_a_session_whose_init_config_is_gone_says_so(make_settings, redis_client) -> None:
    settings = make_settings()
    async with running_gateway(settings) as (_, client):
        session_id = (await create(client, COUNTER, init_config={"counters": {}}))["session_id"]
        redis_client.delete(*redis_client.keys("envscaler:init:*"))
        kill_sandbox(sandbox_handle(redis_client, session_id), Path(settings.socket_root))
        gone = await client.post(f"/v1/sessions/{session_id}/calls",
                                 json={"name": "increment", "arguments": {"name": "x"}})
        assert gone.status_code == 410, gone.text
        assert gone.json()["error"]["type"] == "SessionExpired"
        assert "init_config" in gone.json()["error"]["message"]
