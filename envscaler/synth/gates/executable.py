"""The executable gate: every tool called in a sandbox with arguments generated from its schema.

Rules:

- ``load``: the environment loads and instantiates with the test configuration;
- ``raises``: no tool raises on valid input (a crash ended the episode with reward 0 in the
  original);
- ``signature``: schema-valid arguments bind to the tool's signature (an ``ArgumentError`` means the
  schema and the method the class really has disagree);
- ``result``: on valid input a tool returns a dict whose ``success`` is a bool;
- ``json``: results are JSON values as returned, checked inside the sandbox before the runtime's own
  conversion (which would otherwise hide sets, datetimes, objects, NaN, non-string keys);
- ``read-only``: a tool the manifest calls a query leaves the state as it found it;
- ``determinism``: the whole sequence run again from the same configuration and seed gives
  identical results and states;
- ``timeout``/``sandbox``: a call over its deadline, or a sandbox that dies, fails the gate;
- ``infrastructure``: the runtime itself failed (not the environment's code): the pipeline
  retries such an item in a later run instead of dropping it.

JSON safety is checked by a small probe class appended to the source *in the sandbox only*: it
subclasses the environment, binds the arguments like the runtime does, calls the tool and reports
whether the raw result is plain JSON. The environment's own code is not changed.

Only schema-valid arguments are sent: the gateway refuses any others before a tool sees them, so
no rule asks how a tool treats them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from envscaler.sandbox.errors import CallTimeout, RuntimeFault, SandboxError, SandboxGone
from envscaler.sandbox.sandbox import Sandbox
from envscaler.synth.gates.argsgen import Case, ValuePool, generate_cases
from envscaler.synth.gates.report import GateResult, Problem
from envscaler.synth.sandboxes import INFRASTRUCTURE, Limits, is_infrastructure_fault

PROBE_CLASS = "EnvscalerGateProbe"
PROBE_TOOL = "envscaler_gate_probe"
MAX_SHOWN_CHARS = 300
_PROBE_SOURCE = '''


class {probe}({env}):
    """Added by the executable gate inside its sandbox; not part of the environment."""

    def {tool}(self, name, arguments):
        import inspect as envscaler_inspect
        method = getattr(self, name)
        try:
            envscaler_inspect.signature(method).bind(**arguments)
        except TypeError as exc:
            return {{"probe": "argument_error", "message": name + ": " + str(exc)}}
        result = method(**arguments)
        return {{"probe": "result", "result": result,
                 "json_problem": {probe}._envscaler_json_problem(result, "result", 0)}}

    @staticmethod
    def _envscaler_json_problem(value, path, depth):
        import math as envscaler_math
        if depth > 100:
            return path + " is nested more than 100 levels deep"
        if value is None or isinstance(value, (bool, str, int)):
            return None
        if isinstance(value, float):
            return None if envscaler_math.isfinite(value) else path + " is " + repr(value)
        if isinstance(value, dict):
            for key, inner in value.items():
                if not isinstance(key, str):
                    return path + " has the non-string key " + repr(key)
                problem = {probe}._envscaler_json_problem(inner, path + "." + key, depth + 1)
                if problem:
                    return problem
            return None
        if isinstance(value, (list, tuple)):
            for index, inner in enumerate(value):
                problem = {probe}._envscaler_json_problem(inner, path + "[" + str(index) + "]",
                                                          depth + 1)
                if problem:
                    return problem
            return None
        return path + " is a " + type(value).__name__ + ", not a JSON value"
'''


@dataclass(frozen=True)
class Outcome:
    """What one call gave: a result, an argument error, or a runtime error of some kind."""

    kind: str  # "result" | "argument_error" | "error"
    value: Any = None
    error_type: str | None = None
    message: str | None = None
    json_problem: str | None = None

    def canonical(self) -> str:
        return json.dumps([self.kind, self.value, self.error_type, self.message], sort_keys=True)

    def describe(self) -> str:
        if self.kind == "result":
            return _clip(json.dumps(self.value, sort_keys=True))
        if self.kind == "argument_error":
            return f"ArgumentError: {self.message}"
        return f"{self.error_type}: {self.message}"


class _Stop(Exception):
    """The sandbox is gone (deadline or death); the gate cannot go on."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def queries(operations: list[dict[str, Any]]) -> frozenset[str]:
    """The tools an environment's operations (env.json's, or the pipeline's) call queries."""
    return frozenset(op["name"] for op in operations if op["type"] == "query")


def probe_source(source: str, class_name: str) -> str:
    return source.rstrip("\n") + "\n" + _PROBE_SOURCE.format(probe=PROBE_CLASS, env=class_name,
                                                             tool=PROBE_TOOL)


async def executable_gate(sandbox: Sandbox, *, source: str, class_name: str,
                          tools: list[dict[str, Any]], init_config: dict[str, Any], seed: int,
                          limits: Limits, valid_cases: int = 3,
                          read_only: frozenset[str] = frozenset()) -> GateResult:
    """``read_only``: the tools that must not change the state (the manifest's queries)."""
    result = GateResult(gate="executable")
    try:
        await sandbox.load(source=probe_source(source, class_name), class_name=PROBE_CLASS,
                           tools=[PROBE_TOOL], init_config=init_config, seed=seed,
                           max_result_bytes=limits.max_result_bytes, timeout=limits.load_timeout)
        state = await sandbox.state(timeout=limits.call_timeout)
    except RuntimeFault as exc:
        rule = INFRASTRUCTURE if is_infrastructure_fault(exc.kind) else "load"
        result.problems.append(Problem(rule, f"does not load with the test configuration: "
                                       f"{exc.kind}: {exc.message}"))
        return result
    except SandboxError as exc:
        result.problems.append(Problem("sandbox", f"loading failed: {exc}"))
        return result
    pool = ValuePool.from_state(state)
    plan = [(tool["function"]["name"], generate_cases(tool, pool, seed, valid_cases))
            for tool in tools]
    try:
        first = await _run(sandbox, plan, init_config, seed, limits)
        second = await _run(sandbox, plan, init_config, seed, limits)
    except _Stop as stop:
        result.problems.append(stop.problem)
        return result
    calls = 0
    for (name, cases), run in zip(plan, first, strict=True):
        for case, outcome in zip(cases, run.outcomes, strict=True):
            calls += 1
            problem = judge(name, case, outcome)
            if problem is not None:
                result.problems.append(problem)
        if name in read_only and _canonical(run.before) != _canonical(run.after):
            result.problems.append(Problem("read-only", f"{name} is a query but changed the "
                                           f"state ({_changed(run.before, run.after)})", tool=name))
    result.problems += _determinism_problems(plan, first, second)
    result.details = {"tools": len(plan), "calls": calls,
                      "cases": {name: [case.to_dict() for case in cases] for name, cases in plan}}
    return result


