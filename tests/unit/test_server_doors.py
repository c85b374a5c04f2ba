"""The doors' pure parts: ORS's answers and event chunks, task specs that carry nothing a policy
could use against its judge, and the doors found in their package."""

from __future__ import annotations

from pathlib import Path

import pytest

from envscaler.server.catalogue import ServedCatalogue, ServedEnv
from envscaler.server.doors import LAST, discover
from envscaler.server.doors.episodes import Outcome, call
from envscaler.server.doors.ors import chunks, run_tool_output
from envscaler.server.doors.tasks import parse_spec, task_at
from envscaler.server.errors import ApiError


@pytest.fixture(scope="module")
def library() -> ServedEnv:
    return ServedCatalogue(Path(__file__).parents[2] / "generated_envs").env("library_loans")


def test_chunks_rejoin_and_never_start_with_a_space() -> None:
    text = ('{"a": "' + " x" * 5000 + '"}')
    pieces = chunks(text, 10)
    assert "".join(pieces) == text
    assert all(piece and not piece.startswith(" ") for piece in pieces)
    assert chunks("") == [""]


def test_refused_calls_have_reasons_and_a_tools_failure_is_an_output() -> None:
    unknown = Outcome(error={"type": "UnknownTool", "message": "no tool x"}, status=404)
    assert run_tool_output(unknown) == {"ok": False, "error": "UnknownTool: no tool x",
                                        "reason": "not_found"}
    busy = Outcome(error={"type": "SessionBusy", "message": "busy"}, status=503)
    assert run_tool_output(busy) == {"ok": False, "error": "SessionBusy: busy"}
    for failure in (Outcome(error={"type": "ToolException", "message": "boom"}),
                    Outcome(error={"type": "Timeout", "message": "late"}, status=504)):
        output = run_tool_output(failure)["output"]
        assert output["metadata"] == {"error": failure.error} and output["finished"] is False
    done = run_tool_output(Outcome(result={"reward": 0.5, "passed": 1, "total": 2}, done=True,
                                   reward=0.5))["output"]
    assert (done["reward"], done["finished"], done["metadata"]["passed"]) == (0.5, True, 1)


def test_task_specs_name_a_scenario_and_nothing_else(library: ServedEnv) -> None:
    spec = task_at(library, "train", 0)
    assert spec == {"env": "library_loans", "scenario": "library_loans-001", "seed": 0}
    assert parse_spec(library, spec).scenario == "library_loans-001"
    for bad, field in (({"scenario": "library_loans-001", "checklist": []}, "task_spec.checklist"),
                       ({"scenario": "library_loans-001", "env": "other"}, "task_spec.env"),
                       ({}, "task_spec.scenario")):
        with pytest.raises(ApiError) as refused:
            parse_spec(library, bad)
        assert refused.value.field == field
    with pytest.raises(ApiError, match="no split 'dev'"):
        task_at(library, "dev", 0)


async def test_submit_takes_no_arguments() -> None:
    """Refused before any session is read: the service is never reached."""
    for arguments, field in (({"answer": "42"}, "answer"), ('{"answer": 1}', "arguments")):
        outcome = await call(None, None, "unused", "submit", arguments)  # type: ignore[arg-type]
        assert outcome.status == 422 and outcome.error is not None
        assert (outcome.error["type"], outcome.error["field"]) == ("InvalidArguments", field)


def test_every_door_is_found_and_ors_at_the_root_is_mounted_last() -> None:
    found = discover()
    assert [door.name for door in found] == ["mcp", "nemo_gym", "openenv", "ors"]
    assert found[-1].order == LAST
    assert [door.name for door in found if door.call_path] == ["nemo_gym"]
    assert [door.name for door in found if door.layer] == ["mcp"]
