"""Multi-turn scenarios end to end: a scripted user who speaks three times, served by a live
gateway (its turns listed as data, never their reference calls), played by `envscaler rollout
--policy reference`: each turn's calls follow its user message, every call records the turn it
answered, and the final state earns reward 1.0."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from envscaler.cli.main import app
from envscaler_client import EnvClient
from typer.testing import CliRunner

from envscaler.format import load_env, sync_manifest
from tests.integration.live_gateway import LiveGateway, gateway_settings, running_gateway

ENV = "turn_taking_cart"
SOURCE = '''\
class TurnTakingCart:
    def __init__(self, init_config):
        self.items = {}

    def add(self, item: str, quantity: int = 1) -> dict:
        """Put an item in the cart.

        Args:
            item: What to add.
            quantity: How many.
        """
        self.items[item] = self.items.get(item, 0) + quantity
        return {"success": True, "data": dict(self.items)}

    def remove(self, item: str) -> dict:
        """Take an item out of the cart.

        Args:
            item: What to remove.
        """
        if item not in self.items:
            return {"success": False, "error": f"no {item} in the cart"}
        del self.items[item]
        return {"success": True}
'''
CHECK = ("def check_func(final_state):\n"
         "    return final_state['items'] == {'apple': 3, 'pear': 1}\n")
TURNS = [
    {"user": "Put two apples in my cart.",
     "solution": [{"name": "add", "arguments": {"item": "apple", "quantity": 2}}]},
    {"user": "Add a pear and a plum too.",
     "solution": [{"name": "add", "arguments": {"item": "pear"}},
                  {"name": "add", "arguments": {"item": "plum"}}]},
    {"user": "Actually no plum, and one more apple.",
     "solution": [{"name": "remove", "arguments": {"item": "plum"}},
                  {"name": "add", "arguments": {"item": "apple"}}]},
]
SCENARIO = {"id": "cart-3-turns", "split": "eval", "task": TURNS[0]["user"], "init_config": {},
            "checklist": [{"item": "Has the cart three apples and a pear?", "check_func": CHECK}],
            "turns": TURNS}


def write_env(root: Path) -> Path:
    env_dir = root / ENV
    env_dir.mkdir(parents=True)
    (env_dir / "env.py").write_text(SOURCE)
    manifest = {
        "id": ENV, "class_name": "TurnTakingCart", "summary": "A shopping cart.",
        "introduction": "A cart the user fills over several messages.", "state_space": [],
        "constraint_rules": [],
        "operations": [{"name": "add", "description": "add", "type": "state_change"},
                       {"name": "remove", "description": "remove", "type": "state_change"}],
        "tools": [],
        "provenance": {"model": "hand-written", "created": "2025-01-01",
                       "pipeline_version": "test", "content_hash": "sha256:" + "0" * 64},
    }
    (env_dir / "env.json").write_text(json.dumps(manifest))
    (env_dir / "scenarios.jsonl").write_text(json.dumps(SCENARIO) + "\n")
    sync_manifest(env_dir)
    assert load_env(env_dir).scenarios[0].solution is not None  # derived from the turns
    return root


@pytest.fixture(scope="module")
def served(redis_url: str, sandbox_image: str, socket_root: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveGateway]:
    catalogue = write_env(tmp_path_factory.mktemp("multi_turn") / "envs")
    settings = gateway_settings(redis_url, catalogue, sandbox_image, socket_root)
    with running_gateway(settings, catalogue.parent / "gateway.log") as gateway:
        yield gateway


def reference_rollout(gateway: LiveGateway, env: str, out: Path) -> list[dict[str, Any]]:
    """`envscaler rollout --policy reference` on every scenario of ``env``; the episodes."""
    result = CliRunner().invoke(app, [
        "rollout", "--policy", "reference", "--env", env, "--catalogue", str(gateway.catalogue),
        "--out", str(out)], env={"ENVSCALER_URL": gateway.url,
                                 "ENVSCALER_API_KEY": gateway.api_key})
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_scenario_turns_are_served_as_data_without_their_calls(served: LiveGateway) -> None:
    with EnvClient(served.url, served.api_key) as client:
        [listed] = client.scenarios(ENV)
    assert listed.turns == [turn["user"] for turn in TURNS]


def test_the_reference_policy_plays_each_turn_in_order(served: LiveGateway,
                                                       tmp_path: Path) -> None:
    [episode] = reference_rollout(served, ENV, tmp_path / "episodes.jsonl")
    assert episode["termination"] == "completed" and episode["reward"] == 1.0
    assert episode["user_turns"] == [turn["user"] for turn in TURNS]
    assert [(call["user_turn"], call["name"], call["arguments"]) for call in
            episode["tool_calls"]] == [(number, step["name"], step["arguments"])
                                       for number, turn in enumerate(TURNS)
                                       for step in turn["solution"]]
    assert all(call["ok"] for call in episode["tool_calls"])
    users = [message["content"] for message in episode["messages"] if message["role"] == "user"]
    assert users == [turn["user"] for turn in TURNS]
    assert [answer["user_turn"] for answer in episode["turns"]] == [0, 0, 1, 1, 1, 2, 2, 2]
