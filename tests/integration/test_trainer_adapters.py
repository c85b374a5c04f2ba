"""The trainer adapters against a live gateway serving the whole catalogue (real Redis, real
Docker sandboxes).

TRL: a real ``GRPOTrainer`` (TRL 1.16, on the CPU) trains one step on a scenario with a tiny
random model and tokenizer built here (nothing is downloaded). TRL probes the environment class for
its tools, renders them into the prompt, calls ``reset(**row)``, parses the model's tool calls,
runs them on the adapter's methods and scores each rollout with ``get_reward``: all of it TRL's own
code. Only the first turn of each rollout is scripted, through TRL's ``rollout_func`` hook: the
reference solution's calls in one rollout, a plain answer in the other. The other TRL tests replay
its use of the class step by step (with transformers' own ``get_json_schema``) on every
environment. verl (torch and Ray) is replaced by a stand-in written from its published interfaces
(``tests/fixtures/verl_contract``). Each adapter plays reference episodes to reward 1.0.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from datasets import Dataset
from envscaler_client import NotFoundError
from envscaler_client.adapters.rows import scenario_rows, verl_rows
from envscaler_client.adapters.trl import (
    EnvScalerEnvironment,
    environment_factories,
    environment_factory,
    rows_for_factories,
)
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
from transformers.utils import get_json_schema
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import qwen3_chat_template

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


TRAINED_SCENARIO = ("library_loans", "library_loans-001")
TURN_MARKERS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEMPLATE_TAGS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>",
                 "</tool_response>"]
"""What Qwen3's tokenizer adds to its vocabulary: turn markers (special tokens) and its chat
template's tags (plain tokens, which a completion decodes with)."""


def tiny_tokenizer(corpus: list[str]) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on ``corpus`` (any text round-trips), with Qwen3's
    tokens and the Qwen3 chat template TRL ships, which TRL knows how to parse tool calls from."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=2048, special_tokens=TURN_MARKERS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        chat_template=qwen3_chat_template, clean_up_tokenization_spaces=False)
    tokenizer.add_tokens(TEMPLATE_TAGS)
    return tokenizer


def tiny_model(vocab_size: int) -> Qwen3ForCausalLM:
    """A randomly initialised one-layer Qwen3, small enough for a training step on the CPU."""
    torch.manual_seed(0)
    return Qwen3ForCausalLM(Qwen3Config(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16,
        max_position_embeddings=32768, tie_word_embeddings=True))


def tool_call_turn(steps: list[dict[str, Any]]) -> str:
    """An assistant turn making ``steps``' calls, as Qwen3 writes them."""
    return "\n".join("<tool_call>\n" + json.dumps({"name": step["name"],
                                                   "arguments": step["arguments"]})
                     + "\n</tool_call>" for step in steps) + "<|im_end|>"


def scripted_rollout(first_turns: list[str], prompts_seen: list[str]
                     ) -> Callable[[list[Any], GRPOTrainer], dict[str, Any]]:
    """GRPOTrainer's ``rollout_func``: the prompts as TRL renders them (its own
    ``_tokenize_prompts``: each with its environment's tools), and ``first_turns[i]`` as rollout
    i's first turn. TRL parses that turn, runs its tool calls and lets the model go on."""
    def rollout(prompts: list[Any], trainer: GRPOTrainer) -> dict[str, Any]:
        assert len(prompts) == len(first_turns)
        prompt_ids, _, _ = trainer._tokenize_prompts(prompts)
        tokenizer = trainer.processing_class
        prompts_seen.extend(tokenizer.decode(ids) for ids in prompt_ids)
        completion_ids = [tokenizer.encode(turn, add_special_tokens=False) for turn in first_turns]
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}
    return rollout


def rendered_tools(prompt: str) -> dict[str, dict[str, Any]]:
    """The tool schemas a Qwen3 prompt lists between ``<tools>`` and ``</tools>``, by name."""
    block = prompt.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    functions = [json.loads(line).get("function") for line in block.splitlines()]
    return {function["name"]: function for function in functions}


