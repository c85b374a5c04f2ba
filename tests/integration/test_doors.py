"""The doors of OpenEnv and ORS (`envscaler.server.doors`), driven by those ecosystems' own clients, pinned
(``openenv`` 0.10.0 in `.venv-openenv`; ``ors-sdk`` 0.1.0 and ``openreward`` 0.1.167 in
`.venv-ors`), as subprocesses against a gateway process: each solves ``library_loans-001`` with its
reference solution to reward 1.0 and gets bad calls back as errors while the episode goes on. What
the clients do not exercise (the Task API's refusals, authentication, JSON-RPC and WebSocket
errors, a resumed call) is checked over plain HTTP and WebSocket. Real Redis, real Docker."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from envscaler.server.settings import Settings
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.gateway_fixtures import (
    COUNTER,
    LIBRARY,
    REPO_ROOT,
    GatewayProcess,
    gateway_process,
    own_redis_db,
    running_gateway,
)

API_KEY = "doors-test-admin-key-0123456789"
SCENARIO = "library_loans-001"
OPENENV_PYTHON = REPO_ROOT / ".venv-openenv" / "bin" / "python"  # scripts/bootstrap makes them
ORS_PYTHON = REPO_ROOT / ".venv-ors" / "bin" / "python"
FIXTURES = REPO_ROOT / "tests" / "fixtures"


@pytest.fixture(scope="module")
def gateway(redis_url: str, sandbox_image: str, socket_root: Path, catalogue_root: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    settings = Settings(redis_url=own_redis_db(redis_url, 15), api_keys=[API_KEY],
                        catalogue=catalogue_root, sandbox_backend="docker",
                        sandbox_image=sandbox_image, socket_root=socket_root, pool_size=2,
                        log_level="WARNING")
    with gateway_process(settings, tmp_path_factory.mktemp("doors") / "gw.log") as process:
        yield process


@pytest.fixture
async def admin(gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway.client(API_KEY) as client:
        yield client


def scenario(scenario_id: str) -> dict[str, Any]:
    lines = (REPO_ROOT / "generated_envs" / LIBRARY / "scenarios.jsonl").read_text().splitlines()
    return next(s for s in map(json.loads, filter(None, lines)) if s["id"] == scenario_id)


# The peers' libraries would otherwise call home (analytics, the Hub, update checks).
OFFLINE = {"GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1",
           "OPENREWARD_DISABLE_UPDATE_CHECK": "1"}


async def run_client(python: Path, script: Path, *args: str) -> dict[str, Any]:
    assert python.exists(), f"no {python.parent.parent.name}: run scripts/bootstrap"
    process = await asyncio.create_subprocess_exec(
        str(python), str(script), *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, **OFFLINE})
    stdout, stderr = await asyncio.wait_for(process.communicate(), scaled(300))
    assert process.returncode == 0, stderr.decode()[-4000:]
    return json.loads(stdout)


async def names_in_trajectory(admin: httpx.AsyncClient, session_id: str) -> list[str]:
    trajectory = (await admin.get(f"/v1/sessions/{session_id}/trajectory")).json()
    return [entry["name"] for entry in trajectory["entries"] if entry.get("kind") != "reset"]


async def closes(admin: httpx.AsyncClient, session_id: str) -> None:
    """The session is closed, or closes soon: a WebSocket's end reaches the gateway after the
    client has left."""
    for _ in range(100):
        if (await admin.get(f"/v1/sessions/{session_id}")).json()["status"] == "closed":
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"session {session_id} is still open")


# ---------------------------------------------------------------- OpenEnv


async def test_openenv_clients_solve_a_scenario_and_get_bad_calls_back_as_errors(
        gateway: GatewayProcess, admin: httpx.AsyncClient) -> None:
    reference = scenario(SCENARIO)
    solution = reference["solution"]
    seen = await run_client(OPENENV_PYTHON, FIXTURES / "openenv" / "client.py",
                            f"{gateway.url}/openenv/{LIBRARY}", API_KEY, SCENARIO,
                            json.dumps(solution))
    tools = [t["function"]["name"] for t in json.loads(
        (REPO_ROOT / "generated_envs" / LIBRARY / "env.json").read_text())["tools"]]

    mcp = seen["mcp_tool_client"]
    assert mcp["reset"] == {"observation": "GenericMCPObservation", "task": reference["task"],
                            "done": False}
    assert mcp["tools"] == [*tools, "submit"]
    assert all(result["success"] is True for result in mcp["results"]), mcp["results"]
    assert mcp["results"][0]["data"]["member_id"] == "M-1001"
    unknown, bad_arguments = mcp["refused"]
    assert "UnknownTool" in unknown and "no_such_tool" in unknown, unknown
    assert "InvalidArguments" in bad_arguments and "member_id" in bad_arguments, bad_arguments
    assert mcp["submit"] == {"done": True, "reward": 1.0, "result": {
        "reward": 1.0, "passed": len(reference["checklist"]), "total": len(reference["checklist"])}}
    session_id = mcp["state"]["episode_id"]
    assert mcp["state"]["step_count"] == len(solution)
    assert await names_in_trajectory(admin, session_id) == [c["name"] for c in solution]
    # the client's close closed the gateway session (openenv/session/close)
    assert (await admin.get(f"/v1/sessions/{session_id}")).json()["status"] == "closed"

    generic = seen["generic_client"]
    assert generic["reset"]["observation"]["task"] == reference["task"]
    assert not {"tools", "tool_name"} & set(generic["reset"]["observation"])
    assert generic["tools"] == [*tools, "submit"]
    assert generic["errors"] == [None] * len(solution)
    assert [e["error_type"] for e in generic["refused"]] == ["tool_not_found", "invalid_args"]
    assert generic["submit"]["done"] is True and generic["submit"]["reward"] == 1.0
    own = generic["state"]["episode_id"]
    assert own != session_id and generic["state"]["scenario"] == SCENARIO
    await closes(admin, own)  # with its socket


async def test_openenv_task_api_json_rpc_and_websocket_refusals(
        gateway: GatewayProcess, admin: httpx.AsyncClient) -> None:
    base = f"{gateway.url}/openenv/{LIBRARY}"
    auth = {"Authorization": f"Bearer {API_KEY}"}
    async with httpx.AsyncClient(base_url=base, headers=auth, timeout=scaled(60)) as client:
        assert (await client.get("/health")).json() == {"status": "healthy"}
        assert (await client.get("/list_environments")).json() == [LIBRARY]
        assert [s["name"] for s in (await client.get(f"/{LIBRARY}/splits")).json()] == [
            "train", "rl", "eval"]
        tasks = (await client.post(f"/{LIBRARY}/tasks", json={"split": "train"})).json()
        assert tasks["tasks"] == [{"env": LIBRARY, "scenario": s, "seed": 0}
                                  for s in ("library_loans-001", "library_loans-004")]
        assert (await client.post(f"/{LIBRARY}/num_tasks", json={"split": "eval"})).json() == {
            "num_tasks": 1}
        task = (await client.post(f"/{LIBRARY}/task", json={"split": "train", "index": -1})).json()
        assert task["task"]["scenario"] == "library_loans-004"
        ranged = (await client.post(f"/{LIBRARY}/task_range",
                                    json={"split": "train", "start": 1})).json()
        assert [t["scenario"] for t in ranged["tasks"]] == ["library_loans-004"]
        refused = await client.post(f"/{LIBRARY}/task", json={"split": "train", "index": 2})
        assert refused.status_code == 422 and refused.json()["error"]["field"] == "index"
        assert (await client.post("/other_env/tasks", json={"split": "train"})).status_code == 404

        async def rpc(method: str, params: dict[str, Any], **headers: str) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "method": method, "params": params, "id": 7}
            response = await client.post("/mcp", json=body, headers=headers)
            assert response.status_code == 200, response.text
            return response.json()

        denied = await rpc("tools/list", {}, authorization="Bearer wrong")
        assert denied["error"]["data"]["type"] == "Unauthorized" and denied["id"] == 7
        assert (await rpc("resources/list", {}))["error"]["code"] == -32601
        handle = (await rpc("openenv/session/create", {}))["result"]["session_id"]
        early = await rpc("tools/call", {"name": "get_member", "arguments": {},
                                         "session_id": handle})
        assert early["error"]["data"]["type"] == "UnknownSession", early
        assert "reset it over /ws" in early["error"]["message"]
        extra = await rpc("tools/call", {"name": "get_member", "session_id": handle, "x": 1})
        assert extra["error"]["data"]["field"] == "params.x", extra
        garbled = await client.post("/mcp", content=b"{not json",
                                    headers={"content-type": "application/json"})
        assert garbled.json()["error"]["code"] == -32700

    ws_url = base.replace("http://", "ws://") + "/ws"
    async with connect(ws_url, additional_headers={"Authorization": "Bearer wrong"}) as ws:
        frame = json.loads(await ws.recv())
        assert frame["type"] == "error" and frame["data"]["error"]["type"] == "Unauthorized"
    async with connect(ws_url, additional_headers=auth) as ws:
        async def send(message: dict[str, Any]) -> dict[str, Any]:
            await ws.send(json.dumps(message))
            return json.loads(await ws.recv())

        first = await send({"type": "step", "data": {"type": "call_tool", "tool_name": "x"}})
        assert first["type"] == "error" and "reset" in first["data"]["message"]
        unknown = await send({"type": "reset", "data": {"scenario": "library_loans-999"}})
        assert unknown["data"]["error"]["type"] == "UnknownScenario"
        assert (await send({"type": "reset", "data": {"scenario": SCENARIO, "seeds": 1}})
                )["data"]["error"]["field"] == "data.seeds"
        reset = await send({"type": "reset", "data": {"scenario": SCENARIO}})
        assert reset["type"] == "observation" and reset["data"]["done"] is False
        assert (await send({"type": "dance"}))["data"]["code"] == "UNKNOWN_TYPE"
        await ws.send("{oops")
        assert json.loads(await ws.recv())["data"]["code"] == "INVALID_JSON"
        await ws.send(json.dumps({"type": "state"}).encode())  # a binary frame reads as text
        assert json.loads(await ws.recv())["data"]["scenario"] == SCENARIO
        huge = await send({"type": "step", "data": {"type": "call_tool", "tool_name": "get_member",
                                                    "arguments": {"member_id": "M" * 5_000_000}}})
        assert "ENVSCALER_MAX_REQUEST_BYTES" in huge["data"]["message"]
        step = await send({"type": "step", "data": {"type": "call_tool", "tool_name": "get_member",
                                                    "arguments": {"member_id": "M-1001"}}})
        assert step["data"]["observation"]["result"]["data"]["member_id"] == "M-1001"
        # a reset after the session ended (closed here; expired alike) opens a new one
        ended = (await send({"type": "state"}))["data"]["episode_id"]
        assert (await admin.delete(f"/v1/sessions/{ended}")).status_code == 200
        closed = await send({"type": "step", "data": {"type": "call_tool", "tool_name": "x"}})
        assert closed["data"]["observation"]["error"]["message"].startswith("SessionClosed")
        assert (await send({"type": "reset", "data": {"scenario": SCENARIO}}))["type"] == (
            "observation")
        renewed = (await send({"type": "state"}))["data"]
        assert renewed["episode_id"] != ended and renewed["status"] == "active"
    await closes(admin, renewed["episode_id"])  # with its socket


# ---------------------------------------------------------------- ORS


async def test_ors_clients_solve_a_scenario_and_get_bad_calls_back_as_errors(
        gateway: GatewayProcess) -> None:
    reference = scenario(SCENARIO)
    solution = reference["solution"]
    seen = await run_client(ORS_PYTHON, FIXTURES / "ors" / "client.py", gateway.url, API_KEY,
                            LIBRARY, SCENARIO, "0", json.dumps(solution))  # train's first task
    tools = [t["function"]["name"] for t in json.loads(
        (REPO_ROOT / "generated_envs" / LIBRARY / "env.json").read_text())["tools"]]
    checks = len(reference["checklist"])

    sdk = seen["ors_sdk"]
    assert sdk["splits"] == ["train", "rl", "eval"] and sdk["num_tasks"] == 2
    assert sdk["tasks"][0] == sdk["first"] == sdk["range"][0] == {
        "env": LIBRARY, "scenario": SCENARIO, "seed": 0}
    assert sdk["tools"] == sdk["session_tools"] == [*tools, "submit"]
    assert sdk["prompt"] == [reference["task"]]
    assert all(o["finished"] is False and o["reward"] is None for o in sdk["outputs"])
    assert all(json.loads(o["text"][0])["success"] for o in sdk["outputs"]), sdk["outputs"]
    assert json.loads(sdk["outputs"][0]["text"][0])["data"]["member_id"] == "M-1001"
    unknown, bad_input = sdk["refused"]
    assert "UnknownTool" in unknown and "InvalidArguments" in bad_input, sdk["refused"]
    assert sdk["submit"]["reward"] == 1.0 and sdk["submit"]["finished"] is True
    assert sdk["submit"]["metadata"] == {"reward": 1.0, "passed": checks, "total": checks}
    assert "SessionClosed" in sdk["after_submit"], sdk["after_submit"]

    rewarded = seen["openreward"]
    assert rewarded["splits"] == ["train", "rl", "eval"] and rewarded["num_tasks"] == 2
    assert rewarded["terminal_tool"] == "submit"
    assert rewarded["prompt"] == [reference["task"]]
    assert rewarded["session_tools"] == [*tools, "submit"]
    assert all(json.loads(o["text"][0])["success"] for o in rewarded["outputs"])
    assert [r["reason"] for r in rewarded["refused"]] == ["not_found", "input_validation"]
    assert rewarded["final"] is True
    assert rewarded["submit"]["reward"] == 1.0 and rewarded["submit"]["finished"] is True


async def test_ors_refusals_resume_and_deployment_routing(
        gateway: GatewayProcess, admin: httpx.AsyncClient) -> None:
    key = {"X-API-Key": API_KEY}
    async with httpx.AsyncClient(base_url=gateway.url, headers=key, timeout=scaled(60)) as client:
        assert (await client.get("/list_environments", headers={"X-API-Key": "wrong"})
                ).status_code == 401
        assert LIBRARY in (await client.get("/list_environments")).json()
        bare = await client.get("/tools")
        assert bare.status_code == 422 and bare.json()["error"]["field"] == "X-Deployment"
        routed = (await client.get("/tools", headers={"X-Deployment": LIBRARY})).json()
        assert routed == (await client.get(f"/{LIBRARY}/tools")).json()
        assert routed["terminal_tool"]["name"] == "submit"

        created = await client.post("/create_session", json={})
        events = created.text.split("\n\n")
        assert events[0].startswith("event: task_id\ndata: ") and events[1] == "event: end\ndata: "
        sid = {"X-Session-ID": events[0].rsplit(" ", 1)[1]}
        missing = await client.post("/create", headers=sid,
                                    json={"task_spec": {"scenario": "library_loans-999"},
                                          "env_name": LIBRARY})
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "UnknownScenario"
        leaky = await client.post("/create", headers=sid, json={
            "task_spec": {"scenario": SCENARIO, "solution": []}, "env_name": LIBRARY})
        assert leaky.status_code == 422 and leaky.json()["error"]["field"] == "task_spec.solution"
        by_index = {"split": "train", "index": 0}
        made = await client.post("/create", headers={**sid, "X-Deployment": LIBRARY},
                                 json=by_index)
        assert made.status_code == 200, made.text
        again = await client.post("/create", headers={**sid, "X-Deployment": LIBRARY},
                                  json=by_index)
        assert again.status_code == 422 and "exists already" in again.text
        assert (await client.post("/ping", headers=sid)).json() == {"status": "ok"}

        call = {"name": "get_member", "input": {"member_id": "M-1001"}, "task_id": "resumed-1"}
        first = await client.post("/call", headers={**sid, "X-Deployment": LIBRARY}, json=call)
        resumed = await client.post(f"/{LIBRARY}/call", headers=sid, json=call)
        assert _answer(first.text) == _answer(resumed.text)
        assert _answer(first.text)["ok"] is True

        deleted = await client.post("/delete", headers=sid)
        assert deleted.json() == {"sid": sid["X-Session-ID"]}
        closed = _answer((await client.post(f"/{LIBRARY}/call", headers=sid, json={
            "name": "get_member", "input": {"member_id": "M-1001"}})).text)
        assert closed == {"ok": False, "reason": "episode_finished", "error": closed["error"]}
        unknown = await client.post(f"/{LIBRARY}/call", headers={"X-Session-ID": "Q" * 24},
                                    json={"name": "get_member", "input": {}})
        assert unknown.status_code == 404

        # a tool's own failure is an output the policy reads; the session goes on
        other = {"X-Session-ID": "R" * 24}
        assert (await client.post("/create", headers=other, json={
            "env_name": COUNTER, "task_spec": {"scenario": "counter-1"}})).status_code == 200
        failed = _answer((await client.post(f"/{COUNTER}/call", headers=other, json={
            "name": "explode", "input": {"message": "the shelf fell"}})).text)
        assert failed["ok"] is True and failed["output"]["finished"] is False
        assert failed["output"]["metadata"]["error"]["type"] == "ToolException"
        assert "the shelf fell" in failed["output"]["blocks"][0]["text"]
        counted = _answer((await client.post(f"/{COUNTER}/call", headers=other, json={
            "name": "increment", "input": {"name": "a"}})).text)
        data = json.loads(counted["output"]["blocks"][0]["text"])["data"]
        assert data["value"] == data["before"] + 1
        await client.post("/delete", headers=other)


def _answer(stream: str) -> dict[str, Any]:
    """The JSON of a call's events: its ``chunk``s and ``end`` joined."""
    data = [line[len("data: "):] for line in stream.split("\n") if line.startswith("data: ")]
    events = [line for line in stream.split("\n") if line.startswith("event: ")]
    assert events[0] == "event: task_id" and events[-1] == "event: end", stream
    return json.loads("".join(data[1:]))


