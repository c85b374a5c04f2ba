"""The trainer adapters against a live gateway serving the whole catalogue (real Redis, real
Docker sandboxes).

TRL: ``GRPOTrainer`` needs torch, which this suite does not install, so its use of an
``environment_factory`` class is replayed step by step as TRL 1.16 does it (tools listed with
``inspect.getmembers(type(env), inspect.isfunction)``, ``reset(**row)``, ``tool(**arguments)``,
``get_reward()``), with transformers' own ``get_json_schema`` (what TRL renders tools with) run on
every method of every environment. verl (torch and Ray) is replaced by a stand-in written from
its published interfaces (``tests/fixtures/verl_contract``). Each adapter plays reference
episodes to reward 1.0.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from envscaler_client import NotFoundError
from envscaler_client.adapters.rows import scenario_rows, verl_rows
from envscaler_client.adapters.trl import (
    EnvScalerEnvironment,
    environment_factories,
    environment_factory,
    rows_for_factories,
)
from transformers.utils import get_json_schema

from tests.integration.gateway_fixtures import REPO_ROOT
from tests.integration.live_gateway import LiveGateway, gateway_settings, running_gateway
from tests.unit.test_trainer_adapters import as_transformers_sees, normalized

CATALOGUE = REPO_ROOT / "generated_envs"
ENVS = sorted(path.parent.name for path in CATALOGUE.glob("*/env.json"))
VERL_STAND_IN = REPO_ROOT / "tests" / "fixtures" / "verl_contract"


@pytest.fixture(scope="module")
def gateway(redis_url: str, sandbox_image: str, socket_root: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveGateway]:
    settings = gateway_settings(redis_url, CATALOGUE, sandbox_image, socket_root)
    with running_gateway(settings, tmp_path_factory.mktemp("gateway") / "gateway.log") as live:
        yield live


def solutions(env: str) -> dict[str, list[dict[str, Any]]]:
    """The reference solutions of ``env``'s scenarios (the gateway never serves them)."""
    lines = (CATALOGUE / env / "scenarios.jsonl").read_text().splitlines()
    return {scenario["id"]: scenario["solution"] for scenario in map(json.loads, lines)}


