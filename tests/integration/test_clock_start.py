"""Where the virtual clock starts: the scenario's ``clock_start``, else the environment's
(env.json), else the default; a reset into another scenario moves it, a rebuild keeps it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envscaler.format import load_env, sync_manifest
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.gateway_fixtures import kill_sandbox, running_gateway, sandbox_handle

ENV = "dated_desk"
SOURCE = '''\
from datetime import datetime


class DatedDesk:
    def __init__(self, init_config):
        self.opened = datetime.now().isoformat()

    def today(self) -> dict:
        """The date of today, as the environment sees it."""
        return {"success": True, "data": datetime.now().date().isoformat()}
'''
CHECK = "def check_func(final_state):\n    return True\n"


def scenario(scenario_id: str, clock_start: str | None = None) -> dict:
    line = {"id": scenario_id, "split": "eval", "task": "Say what day it is.", "init_config": {},
            "checklist": [{"item": "Has it been said?", "check_func": CHECK}]}
    return line if clock_start is None else {**line, "clock_start": clock_start}


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("clock") / "envs"
    env_dir = root / ENV
    env_dir.mkdir(parents=True)
    (env_dir / "env.py").write_text(SOURCE)
    manifest = {
        "id": ENV, "class_name": "DatedDesk", "summary": "A desk that knows the date.",
        "introduction": "Answers with today's date.", "state_space": [], "constraint_rules": [],
        "operations": [{"name": "today", "description": "today", "type": "query"}],
        "tools": [], "clock_start": "2024-06-01T08:00:00Z",
        "provenance": {"model": "hand-written", "created": "2025-01-01",
                       "pipeline_version": "test", "content_hash": "sha256:" + "0" * 64},
    }
    (env_dir / "env.json").write_text(json.dumps(manifest))
    lines = [scenario("own-date", "2023-02-03T10:00:00"), scenario("env-date")]
    (env_dir / "scenarios.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    sync_manifest(env_dir)
    assert json.loads((env_dir / "env.json").read_text())["clock_start"] == "2024-06-01T08:00:00Z"
    load_env(env_dir)
    return root


async def today(client, session_id: str) -> str:  # type: ignore[no-untyped-def]
    response = await client.post(f"/v1/sessions/{session_id}/calls",
                                 json={"name": "today", "arguments": {}})
    return response.json()["result"]["data"]


async def test_the_clock_starts_where_the_scenario_or_the_environment_says(
        make_settings, redis_client, catalogue: Path) -> None:
    settings = make_settings(catalogue=catalogue)
    async with running_gateway(settings) as (_, client):
        detail = (await client.get(f"/v1/envs/{ENV}/scenarios/own-date")).json()
        assert detail["clock_start"] == "2023-02-03T10:00:00"
        assert (await client.get(f"/v1/envs/{ENV}")).json()["clock_start"] == (
            "2024-06-01T08:00:00Z")

        created = await client.post("/v1/sessions", json={"env": ENV, "scenario": "own-date"})
        session_id = created.json()["session_id"]
        state = (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"]
        assert state["opened"].startswith("2023-02-03T10:00:00")
        assert await today(client, session_id) == "2023-02-03"

        await client.post(f"/v1/sessions/{session_id}/reset", json={"scenario": "env-date"})
        assert await today(client, session_id) == "2024-06-01"

        custom = await client.post("/v1/sessions", json={"env": ENV, "init_config": {}})
        assert await today(client, custom.json()["session_id"]) == "2024-06-01"

        await client.post(f"/v1/sessions/{session_id}/reset", json={"scenario": "own-date"})
        before = (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"]
        kill_sandbox(sandbox_handle(redis_client, session_id), Path(settings.socket_root))
        after = (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"]
        assert after == before and after["opened"].startswith("2023-02-03T10:00:00")
