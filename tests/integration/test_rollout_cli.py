"""`envscaler rollout` and `envscaler export sft` against a live gateway, with the model and the
simulated user played by a local server replaying scripted replies: the JSONL output, concurrency
with an episode whose model fails, resuming, retrying errors, conversation mode, the reference
policy, the export in both formats, and clear failures (no traceback)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from envscaler.cli.main import app
from envscaler_client import EnvClient
from typer.testing import CliRunner, Result

from tests.fixtures.rollout.scripted_chat import ScriptedChat, calls, failure
from tests.integration.gateway_fixtures import COUNTER, LIBRARY
from tests.integration.live_gateway import *  # the fixtures: catalogue_root, live_gateway
from tests.integration.live_gateway import LiveGateway

AGENT, USER = "agent-model", "user-model"
COUNTER_1 = "Bring counter a to 3"
COUNTER_2 = "Bring counter z to 11"
SOLVE_1 = [calls(("increment", {"name": "a", "by": 2}), ("increment", {"name": "b"})), "Done."]
SOLVE_2 = [calls(("increment", {"name": "z"})), "Done."]

Run = Callable[..., Result]


@pytest.fixture(scope="module")
def chat_server() -> Iterator[ScriptedChat]:
    with ScriptedChat().running() as chat:
        yield chat


@pytest.fixture
def chat(chat_server: ScriptedChat) -> ScriptedChat:
    chat_server.reset()
    return chat_server


@pytest.fixture
def run(live_gateway: LiveGateway, chat: ScriptedChat) -> Run:
    """``run("rollout", ...)`` against the live gateway; the model options point at ``chat``
    unless given."""
    runner = CliRunner()

    def invoke(*args: str, model: bool = True) -> Result:
        argv = list(args)
        if model and args[0] == "rollout" and "--base-url" not in argv:
            argv += ["--base-url", chat.url, "--model", AGENT]
        env = {"ENVSCALER_URL": live_gateway.url, "ENVSCALER_API_KEY": live_gateway.api_key,
               "ENVSCALER_CATALOGUE": None, "ENVSCALER_MODEL_BASE_URL": None,
               "ENVSCALER_MODEL": None, "OPENAI_API_KEY": None}
        result = runner.invoke(app, argv, env=env)
        assert "Traceback" not in result.output, result.output
        return result
    return invoke


def lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of ``path`` (a line cut short by an interruption is not one)."""
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            pass
    return records


def assert_closed(gateway: LiveGateway, episodes: list[dict[str, Any]]) -> None:
    with EnvClient(gateway.url, gateway.api_key) as client:
        for episode in episodes:
            if episode["session_id"]:
                assert client.session(episode["session_id"]).closed, episode["key"]