def trl_tools(environment: EnvScalerEnvironment) -> dict[str, Any]:
    """The bound methods TRL exposes as tools, by name, as GRPOTrainer lists them."""
    return {name: getattr(environment, name)
            for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")}


def session_status(gateway: LiveGateway, session_id: str) -> str:
    response = httpx.get(f"{gateway.url}/v1/sessions/{session_id}",
                         headers={"Authorization": f"Bearer {gateway.api_key}"})
    assert response.status_code == 200, response.text
    return response.json()["status"]


@pytest.mark.parametrize("env", ENVS)
def test_transformers_reads_the_session_tool_schemas_back_from_the_trl_class(
        gateway: LiveGateway, env: str) -> None:
    cls = environment_factory(env, url=gateway.url, api_key=gateway.api_key)
    row = scenario_rows(env, url=gateway.url, api_key=gateway.api_key)[0]
    with cls() as environment:
        environment.reset(**row)
        session_tools = {tool["function"]["name"]: tool
                         for tool in environment._open_session().tools}
        methods = trl_tools(environment)
        assert sorted(methods) == sorted(session_tools)
        for name, method in methods.items():
            got = get_json_schema(method)
            got["function"].pop("return")
            assert normalized(got) == as_transformers_sees(session_tools[name]), name


@pytest.mark.parametrize("env", ENVS)
def test_a_trl_environment_plays_reference_episodes_to_reward_one(
        gateway: LiveGateway, env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVSCALER_URL", gateway.url)  # as a trainer worker is configured
    monkeypatch.setenv("ENVSCALER_API_KEY", gateway.api_key)
    cls = environment_factory(env)
    rows = scenario_rows(env)[:2]
    reference = solutions(env)
    with cls() as environment:
        tools = trl_tools(environment)
        session_ids = []
        for index, row in enumerate(rows):
            # a row without a prompt gets the task back, for TRL to append to its prompt
            episode_row = row if index == 0 else {k: v for k, v in row.items() if k != "prompt"}
            appended = environment.reset(**episode_row)
            assert appended == (None if index == 0 else row["prompt"][-1]["content"])
            session_ids.append(environment._open_session().id)
            for step in reference[row["scenario"]]:
                result = json.loads(tools[step["name"]](**step["arguments"]))
                assert "error" not in result, (step, result)
            # GRPOTrainer's reward column for an environment that defines get_reward
            assert [e.get_reward() for e in [environment]] == [1.0]
        assert session_ids[0] == session_ids[1]  # the session moved to the next row in place
    assert session_status(gateway, session_ids[0]) == "closed"


def test_a_tool_error_is_text_the_model_reads(gateway: LiveGateway) -> None:
    cls = environment_factory("library_loans", url=gateway.url, api_key=gateway.api_key)
    with cls() as environment:
        environment.reset(env="library_loans", scenario="library_loans-001")
        tools = trl_tools(environment)
        wrong = json.loads(tools["get_member"](member_id=7))
        assert wrong["error"]["type"] == "InvalidArguments"
        unknown = json.loads(tools["get_member"](member_id="M-0000"))
        assert unknown["success"] is False
        assert json.loads(tools["get_member"](member_id="M-1001"))["success"] is True


def test_a_session_the_gateway_ended_is_replaced_by_the_next_reset(gateway: LiveGateway) -> None:
    cls = environment_factory("library_loans", url=gateway.url, api_key=gateway.api_key)
    with cls() as environment:
        environment.reset(env="library_loans", scenario="library_loans-001")
        first = environment._open_session().id
        with pytest.raises(NotFoundError, match="library_loans-999"):
            environment.reset(env="library_loans", scenario="library_loans-999")
        assert environment._open_session().id == first  # a refused row keeps the session
        ended = httpx.delete(f"{gateway.url}/v1/sessions/{first}",
                             headers={"Authorization": f"Bearer {gateway.api_key}"})
        assert ended.status_code == 200, ended.text
        environment.reset(env="library_loans", scenario="library_loans-002", seed=3)
        replaced = environment._open_session()
        assert replaced.id != first
        assert (replaced.scenario, replaced.seed) == ("library_loans-002", 3)
        assert "success" in json.loads(trl_tools(environment)["get_member"](member_id="M-1001"))
    assert session_status(gateway, replaced.id) == "closed"


def test_a_dict_of_factories_routes_rows_by_environment(gateway: LiveGateway) -> None:
    envs = ["library_loans", "restaurant_reservation"]
    factories = environment_factories(envs, url=gateway.url, api_key=gateway.api_key)
    rows = rows_for_factories([scenario_rows(env, url=gateway.url, api_key=gateway.api_key)[0]
                               for env in envs])
    for row in rows:
        with factories[row["environment"]]() as environment:
            # GRPOTrainer passes the row without its routing field
            environment.reset(**{k: v for k, v in row.items() if k != "environment"})
            assert sorted(trl_tools(environment)) == sorted(
                tool["function"]["name"] for tool in environment._open_session().tools)
    with factories["library_loans"]() as environment, pytest.raises(ValueError, match="serves"):
        environment.reset(**{k: v for k, v in rows[1].items() if k != "environment"})


class ReferenceModel:
    """verl's ``server_manager`` for the stand-in loop: one reference call a turn, then none;
    first a call with arguments the schema rejects, which the model reads and corrects."""

    def __init__(self, solution: list[dict[str, Any]]) -> None:
        first = solution[0]
        self.turns: list[list[tuple[str, str]]] = [
            [(first["name"], json.dumps({**first["arguments"], "bogus": 1}))],
            *[[(step["name"], json.dumps(step["arguments"]))] for step in solution]]
        self.tools: list[dict[str, Any]] = []

    async def generate(self, messages: list[dict[str, Any]],
                       tools: list[dict[str, Any]]) -> list[tuple[str, str]]:
        self.tools = tools
        return self.turns.pop(0) if self.turns else []


@pytest.fixture
def verl_adapter(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``envscaler_client.adapters.verl`` imported over the verl stand-in, and the loop class
    verl's worker would instantiate for ``agent_name: envscaler_agent`` (from its registry)."""
    monkeypatch.syspath_prepend(str(VERL_STAND_IN))
    for name in [name for name in sys.modules if name == "verl" or name.startswith("verl.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delitem(sys.modules, "envscaler_client.adapters.verl", raising=False)
    importlib.import_module("envscaler_client.adapters.verl")
    agent_loop = importlib.import_module("verl.experimental.agent_loop.agent_loop")
    registry = agent_loop._agent_loop_registry
    module_name, class_name = registry["envscaler_agent"]["_target_"].rsplit(".", 1)
    yield getattr(importlib.import_module(module_name), class_name)
    for name in [name for name in sys.modules if name == "verl" or name.startswith("verl.")]:
        del sys.modules[name]
    sys.modules.pop("envscaler_client.adapters.verl", None)


@pytest.mark.parametrize("env", ENVS)
async def test_the_verl_agent_loop_plays_a_reference_episode_to_reward_one(
        gateway: LiveGateway, env: str, verl_adapter: Any) -> None:
    from verl.experimental.agent_loop.agent_loop import ToolListWrap

    row = verl_rows(scenario_rows(env, url=gateway.url, api_key=gateway.api_key))[0]
    model = ReferenceModel(solutions(env)[row["extra_info"]["envscaler"]["scenario"]])
    # as verl's AgentLoopWorker instantiates an agent loop (hydra), once per trajectory
    loop = verl_adapter(trainer_config=None, server_manager=model, tokenizer=None,
                        processor=None, dataset_cls=None, data_config=None, hf_model_type=None,
                        tools=ToolListWrap([]), name="envscaler_agent",
                        url=gateway.url, api_key=gateway.api_key)
    output = await loop.run({}, raw_prompt=row["prompt"], extra_info=row["extra_info"],
                            agent_name=row["agent_name"], data_source=row["data_source"])
    assert output.reward_score == 1.0
    result = output.extra_fields["envscaler"]
    assert result["passed"] == result["total"] > 0
    tool_messages = [m["content"] for m in output.extra_fields["messages"] if m["role"] == "tool"]
    assert json.loads(tool_messages[0])["error"]["type"] == "InvalidArguments"
    assert all("error" not in json.loads(text) for text in tool_messages[1:])
    with environment_factory(env, url=gateway.url, api_key=gateway.api_key)() as environment:
        assert {tool["function"]["name"] for tool in model.tools} == set(trl_tools(environment))
    assert session_status(gateway, result["session_id"]) == "closed"