async def test_ors_ping_keeps_a_session_alive(make_settings: Callable[..., Settings]) -> None:
    """The client pings every 10 s while its policy thinks: that is activity, as a call is."""
    async with running_gateway(make_settings(session_ttl=10.0)) as (app, client):
        sids = []
        for _ in range(2):
            sid = {"X-Session-ID": (await client.post("/create_session", json={})
                                    ).text.split("\n")[1].removeprefix("data: ")}
            made = await client.post("/create", headers=sid, json={
                "env_name": COUNTER, "task_spec": {"scenario": "counter-1"}})
            assert made.status_code == 200, made.text
            sids.append(sid)
        pinged, idle = sids
        for _ in range(12):  # past the session TTL, a ping a second
            assert (await client.post("/ping", headers=pinged)).json() == {"status": "ok"}
            await asyncio.sleep(1.0)
        await app.state.service.expire_idle()
        assert (await client.post("/ping", headers=pinged)).status_code == 200
        expired = await client.post("/ping", headers=idle)
        assert expired.status_code == 410 and expired.json()["error"]["type"] == "SessionExpired"
        answer = _answer((await client.post(f"/{COUNTER}/call", headers=pinged, json={
            "name": "increment", "input": {"name": "a"}})).text)
        assert answer["ok"] is True and answer["output"]["metadata"] == {}
