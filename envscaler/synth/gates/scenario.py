"""The scenario gate: a scenario's checks and reference solution, verified in a sandbox.

Rules:

- ``check-source``: every check function passes the static rules (``check_function_problems``);
- ``load``: the environment loads with the scenario's ``init_config``;
- ``check-runs``: every check runs on the initial state and returns a bool;
- ``already-done``: not every check holds on the initial state (else the task asks for nothing);
- ``solution``: each call of the reference solution succeeds (no error, no ``success: false``);
- ``no-change``: the solution changes the state (a task must change state);
- ``check-fails``: after the solution, every check holds (reward 1.0);
- ``infrastructure``: the runtime itself failed (the pipeline retries the item in a later run).

A scenario without a solution (imported, ``verified: false``) is checked up to ``already-done``
and reported with ``details.solution = "none"``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from envscaler.sandbox.checkers import ChecksStarved
from envscaler.sandbox.errors import CapacityExhausted, RuntimeFault, SandboxError
from envscaler.sandbox.sandbox import Sandbox
from envscaler.synth.gates.report import GateResult, Problem
from envscaler.synth.gates.static import check_function_problems
from envscaler.synth.sandboxes import INFRASTRUCTURE, Limits, is_infrastructure_fault

MAX_SHOWN_CHARS = 300
Judge = Callable[[Sandbox, list[str]], Awaitable[list[dict[str, Any]]]]


@dataclass(frozen=True)
class ScenarioSpec:
    """What the gate needs of a scenario (built from ``envformat.Scenario`` or pipeline data)."""

    init_config: dict[str, Any]
    items: list[str]
    checks: list[str]
    solution: list[dict[str, Any]] | None


async def scenario_gate(sandbox: Sandbox, *, judge: Judge, source: str, class_name: str,
                        tool_names: list[str], scenario: ScenarioSpec, seed: int,
                        limits: Limits) -> GateResult:
    """``judge``: the verdicts of checks on a sandbox's states (``SandboxHub.judge``)."""
    result = GateResult(gate="scenario")
    problems = result.problems
    for index, check in enumerate(scenario.checks, start=1):
        for problem in check_function_problems(check):
            problems.append(Problem("check-source", f"check {index} ({_item(scenario, index)}): "
                                    f"{problem}"))
    if problems:
        return result
    try:
        await _verify(sandbox, judge, source, class_name, tool_names, scenario, seed, limits,
                      result)
    except RuntimeFault as exc:
        rule = INFRASTRUCTURE if is_infrastructure_fault(exc.kind) else "sandbox"
        problems.append(Problem(rule, f"{exc.kind}: {exc.message}"))
    except (ChecksStarved, CapacityExhausted) as exc:  # the machine's, not the scenario's
        problems.append(Problem(INFRASTRUCTURE, str(exc)))
    except SandboxError as exc:
        problems.append(Problem("sandbox", str(exc)))
    return result


async def _verify(sandbox: Sandbox, judge: Judge, source: str, class_name: str,
                  tool_names: list[str],
                  scenario: ScenarioSpec, seed: int, limits: Limits, result: GateResult) -> None:
    problems = result.problems
    try:
        await sandbox.load(source=source, class_name=class_name, tools=tool_names,
                           init_config=scenario.init_config, seed=seed,
                           max_result_bytes=limits.max_result_bytes, timeout=limits.load_timeout)
    except RuntimeFault as exc:
        if is_infrastructure_fault(exc.kind):
            raise
        problems.append(Problem("load", f"does not load with this init_config: {exc.message}"))
        return
    initial = await judge(sandbox, scenario.checks)
    result.details["initial"] = [verdict["passed"] for verdict in initial]
    for index, verdict in enumerate(initial, start=1):
        if verdict["error"] is not None:
            problems.append(Problem("check-runs", f"check {index} ({_item(scenario, index)}) does "
                                    f"not run on the initial state: {verdict['error']}"))
    if problems:
        return
    if initial and all(verdict["passed"] for verdict in initial):
        problems.append(Problem("already-done", "every check already holds on the initial state"))
        return
    if scenario.solution is None:
        result.details["solution"] = "none"
        return
    before = await sandbox.state(timeout=limits.call_timeout)
    for step, call in enumerate(scenario.solution, start=1):
        name, arguments = call["name"], call.get("arguments") or {}
        try:
            answer = await sandbox.call(name, arguments, timeout=limits.call_timeout)
        except RuntimeFault as exc:
            if is_infrastructure_fault(exc.kind):
                raise
            problems.append(Problem("solution", f"solution step {step} ({name}) failed: "
                                    f"{exc.kind}: {exc.message}"))
            return
        if isinstance(answer, dict) and answer.get("success") is False:
            problems.append(Problem("solution", f"solution step {step} ({name}) answered "
                                    f"success=false: {_clip(json.dumps(answer.get('error')))}"))
            return
    after = await sandbox.state(timeout=limits.call_timeout)
    if _canonical(before) == _canonical(after):
        problems.append(Problem("no-change", "the reference solution does not change the state"))
        return
    final = await judge(sandbox, scenario.checks)
    result.details["final"] = [verdict["passed"] for verdict in final]
    passed = sum(verdict["passed"] for verdict in final)
    result.details["reward"] = round(passed / len(final), 4) if final else 0.0
    for index, verdict in enumerate(final, start=1):
        if not verdict["passed"]:
            error = f" ({verdict['error']})" if verdict["error"] else ""
            problems.append(Problem("check-fails", f"after the reference solution, check {index} "
                                    f"fails: {_item(scenario, index)}{error}"))


def _item(scenario: ScenarioSpec, index: int) -> str:
    return _clip(scenario.items[index - 1]) if index - 1 < len(scenario.items) else "?"


def _canonical(state: dict[str, Any]) -> str:
    return json.dumps(state, sort_keys=True)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + "..."
