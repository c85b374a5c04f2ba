"""`envscaler import tau-bench` and `envscaler eval tau-bench` on a miniature tau-bench checkout of
our own (tests/fixtures/tau_bench, in tau's layout and formats): the test tasks become scenarios
of one environment on a shared database (the malformed task is reported), served by a live
gateway; the reference policy earns 1.0, and action sequences are scored as tau's reward scores
them: the database hash after the ground truth, every output said to the user, and nothing after
the action that ends tau's episode."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from envscaler.cli.main import app
from envscaler_client import AsyncEnvClient, EnvClient
from envscaler_client.rollout import ChatCompletionsPolicy, SimulatedUser, run_episode
from typer.testing import CliRunner

from envscaler.format.loader import load_env
from tests.fixtures.rollout.scripted_chat import ScriptedChat, calls
from tests.integration.live_gateway import LiveGateway, gateway_settings, running_gateway
from tests.integration.test_multi_turn import reference_rollout

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "tau_bench"
ENV = "tau-retail"
CANCEL = {"name": "cancel_pending_order",
          "kwargs": {"order_id": "#O1", "reason": "ordered by mistake"}}
LOOK = {"name": "get_order_details", "kwargs": {"order_id": "#O1"}}
NOTE = {"name": "add_order_notes", "kwargs": {"order_id": "#O2",
                                              "notes": [{"text": "great", "stars": 5}]}}
TRANSFER = {"name": "transfer_to_human_agents", "kwargs": {"summary": "help"}}


@pytest.fixture(scope="module")
def imported(sandbox_image: str, socket_root: Path,
             tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("tau") / "envs"
    result = CliRunner().invoke(app, ["import", "tau-bench", "--from", str(CHECKOUT), "--out",
                                      str(out), "--domain", "retail", "--json"], env={
        "ENVSCALER_SANDBOX_BACKEND": "docker", "ENVSCALER_SANDBOX_IMAGE": sandbox_image,
        "ENVSCALER_SOCKET_ROOT": str(socket_root), "ENVSCALER_POOL_SIZE": "0"})
    assert result.exit_code == 0, result.output
    return out, json.loads(result.stdout)


@pytest.fixture(scope="module")
def served(redis_url: str, sandbox_image: str, socket_root: Path,
           imported: tuple[Path, dict]) -> Iterator[LiveGateway]:
    catalogue = imported[0]
    settings = gateway_settings(redis_url, catalogue, sandbox_image, socket_root)
    with running_gateway(settings, catalogue.parent / "gateway.log") as gateway:
        yield gateway


def test_tasks_become_scenarios_on_a_shared_database(imported: tuple[Path, dict]) -> None:
    out, report = imported
    assert report["counts"] == {"tasks": 3, "envs_imported": 1, "scenarios_imported": 2,
                                "not_imported": 1}
    assert report["errors"] == [{"record": "retail-2", "reason": "its ground truth calls "
                                 "refund_order, which is not a tool"}]
    env = load_env(out / ENV)
    assert env.manifest.introduction.startswith("# Shop policy")
    assert [scenario.init_data for scenario in env.scenarios] == ["retail.json"] * 2
    assert [call.name for call in env.scenarios[1].solution or ()] == [
        "get_order_details", "add_order_notes", "respond", "respond"]
    assert json.loads((out / ENV / "data" / "retail.json").read_text())["users"]["ada"][
        "balance"] == 100


def test_the_reference_policy_earns_taus_reward(served: LiveGateway, tmp_path: Path) -> None:
    episodes = reference_rollout(served, ENV, tmp_path / "episodes.jsonl")
    # episodes run at once and are written as they end, in either order
    assert sorted((episode["scenario"], episode["reward"]) for episode in episodes) == [
        ("retail-0", 1.0), ("retail-1", 1.0)]


def evaluate(served: LiveGateway, path: Path, *lines: dict) -> dict[str, float]:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = CliRunner().invoke(app, [
        "eval", "tau-bench", "--catalogue", str(served.catalogue), "--actions", str(path),
        "--json"], env={"ENVSCALER_URL": served.url, "ENVSCALER_API_KEY": served.api_key})
    assert result.exit_code == 0, result.output
    scores: dict[str, float] = json.loads(result.stdout)
    return scores


def test_action_sequences_are_scored_as_tau_scores_them(served: LiveGateway,
                                                         tmp_path: Path) -> None:
    def line(task: int, actions: list[dict], outputs: list[str]) -> dict:
        return {"task_id": task, "env": "retail", "actions": actions, "outputs": outputs}

    cases = [  # (task, actions, outputs, tau's reward)
        (0, [LOOK, CANCEL], [], 1.0),
        (0, [LOOK], [], 0.0),  # the database is not the ground truth's
        (0, [CANCEL, {**CANCEL, "kwargs": {"order_id": "#O9", "reason": "no longer needed"}}],
         [], 1.0),  # a failing action is a result (tau's "Error: ..."), the database is right
        (0, [{"name": "refund_order", "kwargs": {}}, {**CANCEL, "kwargs": {"order_id": 1}},
             CANCEL], [], 1.0),  # unknown tool, arguments the schema refuses: failed actions
        (0, [TRANSFER, CANCEL], [], 0.0),  # tau's episode ends at the transfer
        (1, [NOTE], ["That is 42.5 dollars", "five stars, noted"], 1.0),
        (1, [NOTE], ["That is 42.5 dollars"], 0.0),  # an output never said
        (1, [NOTE, NOTE], ["42.5 and five stars"], 0.0),  # two notes: another database
        (1, [], ["42.5", "Five Stars"], 0.0),
    ]
    for number, (task, actions, outputs, expected) in enumerate(cases):
        scores = evaluate(served, tmp_path / f"{number}.jsonl", line(task, actions, outputs))
        assert scores == {f"retail-{task}": expected}, (number, actions, outputs)


def test_a_line_that_cannot_be_scored_is_reported_and_the_others_are_scored(
        served: LiveGateway, tmp_path: Path) -> None:
    path = tmp_path / "actions.jsonl"
    path.write_text(json.dumps({"task_id": 7, "env": "retail", "actions": []}) + "\n"
                    + json.dumps({"task_id": 0, "env": "retail", "actions": [CANCEL]}) + "\n")
    result = CliRunner().invoke(app, [
        "eval", "tau-bench", "--catalogue", str(served.catalogue), "--actions", str(path),
        "--json"], env={"ENVSCALER_URL": served.url, "ENVSCALER_API_KEY": served.api_key})
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {"retail-0": 1.0}
    assert "not scored retail-7" in result.stderr
    with EnvClient(served.url, served.api_key) as client:
        assert [s.id for s in client.scenarios(ENV)] == ["retail-0", "retail-1"]


async def test_taus_user_holds_the_task_and_hears_the_outputs(served: LiveGateway) -> None:
    agent_said = "Order #O1 costs 42.5; I left a Five Stars note on #O2."
    with ScriptedChat().running() as chat:
        chat.script("user", "five-star note", [  # tau's prompt holds the instruction
            "How much is order #O1? And please leave a five-star note on #O2.", "###STOP###"])
        chat.script("agent", "How much is order #O1?", [
            calls(("get_order_details", {"order_id": "#O1"})),
            calls(("add_order_notes", NOTE["kwargs"])), agent_said])
        async with AsyncEnvClient(served.url, served.api_key) as client, \
                ChatCompletionsPolicy(chat.url, "agent") as policy, \
                SimulatedUser(chat.url, "user", style="tau") as user:
            async with client.create_session(ENV, "retail-1") as session:
                episode = await run_episode(session, policy, mode="conversation", user=user)
                state = (await session.state()).state
    assert episode.termination == "user_stop" and episode.reward == 1.0
    assert episode.user_messages[0]["content"].startswith(
        "You are a user interacting with an agent.\n\nInstruction: You are Ada.")
    assert [m["content"] for m in episode.user_messages if m["role"] == "user"] == [
        "Hi! How can I help you today?", agent_said]
    assert state["messages_to_user"] == [agent_said]  # the greeting is not the agent's
