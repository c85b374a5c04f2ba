"""`envscaler import bfcl` on a miniature BFCL checkout of our own (tests/fixtures/bfcl, in BFCL's
file layout and formats): the questions become multi-turn scenarios of environments per set of
classes (the malformed one is reported), served by a live gateway, and `envscaler rollout
--policy reference` replays the ground truth through HTTP turn by turn to reward 1.0 and the
final state the fixture's classes should reach."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from envscaler.cli.main import app
from envscaler_client import EnvClient
from typer.testing import CliRunner

from envscaler.format.loader import load_env
from tests.integration.live_gateway import LiveGateway, gateway_settings, running_gateway
from tests.integration.test_multi_turn import reference_rollout

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "bfcl"
PANTRY, BOTH = "bfcl-pantryapi", "bfcl-noteapi-pantryapi"
PANTRY_AFTER_QUESTION_0 = {  # sugar used up (so on the list), flour moved down
    "shelves": {"top": [{"label": "sugar", "grams": 0}],
                "bottom": [{"label": "rice", "grams": 1000}, {"label": "flour", "grams": 500}]},
    "shopping_list": ["eggs", "sugar"]}
NOTES_AFTER_QUESTION_1 = {
    "owner": "Ada", "logged_in": True,
    "notes": [{"title": "hello", "text": "first note"},
              {"title": "pantry", "text": "We are out of sugar."}],
    "tags": ["kitchen"]}


@pytest.fixture(scope="module")
def imported(sandbox_image: str, socket_root: Path,
             tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("bfcl") / "envs"
    result = CliRunner().invoke(app, ["import", "bfcl", "--from", str(CHECKOUT), "--out",
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


def test_questions_become_multi_turn_scenarios_and_bad_ones_are_reported(
        imported: tuple[Path, dict]) -> None:
    out, report = imported
    assert report["counts"] == {"questions": 3, "envs_imported": 2, "scenarios_imported": 2,
                                "not_imported": 2}
    assert [problem["record"] for problem in report["errors"]] == ["multi_turn_base_2",
                                                                   "bfcl-noteapi"]
    assert "does not parse" in report["errors"][0]["reason"]
    [scenario] = load_env(out / BOTH).scenarios
    assert [turn.user for turn in scenario.turns] == [
        "I am Ada; log me in to my notebook.",
        "Note down that we are out of sugar, tagged kitchen.",
        "Put sugar and butter on the shopping list."]
    assert [[call.name for call in turn.solution] for turn in scenario.turns] == [
        ["login"], ["write_note"], ["shopping"]]
    assert (out / PANTRY / "env.py").read_text().count("GRAMS_PER_CUP = 120") == 1  # inlined


def test_the_ground_truth_replayed_through_http_earns_reward_one(
        served: LiveGateway, tmp_path: Path) -> None:
    for env, expected in [(PANTRY, {"PantryAPI": PANTRY_AFTER_QUESTION_0}),
                          (BOTH, {"NoteAPI": NOTES_AFTER_QUESTION_1})]:
        [episode] = reference_rollout(served, env, tmp_path / f"{env}.jsonl")
        assert episode["termination"] == "completed" and episode["reward"] == 1.0, episode
        assert len({call["user_turn"] for call in episode["tool_calls"]}) == len(
            episode["user_turns"])
        with EnvClient(served.url, served.api_key) as client:
            state = client.session(episode["session_id"]).state().state
        for name, tree in expected.items():
            assert state[name] == tree


def test_a_question_whose_id_is_a_path_is_skipped_with_its_reason(
        sandbox_image: str, socket_root: Path, tmp_path: Path) -> None:
    """One question of a checkout with a path for an id: reported, the others imported."""
    checkout = tmp_path / "gorilla"
    shutil.copytree(CHECKOUT, checkout)
    data = checkout / "berkeley-function-call-leaderboard" / "data"
    name = "BFCL_v3_multi_turn_base.json"
    for path in (data / name, data / "possible_answer" / name):
        first = json.loads(path.read_text().splitlines()[0])  # question 0: PantryAPI alone
        path.write_text(json.dumps(first) + "\n" + json.dumps(
            {**first, "id": "../../escaped/multi_turn_base_0"}) + "\n")
    out = tmp_path / "envs"
    result = CliRunner().invoke(app, ["import", "bfcl", "--from", str(checkout), "--out",
                                      str(out), "--json"], env={
        "ENVSCALER_SANDBOX_BACKEND": "docker", "ENVSCALER_SANDBOX_IMAGE": sandbox_image,
        "ENVSCALER_SOCKET_ROOT": str(socket_root), "ENVSCALER_POOL_SIZE": "0"})
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["counts"] == {"questions": 2, "envs_imported": 1, "scenarios_imported": 1,
                                "not_imported": 1}
    [problem] = report["errors"]
    assert problem["record"] == "../../escaped/multi_turn_base_0"
    assert "is not a scenario id" in problem["reason"]
    assert [s.id for s in load_env(out / PANTRY).scenarios] == ["multi_turn_base_0"]
    assert not (tmp_path / "escaped").exists()