def test_concurrent_rollout_survives_a_failing_model_and_retries_the_errors(
        run: Run, chat: ScriptedChat, live_gateway: LiveGateway, tmp_path: Path) -> None:
    chat.script(AGENT, COUNTER_1, SOLVE_1)
    chat.script(AGENT, COUNTER_2, [failure(500, "the GPU fell over")])
    out = tmp_path / "episodes.jsonl"
    result = run("rollout", "--env", COUNTER, "--samples", "3", "--seed", "10",
                 "--concurrency", "4", "--model-attempts", "1", "--out", str(out))
    assert result.exit_code == 1, result.output
    assert "model_error: HTTP500" in result.stderr and "the GPU fell over" in result.stderr
    assert "--retry-errors" in result.stderr
    first = lines(out)
    assert len(first) == 6 and len({e["key"] for e in first}) == 6
    by_scenario = {s: [e for e in first if e["scenario"] == s] for s in ("counter-1", "counter-2")}
    assert sorted(e["seed"] for e in by_scenario["counter-1"]) == [10, 11, 12]
    assert all(e["termination"] == "completed" and e["reward"] == 1.0
               for e in by_scenario["counter-1"])
    for episode in by_scenario["counter-2"]:
        assert episode["termination"] == "model_error" and episode["steps"] == 0
        assert episode["error"] == {"stage": "agent", "type": "HTTP500",
                                    "message": episode["error"]["message"]}
        assert episode["reward"] == 0.0  # validated all the same
    assert 1 <= chat.max_in_flight <= 4
    assert sorted(r["body"]["seed"] for r in chat.requests_for(AGENT, COUNTER_1)
                  if r["turn"] == 0) == [10, 11, 12]  # each episode's seed goes to the model
    assert_closed(live_gateway, first)

    # The model is back: --retry-errors runs the failed ones only.
    chat.reset()
    chat.script(AGENT, COUNTER_1, SOLVE_1)
    chat.script(AGENT, COUNTER_2, SOLVE_2)
    again = run("rollout", "--env", COUNTER, "--samples", "3", "--seed", "10",
                "--out", str(out), "--retry-errors")
    assert again.exit_code == 0, again.output
    assert chat.requests_for(AGENT, COUNTER_1) == []
    assert len(chat.requests_for(AGENT, COUNTER_2)) == 6  # 3 episodes, 2 turns each
    assert "3 episodes were already in" in again.stderr
    records = lines(out)
    assert len(records) == 9
    latest = {e["key"]: e for e in records}
    assert len(latest) == 6 and all(e["reward"] == 1.0 for e in latest.values())


def test_an_interrupted_run_resumes_without_redoing_finished_episodes(
        run: Run, chat: ScriptedChat, tmp_path: Path) -> None:
    chat.script(AGENT, COUNTER_1, SOLVE_1)
    chat.script(AGENT, COUNTER_2, SOLVE_2)
    out = tmp_path / "episodes.jsonl"
    args = ("rollout", "--env", COUNTER, "--samples", "3", "--concurrency", "2",
            "--out", str(out), "--json")
    first = run(*args, "--limit", "2")
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["ran"] == 2
    done = lines(out)
    assert [(e["scenario"], e["seed"]) for e in sorted(done, key=lambda e: e["seed"])] == [
        ("counter-1", 0), ("counter-1", 1)]
    assert len(chat.requests) == 4
    with open(out, "a") as handle:  # the run was killed while writing a line
        handle.write('{"key": "counter_lab/counter-1/non-conversation/seed=2", "env": "coun')

    chat.requests.clear()
    second = run(*args)
    assert second.exit_code == 0, second.output
    summary = json.loads(second.stdout)
    assert (summary["ran"], summary["skipped"], summary["terminations"]) == (
        4, 2, {"completed": 4})
    assert len(chat.requests) == 8  # 4 episodes, 2 turns each; none of the 2 finished ones
    assert {(r["marker"], r["body"]["seed"]) for r in chat.requests} == {
        (COUNTER_1, 2), (COUNTER_2, 0), (COUNTER_2, 1), (COUNTER_2, 2)}
    records = lines(out)
    assert len(records) == 6 and len({e["key"] for e in records}) == 6
    assert out.read_text().count("\n") == 7  # the cut line stays, alone on its line

    chat.requests.clear()
    third = run(*args)  # nothing left to do
    assert third.exit_code == 0 and json.loads(third.stdout)["ran"] == 0
    assert chat.requests == []


def test_conversation_mode_from_the_command_line(run: Run, chat: ScriptedChat,
                                                 tmp_path: Path) -> None:
    chat.script(USER, COUNTER_2, ["# Thought\nAsk.\n# Reply\nCan you raise counter z by one? (z)",
                                  "# Thought\nDone.\n# Reply\nGreat, thanks. ###STOP###"])
    chat.script(AGENT, "(z)", [calls(("increment", {"name": "z"})), "Counter z is 11 now."])
    out = tmp_path / "conversation.jsonl"
    result = run("rollout", "--env", COUNTER, "--scenario", "counter-2", "--mode", "conversation",
                 "--user-model", USER, "--max-steps", "5", "--out", str(out))
    assert result.exit_code == 0, result.output
    [episode] = lines(out)
    assert episode["mode"] == "conversation" and episode["termination"] == "user_stop"
    assert episode["reward"] == 1.0 and episode["usage"]["user"]["calls"] == 2
    assert episode["messages"][1] == {"role": "user",
                                      "content": "Can you raise counter z by one? (z)"}
    assert episode["key"] == "counter_lab/counter-2/conversation/seed=0"
    assert "user_stop" in result.stdout


