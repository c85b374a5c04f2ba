"""Reading a tau-bench checkout (tests/fixtures/tau_bench, a shop of our own in tau's layout) and
turning it into environment code, checks and scored action files: pure logic, nothing of the
checkout runs here (the integration test runs it in sandboxes)."""

from __future__ import annotations

import json
from hashlib import sha256
from pathlib import Path

import pytest

from envscaler.format.toolschema import derive_tools
from envscaler.importers.tau_bench.checkout import CheckoutError, read_domain
from envscaler.importers.tau_bench.envcode import CLASS_NAME, build
from envscaler.importers.tau_bench.reward import check_source, data_hash, outputs_found
from envscaler.importers.replay_score import AnswersFileError
from envscaler.importers.tau_bench.scoring import ActionsFileError, read_actions, terminate_tools

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "tau_bench"


def without_descriptions(schema: object) -> object:
    if isinstance(schema, dict):
        return {key: without_descriptions(value) for key, value in schema.items()
                if key not in ("description", "additionalProperties")}
    if isinstance(schema, list):
        return [without_descriptions(value) for value in schema]
    return schema


def test_the_checkout_is_read_without_running_it() -> None:
    domain = read_domain(CHECKOUT, "retail")
    assert [tool.name for tool in domain.tools] == [
        "get_order_details", "cancel_pending_order", "add_order_notes",
        "transfer_to_human_agents"]
    assert list(domain.data_files) == ["orders", "users"]
    assert domain.terminate_tools == ("transfer_to_human_agents",)
    assert domain.rules[0] == "You help shoppers with their orders."
    assert [task.outputs for task in domain.tasks] == [(), ("42.5", "Five Stars"), ()]
    assert domain.tasks[1].actions[1].kwargs == {"order_id": "#O2",
                                                 "notes": [{"text": "great", "stars": 5}]}
    assert set(json.loads(domain.database_text())) == {"orders", "users"}


def test_a_missing_domain_or_checkout_is_a_precise_error(tmp_path: Path) -> None:
    with pytest.raises(CheckoutError, match="no domain 'airline'"):
        read_domain(CHECKOUT, "airline")
    with pytest.raises(CheckoutError, match="is not a tau-bench checkout"):
        read_domain(tmp_path, "retail")


def test_the_served_schemas_are_taus_plus_respond() -> None:
    domain = read_domain(CHECKOUT, "retail")
    derived = {tool["function"]["name"]: tool["function"]
               for tool in derive_tools(build(domain).source, CLASS_NAME)}
    assert list(derived) == [*(tool.name for tool in domain.tools), "respond"]
    for tool in domain.tools:
        theirs = tool.schema["function"]
        assert without_descriptions(derived[tool.name]["parameters"]) == without_descriptions(
            theirs["parameters"]), tool.name
        assert derived[tool.name]["description"] == " ".join(theirs["description"].split())
    cancel = derived["cancel_pending_order"]["parameters"]["properties"]
    assert cancel["reason"]["enum"] == ["no longer needed", "ordered by mistake"]
    assert cancel["order_id"]["description"] == "The order."


def test_the_hash_is_taus_consistent_hash() -> None:
    state = {"orders": {"b": [1, 2.5], "a": {"y": None, "x": True}}, "users": {},
             "messages_to_user": ["ignored"]}
    tau_text = str((("orders", (("a", (("x", True), ("y", None))), ("b", (1, 2.5)))),
                    ("users", ())))
    assert data_hash(state, ("orders", "users")) == sha256(tau_text.encode()).hexdigest()
    assert data_hash({**state, "users": {"u": 1}}, ("orders", "users")) != data_hash(
        state, ("orders", "users"))


def test_outputs_are_found_as_tau_finds_them() -> None:
    assert outputs_found(["It costs 1,042.50 dollars", "FIVE stars!"], ("1042.50", "five stars"))
    assert not outputs_found(["It costs 1,042.50 dollars"], ("1,042.50",))  # tau drops commas
    assert not outputs_found([], ("42",))
    assert outputs_found([], ())


def run_check(source: str, state: dict) -> bool:
    namespace: dict = {}
    exec(compile(source, "check", "exec", dont_inherit=True), namespace)  # noqa: S102
    return namespace["check_func"](state)


def test_the_check_is_taus_reward() -> None:
    state = {"orders": {"#O1": {"status": "cancelled"}}, "users": {},
             "messages_to_user": ["Your total was 42.5"]}
    digest = data_hash(state, ("orders", "users"))
    source = check_source(("orders", "users"), digest, ("42.5",), "messages_to_user")
    assert run_check(source, state) is True
    assert run_check(source, {**state, "messages_to_user": ["done"]}) is False
    assert run_check(source, {**state, "orders": {"#O1": {"status": "pending"}}}) is False


def write(path: Path, *lines: object) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                            for line in lines))
    return path


def test_actions_files_are_read_with_precise_errors(tmp_path: Path) -> None:
    good = {"task_id": 0, "env": "retail", "actions": [{"name": "x", "kwargs": {}}]}
    [line] = read_actions(write(tmp_path / "a.jsonl", good))
    assert (line.key, line.outputs) == ("retail-0", [])
    cases = [(("{",), "a.jsonl:1: not JSON"),
             ((good, good), "a.jsonl:2: retail-0 is scored twice"),
             (({**good, "env": "mall"},), "a.jsonl:1: env: Input should be 'retail' or"),
             (({**good, "task_id": -1},), "a.jsonl:1: task_id: Input should be greater"),
             (({**good, "actions": [{"kwargs": {}}]},), "a.jsonl:1: actions.0.name: Field"),
             (({**good, "extra": 1},), "a.jsonl:1: extra: Extra inputs are not permitted"),
             (("",), "a.jsonl: no answer in it")]
    for lines, message in cases:
        with pytest.raises(AnswersFileError) as caught:
            read_actions(write(tmp_path / "a.jsonl", *lines))
        assert message in str(caught.value)


def test_the_terminating_tools_are_read_from_the_imported_env(tmp_path: Path) -> None:
    folder = tmp_path / "tau-retail"
    folder.mkdir()
    (folder / "env.py").write_text(build(read_domain(CHECKOUT, "retail")).source)
    assert terminate_tools(tmp_path, "retail") == ("transfer_to_human_agents",)
    with pytest.raises(ActionsFileError, match="tau-airline/env.py: cannot read"):
        terminate_tools(tmp_path, "airline")
