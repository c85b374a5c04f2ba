"""Pure logic of the NeMo Gym door and rows: reward statistics of verify responses, and the
gateway's tool schemas in the Responses API's shape."""

from __future__ import annotations

import pytest
from envscaler_client.adapters.nemo_gym import responses_tools

from envscaler.server.doors.nemo_gym import aggregate, is_tool_path


def test_aggregate_groups_rewards_by_task_and_overall() -> None:
    metrics = aggregate([{"_ng_task_index": 0, "reward": 1.0},
                         {"_ng_task_index": 0, "reward": 0.5},
                         {"_ng_task_index": 1, "reward": 0},
                         {"_ng_task_index": 1, "reward": True},      # not a number: left out
                         {"_ng_task_index": 2, "reward": None},
                         {"reward": 0.25}])                           # no task index: task 0
    groups = {group["_ng_task_index"]: group for group in metrics["group_level_metrics"]}
    assert set(groups) == {0, 1}
    assert groups[0]["mean/reward"] == pytest.approx(1.75 / 3) and groups[0]["count"] == 3
    assert groups[0]["pass@1/reward_1"] == pytest.approx(1 / 3)
    assert groups[1] == {"_ng_task_index": 1, "mean/reward": 0.0, "max/reward": 0.0,
                         "min/reward": 0.0, "pass@1/reward_1": 0.0, "count": 1}
    overall = metrics["agent_metrics"]
    assert overall["count"] == 4 and overall["mean/reward"] == pytest.approx(1.75 / 4)
    assert (overall["max/reward"], overall["min/reward"]) == (1.0, 0.0)
    assert metrics["key_metrics"] == {"mean/reward": overall["mean/reward"],
                                      "pass@1/reward_1": 0.25}


def test_aggregate_of_nothing_is_empty() -> None:
    assert aggregate([{"reward": "high"}]) == {"group_level_metrics": [], "agent_metrics": {},
                                               "key_metrics": {}}


def test_responses_tools_flattens_function_schemas() -> None:
    parameters = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    tools = [{"type": "function", "function": {"name": "f", "description": "does f",
                                               "parameters": parameters}},
             {"type": "function", "function": {"name": "g"}}]
    assert responses_tools(tools) == [
        {"type": "function", "name": "f", "description": "does f", "parameters": parameters,
         "strict": False},
        {"type": "function", "name": "g", "description": "",
         "parameters": {"type": "object", "properties": {}}, "strict": False}]


def test_tool_paths_are_the_doors_other_names() -> None:
    assert is_tool_path("/nemo-gym/library_loans/get_member")
    assert not any(is_tool_path(path) for path in (
        "/nemo-gym/library_loans/verify", "/nemo-gym/library_loans/seed_session",
        "/nemo-gym/library_loans/reverify_mode", "/nemo-gym//get_member",
        "/nemo-gym/library_loans/", "/nemo-gym/a/b/c", "/v1/sessions/x/calls"))