@dataclass(frozen=True)
class ToolRun:
    """One tool's calls from a fresh start: what each gave, and the state before and after."""

    outcomes: list[Outcome]
    before: dict[str, Any]
    after: dict[str, Any]


async def _run(sandbox: Sandbox, plan: list[tuple[str, list[Case]]], init_config: dict[str, Any],
               seed: int, limits: Limits) -> list[ToolRun]:
    """For each tool: reset to the test configuration, take the state, make its calls, take the
    state again."""
    runs = []
    for name, cases in plan:
        try:
            await sandbox.reset(init_config=init_config, seed=seed, timeout=limits.load_timeout)
            before = await sandbox.state(timeout=limits.call_timeout)
            outcomes = [await _call(sandbox, name, case, limits) for case in cases]
            after = await sandbox.state(timeout=limits.call_timeout)
        except CallTimeout as exc:
            raise _Stop(Problem("timeout", f"{name}: {exc}", tool=name)) from None
        except RuntimeFault as exc:  # reset or state failed: the runtime's fault
            raise _Stop(Problem(INFRASTRUCTURE, f"{name}: {exc}", tool=name)) from None
        except (SandboxGone, SandboxError) as exc:
            raise _Stop(Problem("sandbox", f"{name}: the sandbox died: {exc}", tool=name)) from None
        runs.append(ToolRun(outcomes, before, after))
    return runs


async def _call(sandbox: Sandbox, name: str, case: Case, limits: Limits) -> Outcome:
    try:
        reply = await sandbox.call(PROBE_TOOL, {"name": name, "arguments": case.arguments},
                                   timeout=limits.call_timeout)
    except RuntimeFault as exc:
        if exc.kind == "ArgumentError":
            return Outcome("argument_error", message=exc.message)
        if is_infrastructure_fault(exc.kind):
            raise _Stop(Problem(INFRASTRUCTURE, f"{name}: {exc}", tool=name)) from None
        return Outcome("error", error_type=exc.kind, message=exc.message)
    except CallTimeout as exc:
        raise _Stop(Problem("timeout", f"{name} with {_clip(json.dumps(case.arguments))}: {exc}",
                            tool=name)) from None
    if reply.get("probe") == "argument_error":
        return Outcome("argument_error", message=reply.get("message"))
    return Outcome("result", value=reply.get("result"), json_problem=reply.get("json_problem"))


def judge(name: str, case: Case, outcome: Outcome) -> Problem | None:
    """The problem with ``outcome`` for a schema-valid ``case``, or None when the tool behaved."""
    arguments = _clip(json.dumps(case.arguments, sort_keys=True))
    if outcome.kind == "error" and outcome.error_type == "ToolException":
        return Problem("raises", f"{name} raised on valid input {arguments}: "
                       f"{outcome.message}", tool=name)
    if outcome.kind == "error":
        return Problem("result", f"{name} on valid input {arguments}: {outcome.describe()}",
                       tool=name)
    if outcome.kind == "argument_error":
        return Problem("signature", f"{name} rejected schema-valid arguments {arguments}: "
                       f"{outcome.message} (the schema and the signature disagree)", tool=name)
    if outcome.json_problem:
        return Problem("json", f"{name} returned a non-JSON value for {arguments}: "
                       f"{outcome.json_problem}", tool=name)
    value = outcome.value
    if not isinstance(value, dict) or not isinstance(value.get("success"), bool):
        return Problem("result", f"{name} returned {outcome.describe()} for {arguments}, not a "
                       "dict with a boolean 'success'", tool=name)
    return None


def _determinism_problems(plan: list[tuple[str, list[Case]]], first: list[ToolRun],
                          second: list[ToolRun]) -> list[Problem]:
    for (name, cases), run_a, run_b in zip(plan, first, second, strict=True):
        for case, a, b in zip(cases, run_a.outcomes, run_b.outcomes, strict=True):
            if a.canonical() != b.canonical():
                return [Problem("determinism", f"{name} gave different results for the same calls "
                                f"from the same seed ({_clip(json.dumps(case.arguments))}): "
                                f"{a.describe()} then {b.describe()}", tool=name)]
        if _canonical(run_a.after) != _canonical(run_b.after):
            return [Problem("determinism", f"after the calls of {name}, the state differed between "
                            "two runs from the same seed", tool=name)]
    return []


def _canonical(state: dict[str, Any]) -> str:
    return json.dumps(state, sort_keys=True)


def _changed(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The top-level attributes that differ, for a message."""
    names = sorted(name for name in before.keys() | after.keys()
                   if json.dumps(before.get(name), sort_keys=True)
                   != json.dumps(after.get(name), sort_keys=True))
    return "changed: " + ", ".join(names)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + "..."
