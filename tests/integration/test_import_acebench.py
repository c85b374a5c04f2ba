"""`envscaler import acebench` and `envscaler eval acebench` on a miniature ACEBench checkout of
our own (tests/fixtures/acebench, in ACEBench's layout and formats): the agent questions become
scenarios of one environment per set of classes, the milestones that pass ACEBench's rule their
reference solution (the one that does not parse is unverified), served by a live gateway; call
sequences are judged by ACEBench's end-to-end rule, with its dispatch of a call to every class
that has the method and its saving of states only once a call succeeded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from envscaler.cli.main import app
from typer.testing import CliRunner

from envscaler.format.loader import load_env
from tests.integration.live_gateway import LiveGateway, gateway_settings, running_gateway
from tests.integration.test_multi_turn import reference_rollout

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "acebench"
ENV = "acebench-baseapi-noteapi"
WIFI = {"name": "turn_on_wifi", "arguments": {}}
MILK = {"name": "add_note", "arguments": {"text": "milk"}}


@pytest.fixture(scope="module")
def imported(sandbox_image: str, socket_root: Path,
             tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("acebench") / "envs"
    result = CliRunner().invoke(app, ["import", "acebench", "--from", str(CHECKOUT), "--out",
                                      str(out), "--json"], env={
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


def test_questions_become_scenarios_and_unreplayable_milestones_are_unverified(
        imported: tuple[Path, dict]) -> None:
    out, report = imported
    assert report["counts"] == {"questions": 3, "envs_imported": 1, "scenarios_imported": 3,
                                "scenarios_verified": 2, "not_imported": 0}
    [unverified] = report["unverified"]
    assert unverified["record"] == "agent_multi_step_1"
    assert "does not parse" in unverified["reason"]
    scenarios = {s.id: s for s in load_env(out / ENV).scenarios}
    assert [call.name for call in scenarios["agent_multi_step_0"].solution or ()] == [
        "turn_on_wifi", "add_note"]
    assert scenarios["agent_multi_step_1"].solution is None


def test_the_reference_policy_passes_acebenchs_rule(served: LiveGateway,
                                                    tmp_path: Path) -> None:
    episodes = reference_rollout(served, ENV, tmp_path / "episodes.jsonl")
    assert {(e["scenario"], e["reward"]) for e in episodes if e["scenario"] != (
        "agent_multi_step_1")} == {("agent_multi_step_0", 1.0), ("agent_multi_turn_0", 1.0)}


def evaluate(served: LiveGateway, path: Path, lines: list[dict]) -> dict[str, float]:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = CliRunner().invoke(app, [
        "eval", "acebench", "--catalogue", str(served.catalogue), "--calls", str(path),
        "--json"], env={"ENVSCALER_URL": served.url, "ENVSCALER_API_KEY": served.api_key})
    assert result.exit_code == 0, result.output
    scores: dict[str, float] = json.loads(result.stdout)
    return scores


def test_call_sequences_are_judged_by_acebenchs_rule(served: LiveGateway,
                                                     tmp_path: Path) -> None:
    cases = [  # (calls of agent_multi_step_0, ACEBench's verdict)
        ([WIFI, MILK], 1.0),
        ([MILK], 0.0),  # the phone's NoteApi has no wifi: the note is refused
        ([], 0.0),  # no call succeeded: ACEBench saved no state
        ([{"name": "delete_note", "arguments": {"note_id": 7}}, WIFI, MILK], 1.0),  # it raised
        ([{"name": "search_web", "arguments": {"query": "x"}}, WIFI, MILK], 1.0),  # no class
        ([WIFI, {"name": "add_note", "arguments": {"text": "bread"}}], 0.0),
        ([WIFI, MILK, MILK], 1.0),  # a note more: only the expected notes are compared
    ]
    for number, (calls, expected) in enumerate(cases):
        scores = evaluate(served, tmp_path / f"{number}.jsonl",
                          [{"id": "agent_multi_step_0", "calls": calls}])
        assert scores == {"agent_multi_step_0": expected}, (number, calls)
    # ACEBench's answer names NoteAPI, which no class matches: only BaseApi is judged
    assert evaluate(served, tmp_path / "turn.jsonl",
                    [{"id": "agent_multi_turn_0", "calls": [WIFI]}]) == {
        "agent_multi_turn_0": 1.0}
