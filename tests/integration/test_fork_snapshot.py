"""Fork and snapshot: new sessions at exactly another session's point, on real Redis and real
sandboxes. A point covers the state, the epoch and step, the episode's trajectory, the virtual
clock and the seeded generators: the next call of every copy answers what the original's
answers, and from then on each goes its own way."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.gateway_fixtures import COUNTER, build_catalogue, running_gateway

LOCKBOX = "lockbox"
LOCKBOX_SOURCE = '''\
import random
import threading


class Lockbox:
    def __init__(self, init_config: dict):
        self.items = {}
        self._guard = threading.Lock()  # pickle cannot copy a lock: forks are replayed

    def put(self, key: str) -> dict:
        """Store a random value under a key.

        Args:
            key (str): The key.

        Returns:
            dict: {"success": True, "data": value}.
        """
        with self._guard:
            self.items[key] = random.random()
        return {"success": True, "data": self.items[key]}
'''


@pytest.fixture(scope="module")
def fork_catalogue(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from envscaler.format import sync_manifest

    root = build_catalogue(tmp_path_factory.mktemp("fork") / "envs")
    env_dir = root / LOCKBOX
    shutil.copytree(root / COUNTER, env_dir)
    (env_dir / "env.py").write_text(LOCKBOX_SOURCE)
    manifest = json.loads((env_dir / "env.json").read_text())
    manifest.update(id=LOCKBOX, class_name="Lockbox",
                    operations=[{"name": "put", "description": "put", "type": "state_change"}])
    (env_dir / "env.json").write_text(json.dumps(manifest))
    (env_dir / "scenarios.jsonl").write_text(json.dumps({
        "id": "lockbox-1", "split": "rl", "task": "Put a.", "init_config": {},
        "checklist": [{"item": "Has a been put?",
                       "check_func": "def check_func(final_state):\n    return 'a' in "
                                     "final_state['items']\n"}],
        "solution": [{"name": "put", "arguments": {"key": "a"}}]}) + "\n")
    sync_manifest(env_dir)
    return root


async def post(client, path: str, body: dict | None = None, status: int = 200) -> dict:  # type: ignore[no-untyped-def]
    response = await client.post(path, json=body or {})
    assert response.status_code == status, response.text[:800]
    return response.json()


async def call(client, session_id: str, tool: str, **arguments) -> dict:  # type: ignore[no-untyped-def]
    answer = await post(client, f"/v1/sessions/{session_id}/calls",
                        {"name": tool, "arguments": arguments})
    return {key: answer[key] for key in ("ok", "result", "index")}


async def state(client, session_id: str) -> dict:  # type: ignore[no-untyped-def]
    return (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"]


async def test_forks_continue_exactly_where_the_parent_is(make_settings, fork_catalogue) -> None:
    async with running_gateway(make_settings(catalogue=fork_catalogue)) as (_, client):
        parent = (await post(client, "/v1/sessions", {"env": COUNTER, "scenario": "counter-1",
                                                       "seed": 7}, 201))["session_id"]
        await call(client, parent, "increment", name="a", by=2)
        await call(client, parent, "token")
        forked = await post(client, f"/v1/sessions/{parent}/fork", {"count": 3}, 201)
        forks = [s["session_id"] for s in forked["sessions"]]
        assert forked["parent"] == parent and len(set(forks)) == 3 and parent not in forks
        assert {(s["epoch"], s["step"], s["task"]) for s in forked["sessions"]} == {
            (0, 2, "Bring counter a to 3 and create counter b.")}
        parent_trajectory = (await client.get(f"/v1/sessions/{parent}/trajectory")).json()
        for fork in forks:  # each on a sandbox of its own that imported the point: no replay
            info = (await client.get(f"/v1/sessions/{fork}")).json()
            assert info["sandbox_id"] is not None and info["calls"] == 2
        for fork in forks:
            assert await state(client, fork) == await state(client, parent)
            trajectory = (await client.get(f"/v1/sessions/{fork}/trajectory")).json()
            assert trajectory["entries"] == parent_trajectory["entries"]

        # The next call (uuid, random number, virtual time) answers as the parent's does.
        expected = await call(client, parent, "token")
        for fork in forks:
            assert await call(client, fork, "token") == expected

        # From here on, each is its own: a call in one changes neither parent nor siblings.
        await call(client, forks[0], "increment", name="b")
        assert "b" not in (await state(client, parent))["counters"]
        assert "b" not in (await state(client, forks[1]))["counters"]
        rewards = [(await post(client, f"/v1/sessions/{s}/validate"))["reward"]
                   for s in (parent, forks[0], forks[1])]
        assert rewards == [0.5, 1.0, 0.5]

        # A fork's agent token is its own, and reaches only its session.
        token = forked["sessions"][1]["agent_token"]
        headers = {"Authorization": f"Bearer {token}"}
        own = await client.post(f"/v1/sessions/{forks[1]}/calls", headers=headers,
                                json={"name": "increment", "arguments": {"name": "c"}})
        assert own.status_code == 200, own.text
        other = await client.post(f"/v1/sessions/{forks[2]}/calls", headers=headers,
                                  json={"name": "increment", "arguments": {"name": "c"}})
        assert other.status_code in (401, 403)


async def test_a_point_pickle_cannot_copy_is_replayed(make_settings, fork_catalogue) -> None:
    async with running_gateway(make_settings(catalogue=fork_catalogue)) as (_, client):
        parent = (await post(client, "/v1/sessions", {"env": LOCKBOX, "scenario": "lockbox-1",
                                                       "seed": 3}, 201))["session_id"]
        await call(client, parent, "put", key="a")
        fork = (await post(client, f"/v1/sessions/{parent}/fork", {}, 201))["sessions"][0]
        assert fork["step"] == 1
        info = (await client.get(f"/v1/sessions/{fork['session_id']}")).json()
        assert info["sandbox_id"] is None  # rebuilt by replay at its first request
        assert await state(client, fork["session_id"]) == await state(client, parent)
        assert await call(client, fork["session_id"], "put", key="b") == await call(
            client, parent, "put", key="b")


async def test_a_snapshot_opens_anywhere_at_its_point(make_settings, fork_catalogue) -> None:
    settings = make_settings(catalogue=fork_catalogue)
    async with running_gateway(settings) as (_, client):
        origin = (await post(client, "/v1/sessions", {"env": COUNTER, "scenario": "counter-2",
                                                       "seed": 1}, 201))["session_id"]
        await call(client, origin, "token")
        taken = await post(client, f"/v1/sessions/{origin}/snapshot", {}, 201)
        again = await post(client, f"/v1/sessions/{origin}/snapshot", {}, 201)
        assert taken["snapshot_id"] == again["snapshot_id"]  # stored once, by content
        assert (taken["epoch"], taken["step"]) == (0, 1) and taken["expires_in"] > 0
        expected = await call(client, origin, "token")
        await post(client, f"/v1/sessions/{origin}/reset", {})  # the origin moves on

    async with running_gateway(settings) as (_, client):  # another gateway, same Redis
        opened = await post(client, "/v1/sessions", {"snapshot": taken["snapshot_id"]}, 201)
        assert (opened["env"], opened["scenario"], opened["step"]) == (COUNTER, "counter-2", 1)
        assert await call(client, opened["session_id"], "token") == expected
        second = await post(client, "/v1/sessions", {"snapshot": taken["snapshot_id"],
                                                     "env": COUNTER}, 201)
        assert await call(client, second["session_id"], "token") == expected


async def test_fork_and_snapshot_refuse_bad_input_clearly(make_settings, fork_catalogue) -> None:
    async with running_gateway(make_settings(catalogue=fork_catalogue)) as (_, client):
        session = (await post(client, "/v1/sessions", {"env": COUNTER, "scenario": "counter-1"},
                              201))["session_id"]
        for count in (0, 65, "8"):
            answer = await post(client, f"/v1/sessions/{session}/fork", {"count": count}, 422)
            assert answer["error"]["field"].endswith("count")
        assert (await post(client, "/v1/sessions/no-such-session/fork", {}, 404)
                )["error"]["type"] == "UnknownSession"
        unknown = "0" * 64
        assert (await post(client, "/v1/sessions", {"snapshot": unknown}, 404)
                )["error"]["type"] == "UnknownSnapshot"
        await post(client, "/v1/sessions", {"snapshot": "not-hex"}, 422)
        taken = await post(client, f"/v1/sessions/{session}/snapshot", {}, 201)
        both = await post(client, "/v1/sessions", {"snapshot": taken["snapshot_id"],
                                                   "scenario": "counter-1"}, 422)
        assert "snapshot" in both["error"]["message"]
        other_env = await post(client, "/v1/sessions", {"snapshot": taken["snapshot_id"],
                                                        "env": LOCKBOX}, 422)
        assert other_env["error"]["field"] == "env"
        await client.delete(f"/v1/sessions/{session}")
        assert (await post(client, f"/v1/sessions/{session}/fork", {}, 409)
                )["error"]["type"] == "SessionClosed"
