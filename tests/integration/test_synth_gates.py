"""The executable and scenario gates, in real `process` sandboxes (the code never runs here)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from envscaler.format import derive_tools
from envscaler.sandbox.config import SandboxConfig
from envscaler.server.settings import Settings
from envscaler.synth.gates.executable import executable_gate
from envscaler.synth.gates.report import GateResult
from envscaler.synth.gates.scenario import ScenarioSpec, scenario_gate
from envscaler.synth.sandboxes import Limits, SandboxHub
from tests.conftest import new_instance

SOURCE = '''
from datetime import datetime
from typing import Dict, Optional, TypedDict


class ItemInfo(TypedDict):
    item_id: str
    count: int
    note: str


class Store:
    def __init__(self, init_config: dict):
        self.items: Dict[str, ItemInfo] = {}
        self.init_config = init_config

    def get_item(self, item_id: str) -> dict:
        """Get an item.

        Args:
            item_id (str): The item.
        """
        if not isinstance(item_id, str):
            return {"success": False, "error": "item_id must be a string"}
        item = self.items.get(item_id)
        if item is None:
            return {"success": False, "error": "not found"}
        return {"success": True, "data": dict(item)}

    def restock(self, item_id: str, count: int, note: Optional[str] = None) -> dict:
        if not isinstance(item_id, str) or not isinstance(count, int) or isinstance(count, bool):
            return {"success": False, "error": "bad arguments"}
        if note is not None and not isinstance(note, str):
            return {"success": False, "error": "note must be a string"}
        if count <= 0:
            return {"success": False, "error": "count must be positive"}
        item = self.items.get(item_id)
        if item is None:
            return {"success": False, "error": "not found"}
        item["count"] += count
        if note is not None:
            item["note"] = note
        return {"success": True, "message": f"restocked at {datetime.now().isoformat()}"}
'''
CONFIG = {"items": {"A": {"item_id": "A", "count": 1, "note": ""},
                    "B": {"item_id": "B", "count": 0, "note": "empty"}}}
LIMITS = Limits.from_settings(Settings(call_timeout=2.0, load_timeout=10.0))


def with_tool(code: str, header: str = "") -> str:
    body = "\n".join("    " + line if line else line for line in code.strip("\n").splitlines())
    return header + SOURCE + "\n" + body + "\n"


@pytest.fixture
async def hub(process_config: SandboxConfig) -> AsyncIterator[SandboxHub]:
    config = dataclasses.replace(process_config, sandbox_memory="1g")  # see test_synth_pipeline
    async with SandboxHub(config, LIMITS, limit=2, instance=new_instance()) as hub:
        yield hub


async def run_executable(hub: SandboxHub, source: str, config: dict[str, Any] | None = None,
                         **options: Any) -> GateResult:
    async with hub.sandbox("test-exec") as box:
        return await executable_gate(box, source=source, class_name="Store",
                                     tools=derive_tools(source, "Store"),
                                     init_config=CONFIG if config is None else config, seed=3,
                                     limits=LIMITS, **options)


def rules(result: GateResult) -> set[str]:
    return {problem.rule for problem in result.problems}


async def test_a_well_behaved_environment_passes(hub: SandboxHub) -> None:
    result = await run_executable(hub, SOURCE)
    assert result.passed, result.problems
    assert result.details["tools"] == 2 and result.details["calls"] == 6  # 3 valid calls a tool


async def test_a_tool_that_raises_on_valid_input_fails(hub: SandboxHub) -> None:
    result = await run_executable(hub, with_tool('''
def remove(self, item_id: str) -> dict:
    del self.items[item_id]
    return {"success": True, "message": "removed"}
'''))
    assert rules(result) == {"raises"}
    first = next(p for p in result.problems if p.rule == "raises")
    assert first.tool == "remove"
    assert "remove raised on valid input" in first.message and "KeyError" in first.message
    assert "env.py line" in first.message


@pytest.mark.parametrize(("code", "fragment"), [
    ('def tags(self) -> dict:\n    return {"success": True, "data": {"x", "y"}}',
     "result.data is a set, not a JSON value"),
    ('def stamp(self) -> dict:\n    return {"success": True, "data": datetime.now()}',
     "result.data is a datetime, not a JSON value"),
    ('def keys(self) -> dict:\n    return {"success": True, "data": {1: "a"}}',
     "result.data has the non-string key 1"),
    ('def ratio(self) -> dict:\n    return {"success": True, "data": float("nan")}',
     "result.data is nan"),
])
async def test_results_must_be_plain_json_as_returned(hub: SandboxHub, code: str,
                                                      fragment: str) -> None:
    result = await run_executable(hub, with_tool(code))
    assert rules(result) == {"json"}
    assert any(fragment in problem.message for problem in result.problems), result.problems


async def test_results_must_be_success_dicts(hub: SandboxHub) -> None:
    result = await run_executable(hub, with_tool('def size(self) -> dict:\n'
                                                 '    return len(self.items)'))
    assert rules(result) == {"result"}
    assert "size returned 2 for {}, not a dict with a boolean 'success'" in \
        result.problems[0].message


async def test_a_tool_that_trusts_its_schema_passes(hub: SandboxHub) -> None:
    """No type checks in the tool: the gateway refuses arguments that break the schema (an author
    given as 7) before a tool sees them, so the gate never sends them."""
    result = await run_executable(hub, with_tool('''
def set_note(self, item_id: str, note: str) -> dict:
    item = self.items.get(item_id)
    if item is None:
        return {"success": False, "error": "not found"}
    item["note"] = note.strip()
    return {"success": True, "message": "noted"}
'''))
    assert result.passed, result.problems


async def test_a_method_that_disagrees_with_its_schema_fails(hub: SandboxHub) -> None:
    result = await run_executable(hub, with_tool('''
def count(self, item_id: str) -> dict:
    return {"success": True, "data": len(self.items)}

def _count_all(self) -> dict:
    return {"success": True, "data": len(self.items)}

count = _count_all
'''))
    assert rules(result) == {"signature"}
    assert "count rejected schema-valid arguments" in result.problems[0].message


async def test_a_query_that_changes_the_state_fails(hub: SandboxHub) -> None:
    source = with_tool('''
def peek(self, item_id: str) -> dict:
    self.items.pop(item_id, None)
    return {"success": True}
''')
    result = await run_executable(hub, source, read_only=frozenset({"get_item", "peek"}))
    assert rules(result) == {"read-only"}
    # init_config holds the same items (the runtime sets its keys as attributes, as EnvScaler)
    assert result.problems[0].message == \
        "peek is a query but changed the state (changed: init_config, items)"
    assert (await run_executable(hub, source)).passed


async def test_state_that_survives_a_reset_breaks_determinism(hub: SandboxHub) -> None:
    result = await run_executable(hub, with_tool('''
def visits(self) -> dict:
    import os
    os.environ["VISITS"] = os.environ.get("VISITS", "") + "x"  # process state: survives a reset
    return {"success": True, "data": len(os.environ["VISITS"])}
'''))
    assert rules(result) == {"determinism"}
    assert "visits gave different results for the same calls from the same seed" in \
        result.problems[0].message


async def test_module_globals_do_not_survive_a_reset(hub: SandboxHub) -> None:
    """A reset executes the module anew, so it is as good as a fresh sandbox."""
    result = await run_executable(hub, with_tool('''
def visits(self) -> dict:
    SEEN.append(1)
    return {"success": True, "data": len(SEEN)}
''', header="SEEN = []\n"))
    assert "determinism" not in rules(result), result.problems


async def test_a_tool_that_never_returns_stops_the_gate(hub: SandboxHub) -> None:
    result = await run_executable(hub, with_tool('def spin(self) -> dict:\n    while True:\n'
                                                 '        pass'))
    assert rules(result) == {"timeout"}
    assert result.problems[0].tool == "spin"


async def test_an_initial_state_that_does_not_load_fails(hub: SandboxHub) -> None:
    source = SOURCE.replace("self.init_config = init_config",
                            "self.init_config = init_config\n        self.size = init_config['size']")
    result = await run_executable(hub, source)
    assert rules(result) == {"load"}
    assert "KeyError: 'size'" in result.problems[0].message


CHECK_COUNT = "def check_func(final_state):\n    return final_state['items']['B']['count'] == 5\n"
CHECK_NOTE = "def check_func(final_state):\n    return final_state['items']['B']['note'] == 'full'\n"
CHECK_KEPT = "def check_func(final_state):\n    return final_state['items']['A']['count'] == 1\n"
RESTOCK = [{"name": "restock", "arguments": {"item_id": "B", "count": 5, "note": "full"}}]


async def run_scenario(hub: SandboxHub, checks: list[str], solution: list[dict[str, Any]] | None,
                       source: str = SOURCE) -> GateResult:
    spec = ScenarioSpec(init_config=CONFIG, items=[f"Has item {n}" for n in range(len(checks))],
                        checks=checks, solution=solution)
    async with hub.sandbox("test-scen") as box:
        return await scenario_gate(box, judge=hub.judge, source=source, class_name="Store",
                                   tool_names=["get_item", "restock"], scenario=spec, seed=1,
                                   limits=LIMITS)


async def test_a_scenario_whose_solution_satisfies_every_check_passes(hub: SandboxHub) -> None:
    result = await run_scenario(hub, [CHECK_COUNT, CHECK_NOTE, CHECK_KEPT], RESTOCK)
    assert result.passed, result.problems
    assert result.details == {"initial": [False, False, True], "final": [True, True, True],
                              "reward": 1.0}


@pytest.mark.parametrize(("checks", "solution", "rule", "fragment"), [
    ([CHECK_COUNT, "def check_func(final_state):\n    return final_state['missing']\n"], RESTOCK,
     "check-runs", "check 2 (Has item 1) does not run on the initial state: KeyError: 'missing'"),
    ([CHECK_COUNT, "def check_func(final_state):\n    return 1\n"], RESTOCK,
     "check-runs", "check_func returned int, not bool"),
    ([CHECK_KEPT], RESTOCK, "already-done", "every check already holds on the initial state"),
    ([CHECK_COUNT], [{"name": "restock", "arguments": {"item_id": "Z", "count": 5}}],
     "solution", 'solution step 1 (restock) answered success=false: "not found"'),
    ([CHECK_COUNT], [{"name": "restock", "arguments": {"item_id": "B"}}],
     "solution", "solution step 1 (restock) failed: ArgumentError"),
    ([CHECK_COUNT], [{"name": "get_item", "arguments": {"item_id": "B"}}],
     "no-change", "the reference solution does not change the state"),
    ([CHECK_COUNT, ("def check_func(final_state):\n    return final_state['items']['B']['note'] "
      "== 'FULL'\n")], RESTOCK, "check-fails",
     "after the reference solution, check 2 fails: Has item 1"),
    (["import os\ndef check_func(final_state):\n    return os.getcwd() == '/'\n"], RESTOCK,
     "check-source", "check 1 (Has item 0): line 1: imports os"),
])
async def test_broken_scenarios_are_caught_with_their_reason(
        hub: SandboxHub, checks: list[str], solution: list[dict[str, Any]], rule: str,
        fragment: str) -> None:
    result = await run_scenario(hub, checks, solution)
    assert [problem.rule for problem in result.problems] == [rule]
    assert fragment in result.problems[0].message


async def test_a_scenario_without_a_solution_is_checked_as_far_as_it_can_be(hub: SandboxHub) -> None:
    result = await run_scenario(hub, [CHECK_COUNT], None)
    assert result.passed and result.details["solution"] == "none"
