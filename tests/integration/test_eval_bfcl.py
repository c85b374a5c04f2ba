"""`envscaler eval bfcl` on the miniature BFCL checkout (tests/fixtures/bfcl): result files of our
own in BFCL's format (function-calling and prompting), and rollouts of the imported scenarios,
replayed through a live gateway and judged by BFCL's multi-turn rules; and the served reward of
an imported scenario, which now sees the ground truth's call results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envscaler.cli.main import app
from envscaler_client import EnvClient
from typer.testing import CliRunner

from tests.integration.live_gateway import LiveGateway
from tests.integration.test_import_bfcl import BOTH, CHECKOUT, PANTRY, imported, served
from tests.integration.test_multi_turn import reference_rollout

__all__ = ["imported", "served"]  # the fixtures this module uses

Q0, Q1 = "multi_turn_base_0", "multi_turn_base_1"
LIST_TOP = [{"list_jars": '{"shelf": "top"}'}]
BAKE = [{"use": '{"label": "sugar", "cups": 1.0}'},
        {"move_jar": '{"label": "flour", "to_shelf": "bottom"}'}]
NOTES = [[[{"login": {"owner": "Ada"}}]],
         [[{"write_note": {"title": "pantry", "text": "We are out of sugar.", "tag": "kitchen"}}],
          "Noted."],
         [[{"shopping": {"add": ["sugar", "butter"]}}]]]


def evaluate(served: LiveGateway, *options: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["eval", "bfcl", "--from", str(CHECKOUT), "--url",
                                      served.url, "--api-key", served.api_key, "--json",
                                      *options])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def result_file(path: Path, results: dict[str, Any]) -> Path:
    """A BFCL result file: a line per question, with metadata fields BFCL's generation adds."""
    path.write_text("".join(json.dumps({"id": key, "result": result, "latency": [[0.1]],
                                        "input_token_count": [[10]]}) + "\n"
                            for key, result in results.items()))
    return path


def verdicts(report: dict[str, Any]) -> dict[str, tuple[bool, str | None]]:
    return {key: (verdict["valid"], verdict["error_type"])
            for key, verdict in report["verdicts"].items()}


def test_function_calling_results_get_bfcls_verdicts(served: LiveGateway, tmp_path: Path) -> None:
    answers = {
        "ground_truth_0": [[LIST_TOP], [BAKE[::-1]]],  # another order in a turn is fine
        "ground_truth_1": NOTES,
        "bottom_shelf": [[[{"list_jars": '{"shelf": "bottom"}'}]], [BAKE]],
        "no_tag": [NOTES[0], [[{"write_note": {"title": "pantry",
                                               "text": "We are out of sugar."}}]], NOTES[2]],
        "chat_only": [["The top shelf has flour and sugar."], [BAKE]],
        "one_turn": [[LIST_TOP]],
        "wrong_type": [NOTES[0], [[{"write_note": {"title": 3, "text": "x"}}]], NOTES[2]],
        "not_a_list": "error: the model timed out",
    }
    questions = {"ground_truth_0": Q0, "bottom_shelf": Q0, "chat_only": Q0, "one_turn": Q0,
                 "not_a_list": Q0}
    lines = [json.dumps({"id": questions.get(name, Q1), "result": result, "note": name})
             for name, result in answers.items()]
    # each line scored alone: a result file holds a question once
    found = {}
    for name, line in zip(answers, lines, strict=True):
        path = tmp_path / f"{name}.json"
        path.write_text(line + "\n")
        report = evaluate(served, "--results", str(path))
        assert report["scored"] == 1, report
        # auto: function calling as soon as a step is a list (no step at all: prompting)
        assert report["decoder"] == ("prompting" if name == "not_a_list" else "fc")
        found[name] = next(iter(verdicts(report).values()))
    assert found == {
        "ground_truth_0": (True, None), "ground_truth_1": (True, None),
        "bottom_shelf": (False, "multi_turn:execution_response_mismatch"),
        "no_tag": (False, "multi_turn:instance_state_mismatch"),
        "chat_only": (False, "multi_turn:empty_turn_model_response"),
        "one_turn": (False, "multi_turn:force_terminated"),
        "wrong_type": (False, "multi_turn:instance_state_mismatch"),
        "not_a_list": (False, "multi_turn:inference_error")}