def test_the_reference_policy_solves_every_library_scenario(
        run: Run, chat: ScriptedChat, catalogue_root: Path, live_gateway: LiveGateway,
        tmp_path: Path) -> None:
    out = tmp_path / "reference.jsonl"
    result = run("rollout", "--policy", "reference", "--env", LIBRARY, "--catalogue",
                 str(catalogue_root), "--concurrency", "4", "--out", str(out), model=False)
    assert result.exit_code == 0, result.output
    episodes = lines(out)
    solutions = {json.loads(line)["id"]: json.loads(line)["solution"] for line in
                 (catalogue_root / LIBRARY / "scenarios.jsonl").read_text().splitlines()}
    assert sorted(e["scenario"] for e in episodes) == sorted(solutions)
    for episode in episodes:
        assert episode["termination"] == "completed" and episode["reward"] == 1.0, episode["key"]
        assert episode["passed"] == episode["total"] > 0 and episode["policy"] == "reference"
        assert [(c["name"], c["arguments"]) for c in episode["tool_calls"]] == [
            (s["name"], s["arguments"]) for s in solutions[episode["scenario"]]]
        assert episode["usage"]["agent"]["total_tokens"] == 0
    assert chat.requests == []  # no model at all
    assert_closed(live_gateway, episodes)


def test_groups_run_on_forks_of_one_session(
        run: Run, catalogue_root: Path, live_gateway: LiveGateway, tmp_path: Path) -> None:
    """GRPO's groups: every member of a scenario and seed starts from one session's point."""
    out = tmp_path / "groups.jsonl"
    result = run("rollout", "--policy", "reference", "--env", COUNTER, "--catalogue",
                 str(catalogue_root), "--group-size", "3", "--samples", "2", "--concurrency",
                 "6", "--out", str(out), model=False)
    assert result.exit_code == 0, result.output
    episodes = lines(out)
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for episode in episodes:
        groups.setdefault((episode["scenario"], episode["seed"]), []).append(episode)
    assert len(groups) == 2 * 2  # two scenarios, two seeds each
    for members in groups.values():
        assert sorted(e["member"] for e in members) == [0, 1, 2]
        assert len({e["session_id"] for e in members}) == 3
        assert all(e["termination"] == "completed" and e["reward"] == 1.0 for e in members)
    assert len({e["key"] for e in episodes}) == len(episodes) == 12
    assert_closed(live_gateway, episodes)
    rerun = run("rollout", "--policy", "reference", "--env", COUNTER, "--catalogue",
                str(catalogue_root), "--group-size", "3", "--samples", "2", "--out", str(out),
                model=False)
    assert rerun.exit_code == 0 and len(lines(out)) == 12  # resumed: nothing to redo


