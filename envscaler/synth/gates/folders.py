"""The gates run on environment folders, for ``envscaler gate PATH...``.

Per environment: the format (the catalogue loader's rules; each scenario line it skips is a
format problem of its own, ``file:line: reason``), the static gate (with ``missing-tool``: an
operation of env.json that no tool implements), the executable gate (with the first scenario's
``init_config``, or an empty one; the manifest's queries must not change the state), and the
scenario gate for every scenario, each in a sandbox of the environment's image (with its
requirements installed, when env.json has any). When the static gate fails, nothing of the code is
run; an environment that does not load in its sandbox, or whose requirements have no image, fails
the executable gate's ``load`` rule, with the cause, as the gateway would refuse its sessions
(``EnvLoadFailed``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envscaler.format import EnvFolderError, EnvPackage, FormatError, Scenario, load_env
from envscaler.format.loader import ENV_SCENARIOS
from envscaler.sandbox.image_pools import RequirementsUnavailable
from envscaler.synth.catalogue import read_env
from envscaler.synth.errors import TransientFailure
from envscaler.synth.gates.executable import executable_gate, queries
from envscaler.synth.gates.report import GateResult, Problem
from envscaler.synth.gates.scenario import ScenarioSpec, scenario_gate
from envscaler.synth.gates.static import static_gate
from envscaler.synth.sandboxes import INFRASTRUCTURE, SandboxHub

STATIC_FAILED = "the static gate failed, so the code was not run"


@dataclass
class EnvGateReport:
    path: Path
    env_id: str
    format_error: str | None = None
    skipped_scenarios: list[str] = field(default_factory=list)  # "file:line: reason" each
    static: GateResult | None = None
    executable: GateResult | None = None
    scenarios: dict[str, GateResult] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return (self.format_error is None and not self.skipped_scenarios
                and self.static is not None and self.static.passed
                and (self.executable is None or self.executable.passed)
                and all(result.passed for result in self.scenarios.values()))

    def to_dict(self) -> dict[str, Any]:
        return {"env": self.env_id, "path": str(self.path), "passed": self.passed,
                "format": {"passed": self.format_error is None and not self.skipped_scenarios,
                           **({"error": self.format_error} if self.format_error else {}),
                           **({"skipped_scenarios": self.skipped_scenarios}
                              if self.skipped_scenarios else {})},
                "static": self.static.to_dict() if self.static else None,
                "executable": self.executable.to_dict() if self.executable else None,
                "scenarios": {scenario_id: result.to_dict()
                              for scenario_id, result in sorted(self.scenarios.items())}}


async def gate_folder(folder: Path, hub: SandboxHub | None, *, seed: int = 0, valid_cases: int = 3,
                      executable: bool = True, scenarios: bool = True) -> EnvGateReport:
    report = EnvGateReport(path=folder, env_id=folder.name)
    try:
        code, manifest = read_env(folder)
    except EnvFolderError as exc:
        report.format_error = str(exc)
        return report
    report.env_id = code.env_id
    loaded: tuple[Scenario, ...] = ()
    package: EnvPackage | None = None
    if (folder / ENV_SCENARIOS).exists():
        try:
            package = load_env(folder)
        except FormatError as exc:
            report.format_error = str(exc)
        else:
            loaded = package.scenarios
            report.skipped_scenarios = [str(error) for error in package.skipped]
    operations = [op.model_dump() for op in manifest.operations]
    report.static = static_gate(code.source, code.class_name, manifest.requirements)
    report.static.problems += missing_tool_problems(operations, code.tool_names)
    if not report.static.passed:
        report.executable = GateResult(gate="executable", skipped=STATIC_FAILED)
        return report
    if hub is None:
        return report
    if executable:
        init_config = package.initial_config(loaded[0]) if package and loaded else {}
        try:
            async with hub.sandbox(f"gate-{code.env_id}", manifest.requirements) as box:
                report.executable = await executable_gate(
                    box, source=code.source, class_name=code.class_name, tools=code.tools,
                    init_config=init_config, seed=seed, limits=hub.limits,
                    valid_cases=valid_cases, read_only=queries(operations))
        except TransientFailure as exc:
            report.executable = GateResult("executable", [Problem(INFRASTRUCTURE, str(exc))])
        except RequirementsUnavailable as exc:  # the environment's requirements cannot be met
            report.executable = GateResult("executable", [Problem("load", str(exc))])
        report.executable.details["init_config"] = \
            f"scenario {loaded[0].id}" if loaded else "empty"
    if scenarios:
        for scenario in loaded:
            assert package is not None  # scenarios come from a loaded package
            spec = ScenarioSpec(
                init_config=package.initial_config(scenario), items=[item.item for item in scenario.checklist],
                checks=[item.check_func for item in scenario.checklist],
                solution=None if scenario.solution is None else
                [call.model_dump() for call in scenario.solution])
            try:
                async with hub.sandbox(f"gate-{scenario.id}", manifest.requirements) as box:
                    report.scenarios[scenario.id] = await scenario_gate(
                        box, judge=hub.judge, source=code.source, class_name=code.class_name,
                        tool_names=code.tool_names, scenario=spec, seed=seed, limits=hub.limits)
            except TransientFailure as exc:
                report.scenarios[scenario.id] = GateResult(
                    "scenario", [Problem(INFRASTRUCTURE, str(exc))])
            except RequirementsUnavailable as exc:
                report.scenarios[scenario.id] = GateResult("scenario", [Problem("load", str(exc))])
    return report


def missing_tool_problems(operations: list[dict[str, Any]], tool_names: list[str]) -> list[Problem]:
    """An operation the manifest promises that no tool of the class implements."""
    return [Problem("missing-tool", f"operation {op['name']} of env.json is not a tool of the "
                    "class (no public method of that name)") for op in operations
            if op["name"] not in tool_names]
