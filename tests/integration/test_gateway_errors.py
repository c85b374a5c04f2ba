"""Every error status of the gateway, each with its stable ``type`` and the documented shape."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

from envscaler.server.store import calls_key, live_key, session_key
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.gateway_fixtures import (
    COUNTER,
    LIBRARY,
    running_gateway,
    sandbox_alive,
    sandbox_released,
    sandbox_handle,
)

UNKNOWN_SESSION = "A" * 24


def assert_error(response, status: int, error_type: str, field: str | None = None) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.text
    body = response.json()
    assert body["ok"] is False and set(body) == {"ok", "error"}, body
    assert body["error"]["type"] == error_type, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert "Traceback" not in response.text
    if field is not None:
        assert body["error"].get("field") == field, body
    return body["error"]


async def new_session(client, env: str = COUNTER, **body) -> str:  # type: ignore[no-untyped-def]
    response = await client.post("/v1/sessions", json={"env": env, **body})
    assert response.status_code == 201, response.text
    return response.json()["session_id"]


async def test_not_found_errors(make_settings) -> None:
    async with running_gateway(make_settings()) as (_, client):
        assert_error(
            await client.post("/v1/sessions", json={"env": "no_such_env"}), 404, "UnknownEnv"
        )
        assert_error(await client.get("/v1/envs/no_such_env"), 404, "UnknownEnv")
        assert_error(await client.get("/v1/envs/no_such_env/scenarios"), 404, "UnknownEnv")
        assert_error(
            await client.post("/v1/sessions", json={"env": COUNTER, "scenario": "nope"}),
            404,
            "UnknownScenario",
        )
        for method, suffix in [
            ("GET", ""),
            ("GET", "/tools"),
            ("GET", "/state"),
            ("GET", "/trajectory"),
            ("POST", "/reset"),
            ("POST", "/validate"),
            ("DELETE", ""),
        ]:
            for session_id in (UNKNOWN_SESSION, "bad.id!", "x"):
                response = await client.request(method, f"/v1/sessions/{session_id}{suffix}")
                assert_error(response, 404, "UnknownSession")
        assert_error(
            await client.post(f"/v1/sessions/{UNKNOWN_SESSION}/calls", json={"name": "increment"}),
            404,
            "UnknownSession",
        )
        session_id = await new_session(client, scenario="counter-1")
        assert_error(
            await client.post(f"/v1/sessions/{session_id}/calls", json={"name": "no_such_tool"}),
            404,
            "UnknownTool",
        )
        assert_error(
            await client.post(f"/v1/sessions/{session_id}/calls", json={"name": "__init__"}),
            404,
            "UnknownTool",
        )
        assert_error(await client.get("/v1/nothing/here"), 404, "NotFound")
        assert (await client.get(f"/v1/sessions/{session_id}/trajectory")).json()["entries"] == []


async def test_invalid_arguments_name_the_field_and_are_not_recorded(make_settings) -> None:
    async with running_gateway(make_settings()) as (_, client):
        session_id = await new_session(client, LIBRARY, scenario="library_loans-001")
        url = f"/v1/sessions/{session_id}/calls"
        error = assert_error(
            await client.post(url, json={"name": "get_member", "arguments": {"member_id": 42}}),
            422,
            "InvalidArguments",
            field="member_id",
        )
        assert error["message"] == "member_id: 42 is not of type 'string'"
        error = assert_error(
            await client.post(
                url, json={"name": "checkout_book", "arguments": {"member_id": "M-1"}}
            ),
            422,
            "InvalidArguments",
            field="book_id",
        )
        assert "required" in error["message"]
        assert_error(
            await client.post(
                url, json={"name": "get_member", "arguments": {"member_id": "M", "x": 1}}
            ),
            422,
            "InvalidArguments",
            field="x",
        )
        error = assert_error(
            await client.post(
                url,
                json={"name": "search_books", "arguments": {"query": "a", "field": "everything"}},
            ),
            422,
            "InvalidArguments",
            field="field",
        )
        assert "everything" in error["message"]
        assert_error(
            await client.post(url, json={"name": "get_member", "arguments": "{not json"}),
            422,
            "InvalidArguments",
            field="arguments",
        )
        assert_error(
            await client.post(url, json={"name": "get_member", "arguments": "[1, 2]"}),
            422,
            "InvalidArguments",
            field="arguments",
        )
        assert_error(
            await client.post(
                url,
                json={
                    "name": "pay_fines",
                    "arguments": '{"member_id": "M-1001", "amount": "lots"}',
                },
            ),
            422,
            "InvalidArguments",
            field="amount",
        )
        # nothing rejected reached the sandbox or the trajectory
        assert (await client.get(f"/v1/sessions/{session_id}/trajectory")).json()["entries"] == []
        assert (await client.get(f"/v1/sessions/{session_id}")).json()["step"] == 0


async def test_malformed_requests_are_invalid_request_with_the_field(make_settings) -> None:
    async with running_gateway(make_settings()) as (_, client):
        assert_error(
            await client.post("/v1/sessions", json={"env": COUNTER, "seed": -1}),
            422,
            "InvalidRequest",
            field="body.seed",
        )
        assert_error(
            await client.post("/v1/sessions", json={}), 422, "InvalidRequest", field="body.env"
        )
        assert_error(
            await client.post("/v1/sessions", json={"env": COUNTER, "colour": "red"}),
            422,
            "InvalidRequest",
            field="body.colour",
        )
        assert_error(
            await client.post(
                "/v1/sessions", content=b"{not json", headers={"content-type": "application/json"}
            ),
            422,
            "InvalidRequest",
        )
        assert_error(
            await client.post(
                "/v1/sessions", json={"env": COUNTER, "scenario": "counter-1", "init_config": {}}
            ),
            422,
            "InvalidRequest",
            field="init_config",
        )
        assert_error(
            await client.post(
                "/v1/sessions", json={"env": COUNTER, "init_config": {"__class__": 5}}
            ),
            422,
            "InvalidRequest",
            field="init_config",
        )
        session_id = await new_session(client, scenario="counter-1")
        assert_error(
            await client.post(f"/v1/sessions/{session_id}/calls", json={"arguments": {}}),
            422,
            "InvalidRequest",
            field="body.name",
        )
        assert_error(
            await client.post(
                f"/v1/sessions/{session_id}/calls", json={"name": "increment", "arguments": 5}
            ),
            422,
            "InvalidRequest",
        )
        assert_error(
            await client.post(f"/v1/sessions/{session_id}/reset", json={"seed": "x"}),
            422,
            "InvalidRequest",
            field="body.seed",
        )
        assert_error(
            await client.get(f"/v1/envs/{COUNTER}/scenarios", params={"split": "nope"}),
            422,
            "InvalidRequest",
            field="query.split",
        )
        assert_error(await client.put("/v1/sessions"), 405, "MethodNotAllowed")


async def test_tool_errors_are_answers_not_failures(make_settings) -> None:
    async with running_gateway(make_settings(max_result_bytes=2048)) as (_, client):
        session_id = await new_session(client, scenario="counter-1")
        url = f"/v1/sessions/{session_id}/calls"
        response = await client.post(
            url, json={"name": "explode", "arguments": {"message": "boom"}}
        )
        assert response.status_code == 200
        body = response.json()
        assert body["ok"] is False and body["error"]["type"] == "ToolException"
        assert "ValueError" in body["error"]["message"] and "boom" in body["error"]["message"]
        response = await client.post(url, json={"name": "blob", "arguments": {"size": 10_000}})
        assert response.status_code == 200 and response.json()["error"]["type"] == "ResultTooLarge"
        small = await client.post(url, json={"name": "blob", "arguments": {"size": 10}})
        assert small.json() == {
            "ok": True,
            "result": {"success": True, "data": "x" * 10},
            "index": 2,
            "call_id": None,
            "duplicate": False,
            "duration_ms": small.json()["duration_ms"],
        }
        entries = (await client.get(f"/v1/sessions/{session_id}/trajectory")).json()["entries"]
        assert [(e["ok"], (e["error"] or {}).get("type"), e["replay"]) for e in entries] == [
            (False, "ToolException", True),
            (False, "ResultTooLarge", True),
            (True, None, True),
        ]
        state = (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"]
        assert state["history"] == ["explode:boom", "blob:10000", "blob:10"]


async def test_deadline_answers_504_and_the_session_stays_usable(
    make_settings, redis_client
) -> None:
    settings = make_settings(call_timeout=1.0)
    async with running_gateway(settings) as (_, client):
        session_id = await new_session(client, scenario="counter-1")
        url = f"/v1/sessions/{session_id}/calls"
        assert (
            await client.post(url, json={"name": "increment", "arguments": {"name": "a"}})
        ).status_code == 200
        handle = sandbox_handle(redis_client, session_id)
        started = time.monotonic()
        response = await client.post(
            url, json={"name": "spin", "arguments": {}, "call_id": "spin-1"}
        )
        assert time.monotonic() - started < 5
        error = assert_error(response, 504, "Timeout")
        assert "deadline" in error["message"]
        assert not sandbox_alive(handle, Path(settings.socket_root))  # a stuck sandbox is killed

        # The session goes on from its state before the call (rebuilt by replay).
        after = await client.post(url, json={"name": "increment", "arguments": {"name": "a"}})
        assert after.status_code == 200
        assert after.json()["result"]["data"] == {"name": "a", "before": 2, "value": 3}
        state = (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"]
        assert state["history"] == ["a:1->2", "a:2->3"]
        entries = (await client.get(f"/v1/sessions/{session_id}/trajectory")).json()["entries"]
        assert [(e["name"], e["ok"], e["replay"]) for e in entries] == [
            ("increment", True, True),
            ("spin", False, False),
            ("increment", True, True),
        ]
        assert entries[1]["error"]["type"] == "Timeout"
        # A retry of the timed-out call returns its recorded answer at once; it does not run again.
        started = time.monotonic()
        retry = await client.post(url, json={"name": "spin", "arguments": {}, "call_id": "spin-1"})
        assert_error(retry, 504, "Timeout")
        assert time.monotonic() - started < 0.9
        assert (
            len((await client.get(f"/v1/sessions/{session_id}/trajectory")).json()["entries"]) == 3
        )


async def test_capacity_exhausted_429_with_retry_after_then_free_again(make_settings) -> None:
    async with running_gateway(make_settings(max_sandboxes=1, pool_size=0)) as (_, client):
        first = await new_session(client, scenario="counter-1")
        started = time.monotonic()
        response = await client.post("/v1/sessions", json={"env": COUNTER, "scenario": "counter-1"})
        assert time.monotonic() - started < 2  # never a hang
        assert_error(response, 429, "CapacityExhausted")
        assert int(response.headers["Retry-After"]) >= 1
        assert (await client.delete(f"/v1/sessions/{first}")).status_code == 200
        await new_session(client, scenario="counter-1")


async def test_an_engine_busy_past_the_start_timeout_503_with_retry_after(
        make_settings, monkeypatch) -> None:
    """Opens wait for a creation, but not for ever: one that gets no sandbox within twice the
    start timeout (the engine's only creation hangs) is refused, clearly, and may retry."""
    settings = make_settings(sandbox_create_concurrency=1, pool_size=0)
    async with running_gateway(settings) as (app, client):
        pool = app.state.pool
        monkeypatch.setattr(pool, "config", dataclasses.replace(pool.config, start_timeout=0.2))
        engine_answers = asyncio.Event()
        create_runtimes = pool.backend.create_runtimes

        async def hanging(*args: Any, **kwargs: Any) -> Any:
            await engine_answers.wait()
            return await create_runtimes(*args, **kwargs)

        monkeypatch.setattr(pool.backend, "create_runtimes", hanging)
        try:
            response = await client.post("/v1/sessions",
                                         json={"env": COUNTER, "scenario": "counter-1"})
        finally:
            engine_answers.set()
        error = assert_error(response, 503, "CapacityExhausted")
        assert "busy creating sandboxes" in error["message"]
        assert int(response.headers["Retry-After"]) >= 1
        await new_session(client, scenario="counter-1")  # the creation ended: served


async def test_backend_that_cannot_create_sandboxes_503(make_settings, tmp_path) -> None:
    too_long = tmp_path / ("s" * 120)  # a Unix socket path cannot be this long
    too_long.mkdir()
    async with running_gateway(make_settings(socket_root=too_long, pool_size=0)) as (_, client):
        response = await client.post("/v1/sessions", json={"env": COUNTER, "scenario": "counter-1"})
        assert_error(response, 503, "BackendUnavailable")
        assert int(response.headers["Retry-After"]) >= 1


async def test_idle_sessions_expire_410_but_stay_readable(make_settings, redis_client) -> None:
    settings = make_settings(session_ttl=1.0, record_ttl=600.0)
    async with running_gateway(settings) as (_, client):
        session_id = await new_session(client, scenario="counter-1")
        url = f"/v1/sessions/{session_id}/calls"
        await client.post(url, json={"name": "increment", "arguments": {"name": "a", "by": 2}})
        before = (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"]
        handle = sandbox_handle(redis_client, session_id)
        deadline = time.monotonic() + scaled(10)
        while (await client.get(f"/v1/sessions/{session_id}")).json()["status"] != "expired":
            assert time.monotonic() < deadline, "the session never expired"
            await asyncio.sleep(0.1)
        # in a thread: the gateway recycles it on this event loop meanwhile
        assert await asyncio.to_thread(sandbox_released, handle, Path(settings.socket_root))
        assert redis_client.zscore(live_key(session_id), session_id) is None
        assert 0 < redis_client.ttl(session_key(session_id)) <= 601
        assert 0 < redis_client.ttl(calls_key(session_id)) <= 601

        assert_error(
            await client.post(url, json={"name": "increment", "arguments": {"name": "a"}}),
            410,
            "SessionExpired",
        )
        assert_error(await client.post(f"/v1/sessions/{session_id}/reset"), 410, "SessionExpired")
        # state, trajectory and validation still answer (by replay on a temporary sandbox)
        assert (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"] == before
        assert (
            len((await client.get(f"/v1/sessions/{session_id}/trajectory")).json()["entries"]) == 1
        )
        validation = (await client.post(f"/v1/sessions/{session_id}/validate")).json()
        assert (validation["passed"], validation["total"]) == (1, 2)
        assert (await client.get(f"/v1/sessions/{session_id}")).json()["status"] == "expired"
        deleted = await client.delete(f"/v1/sessions/{session_id}")
        assert deleted.status_code == 200 and deleted.json()["status"] == "closed"


async def test_busy_session_answers_503_session_busy_instead_of_waiting_forever(
    make_settings,
) -> None:
    async with running_gateway(make_settings(session_lock_wait=0.3, call_timeout=5.0)) as (
        _,
        client,
    ):
        session_id = await new_session(client, scenario="counter-1")
        url = f"/v1/sessions/{session_id}/calls"
        slow = asyncio.create_task(
            client.post(url, json={"name": "nap", "arguments": {"seconds": 1.5}})
        )
        await asyncio.sleep(0.3)
        started = time.monotonic()
        response = await client.post(url, json={"name": "increment", "arguments": {"name": "a"}})
        assert time.monotonic() - started < 1.0
        assert_error(response, 503, "SessionBusy")
        assert int(response.headers["Retry-After"]) >= 1
        assert (await slow).status_code == 200
        entries = (await client.get(f"/v1/sessions/{session_id}/trajectory")).json()["entries"]
        assert [e["name"] for e in entries] == ["nap"]


async def test_internal_errors_are_500_without_details(make_settings, caplog) -> None:
    async with running_gateway(make_settings()) as (app, client):

        async def broken(*_args, **_kwargs):  # type: ignore[no-untyped-def]
            raise RuntimeError("secret detail of a bug")

        app.state.service.trajectory = broken
        response = await client.get(f"/v1/sessions/{UNKNOWN_SESSION}/trajectory")
        assert_error(response, 500, "InternalError")
        assert "secret detail" not in response.text
        assert any(
            "secret detail" in record.getMessage() or record.exc_info for record in caplog.records
        )


async def test_a_state_over_the_limit_answers_409_and_the_session_goes_on(make_settings) -> None:
    """The cap is the gateway's (environment code cannot patch it): a state that grew past it is
    refused unread, for reading and for validation alike, and nothing else about the session
    changes."""
    async with running_gateway(make_settings(max_state_bytes=1024)) as (_, client):
        session_id = await new_session(client, COUNTER, scenario="counter-1")
        for number in range(4):  # each counter's name is in the state twice (counters, history)
            grown = await client.post(f"/v1/sessions/{session_id}/calls", json={
                "name": "increment", "arguments": {"name": f"{number}" * 2000}})
            assert grown.json()["ok"] is True
        for method, suffix in [("GET", "/state"), ("POST", "/validate")]:
            response = await client.request(method, f"/v1/sessions/{session_id}{suffix}")
            message = assert_error(response, 409, "StateTooLarge")["message"]
            assert "ENVSCALER_MAX_STATE_BYTES" in message
        answer = await client.post(f"/v1/sessions/{session_id}/calls",
                                   json={"name": "increment", "arguments": {"name": "a"}})
        assert answer.status_code == 200 and answer.json()["ok"] is True


BROKEN_SOURCE = '''
import json


class Fragile:
    def __init__(self, init_config):
        if init_config.get("broken"):
            raise ValueError("this configuration breaks the constructor")
        self.values = {}

    def put(self, key: str) -> dict:
        """Store a key.

        Args:
            key (str): The key.
        """
        self.values[key] = json.dumps(key)
        return {"success": True}
'''


def broken_catalogue(root: Path) -> Path:
    """``fragile``: scenario ``fragile-2`` breaks its constructor; ``needs_pkg``: imports a
    package the sandbox does not have."""
    import json

    from envscaler.format import sync_manifest

    check = "def check_func(final_state):\n    return 'a' in final_state['values']\n"
    for env_id, source in (("fragile", BROKEN_SOURCE),
                           ("needs_pkg", "import envscaler_missing_pkg\n" + BROKEN_SOURCE)):
        folder = root / env_id
        folder.mkdir(parents=True)
        (folder / "env.py").write_text(source)
        manifest = {"id": env_id, "class_name": "Fragile", "summary": "s", "introduction": "i",
                    "state_space": [], "constraint_rules": [], "operations": [], "tools": [],
                    "provenance": {"model": "m", "created": "2026-01-01",
                                   "pipeline_version": "t", "content_hash": "sha256:" + "0" * 64}}
        (folder / "env.json").write_text(json.dumps(manifest))
        (folder / "scenarios.jsonl").write_text("".join(
            json.dumps({"id": f"{env_id}-{n}", "split": "eval", "task": "Put a.",
                        "init_config": {"broken": n == 2}, "checklist": [
                            {"item": "Has a", "check_func": check}]}) + "\n" for n in (1, 2)))
        sync_manifest(folder)
    return root


async def test_an_environment_that_does_not_load_answers_env_load_failed_with_its_cause(
        make_settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The environment's fault, named with its cause; not the caller's, and not retryable."""
    root = broken_catalogue(tmp_path / "envs")
    async with running_gateway(make_settings(catalogue=root)) as (_, client):
        response = await client.post("/v1/sessions", json={"env": "needs_pkg",
                                                            "scenario": "needs_pkg-1"})
        error = assert_error(response, 500, "EnvLoadFailed")
        assert error["message"].startswith("environment needs_pkg failed to load in its sandbox: "
                                           "ModuleNotFoundError: No module named "
                                           "'envscaler_missing_pkg'"), error
        response = await client.post("/v1/sessions", json={"env": "fragile",
                                                            "scenario": "fragile-2"})
        error = assert_error(response, 500, "EnvLoadFailed")
        assert "ValueError: this configuration breaks the constructor" in error["message"]
        session_id = await new_session(client, env="fragile", scenario="fragile-1")
        response = await client.post(f"/v1/sessions/{session_id}/reset",
                                     json={"scenario": "fragile-2"})
        error = assert_error(response, 500, "EnvLoadFailed")
        assert "ValueError: this configuration breaks the constructor" in error["message"]