def test_export_keeps_only_rewarded_episodes_in_both_formats(
        run: Run, chat: ScriptedChat, tmp_path: Path) -> None:
    chat.script(AGENT, COUNTER_1, SOLVE_1)  # reward 1.0, with parallel calls
    chat.script(AGENT, COUNTER_2, ["I cannot do that."])  # reward 0.0
    episodes = tmp_path / "episodes.jsonl"
    assert run("rollout", "--env", COUNTER, "--out", str(episodes)).exit_code == 0

    openai_out = tmp_path / "sft-openai.jsonl"
    exported = run("export", "sft", "--in", str(episodes), "--out", str(openai_out),
                   "--format", "openai")
    assert exported.exit_code == 0, exported.output
    assert "wrote 1 of 2 episodes" in exported.stderr and "1 below reward" in exported.stderr
    [sample] = lines(openai_out)
    assert set(sample) == {"messages", "tools"}
    assert [m["role"] for m in sample["messages"]] == ["system", "user", "assistant", "tool",
                                                       "tool", "assistant"]
    assert sample["messages"][1]["content"].startswith(COUNTER_1)
    assert [c["function"]["name"] for c in sample["messages"][2]["tool_calls"]] == [
        "increment", "increment"]
    assert {t["function"]["name"] for t in sample["tools"]} >= {"increment", "token"}

    sharegpt_out = tmp_path / "sft-sharegpt.jsonl"
    exported = run("export", "sft", "--in", str(episodes), "--out", str(sharegpt_out),
                   "--format", "sharegpt", "--json")
    assert exported.exit_code == 0, exported.output
    assert json.loads(exported.stdout)["written"] == 1
    [sample] = lines(sharegpt_out)
    assert [t["from"] for t in sample["conversations"]] == [
        "human", "function_call", "observation", "gpt"]
    assert json.loads(sample["conversations"][1]["value"]) == [
        {"name": "increment", "arguments": {"name": "a", "by": 2}},
        {"name": "increment", "arguments": {"name": "b"}}]
    observation = sample["conversations"][2]["value"].split(
        "\n</tool_response>\n<tool_response>\n")
    assert [json.loads(part)["data"]["value"] for part in observation] == [3, 1]
    assert sample["conversations"][3]["value"] == "Done."
    assert "increment" in [tool["name"] for tool in json.loads(sample["tools"])]
    assert sample["system"].startswith("You are an agent")

    everything = tmp_path / "all.jsonl"
    assert run("export", "sft", "--in", str(episodes), "--out", str(everything),
               "--min-reward", "0", "--metadata").exit_code == 0
    assert Counter(s["metadata"]["reward"] for s in lines(everything)) == {1.0: 1, 0.0: 1}


def test_failures_before_the_run_are_explained(run: Run, chat: ScriptedChat,
                                               tmp_path: Path) -> None:
    out = tmp_path / "none.jsonl"
    unreachable = run("rollout", "--env", COUNTER, "--out", str(out),
                      "--base-url", "http://127.0.0.1:9/v1", "--model", AGENT)
    assert unreachable.exit_code == 1
    assert "model endpoint http://127.0.0.1:9/v1 is unreachable" in unreachable.stderr
    assert "is the model server running?" in unreachable.stderr

    no_gateway = run("rollout", "--env", COUNTER, "--out", str(out), "--url",
                     "http://127.0.0.1:9")
    assert no_gateway.exit_code == 1 and "is the gateway running" in no_gateway.stderr

    unknown = run("rollout", "--env", "no_such_env", "--out", str(out))
    assert unknown.exit_code == 1 and "UnknownEnv" in unknown.stderr

    missing = run("rollout", "--env", COUNTER, "--scenario", "counter-9", "--out", str(out))
    assert missing.exit_code == 1 and "no scenario counter-9" in missing.stderr

    no_model = run("rollout", "--env", COUNTER, "--out", str(out), model=False)
    assert no_model.exit_code == 2 and "--base-url and --model" in no_model.stderr

    no_catalogue = run("rollout", "--policy", "reference", "--env", COUNTER, "--catalogue",
                       str(tmp_path / "nowhere"), "--out", str(out), model=False)
    assert no_catalogue.exit_code == 1 and "cannot read" in no_catalogue.stderr
    assert not out.exists() or lines(out) == []
    assert chat.requests == []

    no_input = run("export", "sft", "--in", str(tmp_path / "missing.jsonl"), "--out",
                   str(tmp_path / "x.jsonl"))
    assert no_input.exit_code == 2 and "no file" in no_input.stderr