def test_prompting_results_and_questions_not_in_the_checkout(served: LiveGateway,
                                                            tmp_path: Path) -> None:
    path = result_file(tmp_path / "BFCL_v3_multi_turn_base_result.json", {
        Q0: [["[list_jars(shelf='top')]"], ["[use(label='sugar', cups=1.0), "
                                            "move_jar(label='flour', to_shelf='bottom')]"]],
        Q1: [["login(owner='Ada')"], ["```write_note(title='pantry', text='We are out of "
                                      "sugar.', tag='kitchen')```"], ["[shopping('sugar')]"]],
        "multi_turn_base_9": [["[list_jars(shelf='top')]"]],
        "multi_turn_long_context_0": [["[list_jars(shelf='top')]"]]})
    report = evaluate(served, "--results", str(path))
    assert report["decoder"] == "prompting"
    # BFCL's prompting decoder drops the positional 'sugar': shopping() adds nothing
    assert verdicts(report) == {Q0: (True, None),
                                Q1: (False, "multi_turn:instance_state_mismatch")}
    assert report["accuracy"] == 0.5 and report["scored"] == 2
    assert set(report["not_scored"]) == {"multi_turn_base_9", "multi_turn_long_context_0"}

    table = CliRunner().invoke(app, ["eval", "bfcl", "--from", str(CHECKOUT), "--url", served.url,
                                     "--api-key", served.api_key, "--results", str(path)])
    assert table.exit_code == 0, table.output
    assert "multi_turn:instance_state_mismatch" in table.stdout
    assert "accuracy 50.00%: 1 of 2 scored questions valid (2 not scored)" in table.stdout
    assert "not scored multi_turn_base_9: no such question" in table.stderr


def test_rollouts_of_imported_scenarios_are_scored_the_same_way(served: LiveGateway,
                                                                tmp_path: Path) -> None:
    episodes = [*reference_rollout(served, PANTRY, tmp_path / "pantry.jsonl"),
                *reference_rollout(served, BOTH, tmp_path / "both.jsonl")]
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(json.dumps(episode) + "\n" for episode in episodes))
    assert verdicts(evaluate(served, "--rollouts", str(path))) == {
        Q0: (True, None), Q1: (True, None)}

    # the agent's first answer loses its tool calls: turn 0 has no call left
    first = next(message for message in episodes[0]["messages"] if message.get("tool_calls"))
    first["tool_calls"], first["content"] = [], "The top shelf has flour and sugar."
    path.write_text(json.dumps(episodes[0]) + "\n")
    assert verdicts(evaluate(served, "--rollouts", str(path))) == {
        Q0: (False, "multi_turn:empty_turn_model_response")}


def test_the_served_reward_sees_the_ground_truths_results(served: LiveGateway) -> None:
    """Question 0's state-changing calls alone leave the state BFCL's ground truth leaves, but
    never return what its `list_jars` returns: BFCL fails that, and so does the reward (the
    reference's 1.0: tests/integration/test_import_bfcl.py)."""
    with (EnvClient(served.url, served.api_key) as client,
          client.create_session(PANTRY, scenario=Q0) as session):
        session.call("use", {"label": "sugar", "cups": 1.0})
        session.call("move_jar", {"label": "flour", "to_shelf": "bottom"})
        validation = session.validate()
        state = session.state().state
    assert [check.passed for check in validation.checks] == [True, False]
    assert validation.reward == 0.5
    assert state["execution_results"] == ['{"grams_left": 0}', '{"status": "flour is on bottom"}']


def test_answers_that_cannot_be_read_are_precise_errors(tmp_path: Path) -> None:
    """Nothing is scored, and no gateway is started, when the answers are not what they say."""
    broken = tmp_path / "result.json"
    broken.write_text('{"id": "multi_turn_base_0", "result": []}\n{"id": 3}\n')
    good = tmp_path / "good.json"
    good.write_text('{"id": "multi_turn_base_0", "result": []}\n')
    episodes = tmp_path / "rollouts.jsonl"
    episodes.write_text('{"env": "bfcl-pantryapi"}\n')
    for options, message in [
            (["--results", str(broken)], f"{broken}:2: not a BFCL result (an object with id and "
                                         "result)"),
            (["--rollouts", str(episodes)], f"{episodes}:1: not an episode of `envscaler "
                                            "rollout`"),
            (["--results", str(tmp_path / "missing.json")], "cannot read"),
            (["--results", str(broken), "--rollouts", str(episodes)], "give one of"),
            (["--results", str(good), "--decoder", "xml"], "unknown decoder 'xml'")]:
        result = CliRunner().invoke(app, ["eval", "bfcl", "--from", str(CHECKOUT), *options])
        assert result.exit_code == 1, result.output
        assert message in " ".join(result.stderr.split()), result.stderr