def test_trl_grpo_trainer_trains_a_step_on_a_session(
        gateway: LiveGateway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    env, scenario = TRAINED_SCENARIO
    where = {"url": gateway.url, "api_key": gateway.api_key}
    row = next(row for row in scenario_rows(env, seeds=2, **where)
               if (row["scenario"], row["seed"]) == (scenario, 1))
    reference = solutions(env)[scenario]
    tokenizer = tiny_tokenizer([(CATALOGUE / env / name).read_text()
                                for name in ("env.json", "scenarios.jsonl")])
    model = tiny_model(len(tokenizer))
    before = [parameter.detach().clone() for parameter in model.parameters()]
    prompts_seen: list[str] = []
    environment_class = environment_factory(env, **where)
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, train_dataset=Dataset.from_list([row]),
        environment_factory=environment_class,
        rollout_func=scripted_rollout([tool_call_turn(reference), "I cannot help.<|im_end|>"],
                                      prompts_seen),
        args=GRPOConfig(
            output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2,
            num_generations=2, max_completion_length=4096, learning_rate=1e-3, seed=0,
            # the random model's own turns: a few tokens, never a tool call
            generation_kwargs={"max_new_tokens": 4,
                               "suppress_tokens": tokenizer.convert_tokens_to_ids(TEMPLATE_TAGS)},
            use_cpu=True, bf16=False, gradient_checkpointing=False, report_to="none",
            logging_steps=1, save_strategy="no", dataloader_num_workers=0))
    try:
        trainer.train()
        played = [environment._open_session() for environment in trainer.environments]
        tools = {tool["function"]["name"]: tool for tool in played[0].tools}
        assert sorted(method.__name__ for method in trainer._env_tools[None]) == sorted(tools)
        for prompt in prompts_seen:
            assert row["prompt"][-1]["content"] in prompt
            shown = rendered_tools(prompt)
            assert sorted(shown) == sorted(tools)
            for name, function in shown.items():
                function.pop("return", None)
                assert normalized({"type": "function", "function": function}) == \
                    as_transformers_sees(tools[name]), name
        for session in played:  # TRL's reset(**row) moved each rollout's session to the row
            info = session.info()
            assert (info.env, info.scenario, info.seed) == (env, scenario, 1)
        calls = [(call.name, call.arguments) for call in played[0].trajectory().calls]
        assert calls == [(step["name"], step["arguments"]) for step in reference]
        assert played[1].trajectory().calls == []
        completion = trainer._logs["completion"][0]
        results = [json.loads(message["content"]) for message in completion
                   if message["role"] == "tool"]
        assert len(results) == len(reference)
        assert all("error" not in result for result in results), results
        # GRPOTrainer's reward column for the environment class: get_reward on each rollout
        rewards = list(trainer._logs["rewards"][environment_class.__name__])
        assert rewards[0] == 1.0
        assert rewards[1] == played[1].validate().reward < 1.0
        assert trainer.state.global_step == 1
        # the rewards differ, so the advantages do, and the step moved the weights
        assert any(not torch.equal(old, new.detach())
                   for old, new in zip(before, model.parameters(), strict=True))
    finally:
        for environment in trainer._environment_pool[None]:
            environment.__exit__(None, None, None)
    for session in played:
        assert session_status(gateway, session.id) == "closed"


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


class OneTurnModel:
    """verl's ``server_manager``: the whole reference solution as one turn of parallel calls."""

    def __init__(self, solution: list[dict[str, Any]]) -> None:
        self.turns = [[(step["name"], json.dumps(step["arguments"])) for step in solution]]

    async def generate(self, messages: list[dict[str, Any]],
                       tools: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return self.turns.pop(0) if self.turns else []


class Overtaking(httpx.AsyncBaseTransport):
    """The way from the adapter to the gateway, where a turn's later calls overtake the earlier
    ones: of ``calls`` tool-call requests, the k-th is held back (calls - 1 - k) * STEP seconds,
    so that the gateway receives them last first (the requests themselves are real)."""

    STEP = 0.15

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.sent = 0
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/calls"):
            self.sent += 1
            await asyncio.sleep(max(self.calls - self.sent, 0) * self.STEP)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_verl_parallel_calls_take_effect_in_the_model_s_order_every_time(
        gateway: LiveGateway, verl_adapter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """verl runs a turn's calls at once (``max_parallel_calls``) and here they reach the gateway
    last first: the trajectory, the tool results and the reward are still the model's order's,
    in every run."""
    from envscaler_client.aio import AsyncEnvClient
    from verl.experimental.agent_loop.agent_loop import ToolListWrap

    env, scenario = "live_event_ticketing", "live_event_ticketing-001"
    solution = solutions(env)[scenario]
    assert 1 < len(solution) <= 8  # one turn, all of it in parallel
    monkeypatch.setattr(AsyncEnvClient, "_open", lambda self: httpx.AsyncClient(
        **self.config.http_kwargs(), transport=Overtaking(len(solution))))
    [row] = [row for row in verl_rows(scenario_rows(env, url=gateway.url,
                                                    api_key=gateway.api_key))
             if row["extra_info"]["envscaler"]["scenario"] == scenario]
    runs = []
    for _ in range(3):
        loop = verl_adapter(trainer_config=None, server_manager=OneTurnModel(solution),
                            tokenizer=None, processor=None, dataset_cls=None, data_config=None,
                            tools=ToolListWrap([]), url=gateway.url, api_key=gateway.api_key)
        output = await loop.run({}, raw_prompt=row["prompt"], extra_info=row["extra_info"])
        session_id = output.extra_fields["envscaler"]["session_id"]
        response = httpx.get(f"{gateway.url}/v1/sessions/{session_id}/trajectory",
                             headers={"Authorization": f"Bearer {gateway.api_key}"})
        assert response.status_code == 200, response.text
        calls = [(entry["name"], entry["arguments"]) for entry in response.json()["entries"]]
        assert calls == [(step["name"], step["arguments"]) for step in solution]
        results = [m["content"] for m in output.extra_fields["messages"] if m["role"] == "tool"]
        runs.append((output.reward_score, results))
    assert runs[0][0] == 1.0
    assert runs == [runs[0]] * 3
