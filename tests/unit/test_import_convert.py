"""Converting single EnvScaler release records (environment records, RL scenario rows) into our
format: the id mapping, the field mapping, tools derived from the code (never the release's),
JSON strings decoded, and every reason a record is refused."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from envscaler.format.loader import content_hash
from envscaler.format.models import Scenario
from envscaler.format.toolschema import derive_tools
from envscaler.importers.envscaler_release import (
    RecordError,
    convert_env,
    convert_scenario,
    env_id_for,
    scenario_id_for,
)
from envscaler.importers.envscaler_release.convert import release_env_id, scenario_env_id

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "envscaler_release"
HF_ENVS = json.loads((FIXTURE / "hf" / "191_env_metadata_processed.json").read_text())
HF_ROWS = json.loads((FIXTURE / "hf" / "envscaler_rl_scenario_metadata.json").read_text())
OPTIONS = {"created": "2026-01-09", "pipeline_version": "envscaler-release@local"}


def env_record(env_id: str) -> dict[str, Any]:
    return copy.deepcopy(next(record for record in HF_ENVS if record["env_id"] == env_id))


def row(task_id: str) -> dict[str, Any]:
    return copy.deepcopy(next(item for item in HF_ROWS if item["task_id"] == task_id))


def converted(env_id: str = "env_1_rl", **changes: Any):  # type: ignore[no-untyped-def]
    record = env_record(env_id)
    record.update(changes)
    return convert_env(record, env_id, **OPTIONS)


# --- ids ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("release_id", "ours"), [
    ("env_12_rl", "envscaler_env_12_rl"),
    ("env_1_sft", "envscaler_env_1_sft"),
    ("Env 7/SFT", "envscaler_env_7_sft"),
    ("env-3.rl", "envscaler_env-3_rl"),
    ("  ENV_148_RL  ", "envscaler_env_148_rl"),
])
def test_env_ids_are_the_prefixed_slug_of_the_release_id(release_id: str, ours: str) -> None:
    assert env_id_for(release_id) == ours


@pytest.mark.parametrize("release_id", ["", "???", "x" * 60])
def test_unusable_env_ids_are_refused(release_id: str) -> None:
    with pytest.raises(RecordError):
        env_id_for(release_id)


@pytest.mark.parametrize(("task_id", "ours"), [
    ("env_148_rl-task_3", "env_148_rl-task_3"),  # the release's form, kept
    ("0109-123456", "0109-123456"),  # the pipeline's timestamp form, kept
    ("0109 12:34:56", "0109-12-34-56"),
    ("_task/1", "task-1"),
])
def test_scenario_ids_are_task_ids_made_valid(task_id: str, ours: str) -> None:
    assert scenario_id_for(task_id) == ours


def test_env_id_of_a_record_comes_from_its_field_or_its_dict_key() -> None:
    assert release_env_id({"env_id": "env_1_rl"}, None) == "env_1_rl"
    assert release_env_id({"env_class_name": "X"}, "env_2_rl") == "env_2_rl"
    assert release_env_id({"env_id": 7}, None) == "7"
    with pytest.raises(RecordError, match="differs from its key"):
        release_env_id({"env_id": "env_1_rl"}, "env_2_rl")
    with pytest.raises(RecordError, match="not an object"):
        release_env_id("env_1_rl", None)
    with pytest.raises(RecordError, match="env_id is missing"):
        release_env_id({}, None)
    with pytest.raises(RecordError, match="env_id is missing"):
        scenario_env_id({"task_id": "t"})


# --- environments -------------------------------------------------------------------------------

def test_an_environment_record_maps_field_by_field() -> None:
    record = env_record("env_1_rl")
    env = convert_env(record, "env_1_rl", **OPTIONS)
    manifest = env.manifest
    assert env.env_id == manifest.id == "envscaler_env_1_rl"
    assert manifest.class_name == record["env_class_name"] == "MobileMessagingApplication"
    assert manifest.summary == record["environment_summary"]
    assert manifest.introduction == record["environment_introduction"]
    assert [entity.model_dump() for entity in manifest.state_space] == \
        record["state_space_definition"]
    assert manifest.constraint_rules == record["constraints_rules"]
    assert [(op.name, op.description, op.type) for op in manifest.operations] == [
        (op["operation_name"], op["operation_description"], op["operation_type"])
        for op in record["operation_list"]]
    assert env.source_bytes == record["env_class_code"].encode("utf-8")  # verbatim
    assert manifest.provenance.model_dump() == {
        "model": "EnvScaler release (gpt-4.1)", "created": "2026-01-09",
        "pipeline_version": "envscaler-release@local",
        "content_hash": content_hash(record["env_class_code"].encode("utf-8"))}


def test_tools_are_derived_from_the_code_and_the_release_schemas_ignored() -> None:
    record = env_record("env_2_rl")
    env = convert_env(record, "env_2_rl", **OPTIONS)
    assert env.manifest.tools == derive_tools(record["env_class_code"], record["env_class_name"])
    theirs = {tool["function"]["name"]: tool for tool in json.loads(record["tools"])}
    ours = {tool["function"]["name"]: tool for tool in env.manifest.tools}
    # the release marks a parameter with a default as required; we do not
    assert "boxes_per_delivery" in theirs["create_subscription"]["function"]["parameters"][
        "required"]
    params = ours["create_subscription"]["function"]["parameters"]
    assert "boxes_per_delivery" not in params["required"]
    assert params["properties"]["boxes_per_delivery"]["default"] == 1
    assert params["properties"]["frequency"]["description"] == '"monthly" or "quarterly".'
    # the release exposes private helpers; we do not, and say so
    assert "_next_delivery" in theirs and "_next_delivery" not in ours
    assert env.release_only_tools == ("_next_delivery",)
    assert any("_next_delivery" in warning and "private" in warning for warning in env.warnings)


def test_tools_may_be_a_json_string_or_a_list_and_broken_ones_only_warn() -> None:
    record = env_record("env_1_rl")
    as_list = converted(tools=json.loads(record["tools"]))
    as_string = converted()
    assert as_list.manifest == as_string.manifest
    assert as_list.release_only_tools == ("_generate_message_id", "_find_conversation")
    broken = converted(tools="[{not json")
    assert broken.manifest.tools == as_string.manifest.tools
    assert any(warning.startswith("tools is not valid JSON") for warning in broken.warnings)
    assert broken.release_only_tools == ()


def test_other_published_variants_of_metadata_fields_are_accepted() -> None:
    env = converted(
        state_space_definition=json.dumps([{
            "entity_name": "User",
            "attributes": [{"name": "_id", "type": "str", "description": "id"}, "phone_number"],
        }]),
        operation_list=[{"operation_name": "send_message", "operation_type": "modify",
                         "description": "Send."},
                        {"operation_name": "get_user_by_id", "operation_type": "Query",
                         "operation_description": "Get."}],
        constraints_rules=json.dumps(["one rule"]),
    )
    assert env.manifest.state_space[0].model_dump() == {
        "entity": "User", "attributes": "_id (str), phone_number", "description": ""}
    assert [(op.name, op.type, op.description) for op in env.manifest.operations] == [
        ("send_message", "state_change", "Send."), ("get_user_by_id", "query", "Get.")]
    assert env.manifest.constraint_rules == ["one rule"]


def test_missing_prose_fields_are_warnings_not_errors() -> None:
    record = env_record("env_1_rl")
    for name in ("environment_summary", "environment_introduction", "state_space_definition",
                 "constraints_rules", "operation_list", "tools"):
        del record[name]
    env = convert_env(record, "env_1_rl", **OPTIONS)
    assert env.manifest.summary == "" and env.manifest.operations == []
    assert {"environment_summary is missing", "operation_list is missing"} <= set(env.warnings)


@pytest.mark.parametrize(("changes", "reason"), [
    ({"env_class_code": "class A:\n    def f(self)\n        pass\n"},
     "env_class_code does not parse: expected ':' (line 2)"),
    ({"env_class_name": "Missing"},
     "does not define class 'Missing' at top level (classes found: UserInfo, "),
    ({"env_class_name": "not a name"}, "is not a Python class name"),
    ({"env_class_code": ""}, "env_class_code is missing or not a string"),
    ({"env_class_code": None}, "env_class_code is missing or not a string"),
    ({"env_class_name": 3}, "env_class_name is missing or not a string"),
    ({"env_class_code": "class A:\n    def f(self, x, /):\n        return {}\n",
      "env_class_name": "A"}, "positional-only parameters"),
    ({"env_class_code": "s = '\ud800'\nclass A:\n    pass\n", "env_class_name": "A"},
     "cannot be encoded as UTF-8"),
    ({"operation_list": [{"operation_name": "x", "operation_type": "teleport"}]},
     "operation_list[0] (x) has operation_type 'teleport'"),
    ({"operation_list": "not json"}, "operation_list is not valid JSON"),
    ({"state_space_definition": [{"attributes": "a"}]},
     "state_space_definition[0] has no entity name"),
    ({"state_space_definition": {"entity": "User"}},
     "state_space_definition is a JSON object, not a list"),
    ({"constraints_rules": ["ok", 3]}, "constraints_rules[1] is a JSON number, not a string"),
    ({"environment_summary": ["a"]}, "environment_summary: expected a string"),
])
def test_bad_environment_records_are_refused_with_the_reason(changes: dict[str, Any],
                                                             reason: str) -> None:
    with pytest.raises(RecordError) as caught:
        converted(**changes)
    assert reason in str(caught.value)


def test_the_release_fixture_bad_records_fail_for_their_reasons() -> None:
    with pytest.raises(RecordError, match=r"does not parse: expected ':' \(line 29\)"):
        convert_env(env_record("env_4_rl"), "env_4_rl", **OPTIONS)
    with pytest.raises(RecordError, match="does not define class 'LibraryCatalogSystem'"):
        convert_env(env_record("env_5_rl"), "env_5_rl", **OPTIONS)


# --- scenarios ----------------------------------------------------------------------------------

MESSAGING = converted()


def test_a_scenario_row_maps_to_an_unverified_rl_scenario() -> None:
    source = row("env_1_rl-task_1")
    scenario = convert_scenario(source, MESSAGING)
    assert isinstance(scenario, Scenario)
    assert scenario.id == "env_1_rl-task_1" and scenario.split == "rl"
    assert scenario.task == source["task"]
    assert scenario.init_config == json.loads(source["init_config"])
    assert list(scenario.init_config) == ["users", "contacts", "messages", "conversations"]
    assert [(item.item, item.check_func) for item in scenario.checklist] == [
        (item["check_item"], item["check_func"]) for item in source["checklist_with_func"]]
    assert scenario.solution is None and scenario.verified is False
    # and it is what a scenarios.jsonl line says
    assert Scenario.model_validate_json(scenario.model_dump_json()) == scenario


def test_init_config_and_checklist_may_come_decoded() -> None:
    source = row("env_1_rl-task_2")
    decoded = {**source, "init_config": json.loads(source["init_config"]),
               "checklist_with_func": json.dumps(source["checklist_with_func"])}
    assert convert_scenario(decoded, MESSAGING) == convert_scenario(source, MESSAGING)


@pytest.mark.parametrize(("changes", "reason"), [
    ({"init_config": "{'users': {}}"},
     ("init_config is not valid JSON: Expecting property name enclosed in double quotes "
      "(line 1, column 2)")),
    ({"init_config": "[]"}, "init_config is a JSON list, not an object"),
    ({"init_config": None}, "init_config is missing"),
    ({"task": "  "}, "task is missing or blank"),
    ({"task_id": None}, "task_id is missing or not a string"),
    ({"env_class_name": "OtherClass"},
     "env_class_name 'OtherClass' differs from its environment's ('MobileMessagingApplication')"),
    ({"checklist_with_func": []}, "checklist_with_func is empty"),
    ({"checklist_with_func": None}, "checklist_with_func is missing"),
    ({"checklist_with_func": [{"check_item": "Has it?",
                               "check_func": "def check_func(final_state)\n    return True\n"}]},
     "checklist_with_func[0].check_func does not parse: expected ':'"),
    ({"checklist_with_func": [{"check_item": "Has it?",
                               "check_func": "def check(final_state):\n    return True\n"}]},
     "checklist_with_func[0].check_func does not define check_func(final_state)"),
    ({"checklist_with_func": [{"check_item": "Has it?",
                               "check_func": "def check_func(a, b):\n    return True\n"}]},
     "must take exactly one positional parameter"),
    ({"checklist_with_func": [{"check_func": "def check_func(s):\n    return True\n"}]},
     "checklist_with_func[0].check_item is missing"),
    ({"checklist_with_func": ["Has it?"]}, "checklist_with_func[0] is a JSON string"),
])
def test_bad_scenario_rows_are_refused_with_the_reason(changes: dict[str, Any],
                                                       reason: str) -> None:
    source = row("env_1_rl-task_1")
    source.update(changes)
    with pytest.raises(RecordError) as caught:
        convert_scenario(source, MESSAGING)
    assert reason in str(caught.value)
