"""ACEBench's agent category into catalogue environments: one environment per set of classes
questions involve (``acebench-<classes>``), one scenario per question (its id).

A question's task is its ``question`` (the instructions ACEBench gives the agent in multi-step,
and its simulated user in multi-turn); its check is ACEBench's end-to-end rule against the
possible answer's ``ground_truth``. Its reference solution is its ``mile_stone`` calls (the first
path when it lists several), kept when replaying them in a sandbox (ACEBench's classes never run
in this process) makes the check pass; otherwise the scenario is served unverified, without a
solution, and the report says why. A question that cannot be imported (its classes cannot be
served, it has no ground truth) is reported with its id and the reason.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from envscaler.format import EnvManifest, content_hash, env_files, publish_env
from envscaler.format.models import ChecklistItem, Scenario, ToolCall
from envscaler.format.toolschema import derive_tools
from envscaler.importers.acebench.checkout import CATEGORIES, Category, read_category, saved_attributes
from envscaler.importers.acebench.envcode import (
    CLASS_NAME,
    CONFIG_KEY,
    SUCCEEDED,
    EnvCode,
    EnvCodeError,
    build,
)
from envscaler.importers.acebench.reward import check_source, end_to_end, saved_result
from envscaler.importers.problem import Problem
from envscaler.importers.sandbox_replay import Replayer, ReplayError
from envscaler.synth.sandboxes import SandboxHub

PIPELINE_PREFIX = "acebench-import@"
CHECK_ITEM = ("Does the final state of every involved class pass ACEBench's end-to-end check "
              "against the possible answer?")


class QuestionError(ValueError):
    """A question that cannot become a scenario, or a milestone that does not parse."""


@dataclass(frozen=True)
class ImportedEnv:
    env_id: str
    classes: tuple[str, ...]
    tools: int
    scenarios: int
    verified: int
    path: str


@dataclass
class AceReport:
    checkout: str
    out: str
    categories: tuple[str, ...]
    questions: int = 0
    imported: list[ImportedEnv] = field(default_factory=list)
    errors: list[Problem] = field(default_factory=list)
    unverified: list[Problem] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {"questions": self.questions, "envs_imported": len(self.imported),
                "scenarios_imported": sum(env.scenarios for env in self.imported),
                "scenarios_verified": sum(env.verified for env in self.imported),
                "not_imported": len(self.errors)}

    def to_dict(self) -> dict[str, Any]:
        return {"checkout": self.checkout, "out": self.out, "categories": list(self.categories),
                "counts": self.counts(), "imported": [asdict(env) for env in self.imported],
                "errors": [asdict(problem) for problem in self.errors],
                "unverified": [asdict(problem) for problem in self.unverified]}


def env_id(classes: tuple[str, ...]) -> str:
    return ("acebench-" + "-".join(name.lower() for name in classes))[:64]


async def import_acebench(root: Path, out: Path, hub: SandboxHub, *,
                          categories: tuple[str, ...] = tuple(CATEGORIES),
                          created: str | None = None) -> AceReport:
    """Import the agent ``categories`` of the checkout at ``root`` into ``out``."""
    report = AceReport(checkout=str(root), out=str(out), categories=categories)
    saved = saved_attributes(root)
    groups: dict[tuple[str, ...], tuple[Category, list[dict[str, Any]]]] = {}
    for name in categories:
        category = read_category(root, name)
        report.questions += len(category.questions)
        for question in category.questions:
            classes = tuple(question.get("involved_classes") or ())
            groups.setdefault(classes, (category, []))[1].append(question)
    for classes, (category, questions) in groups.items():
        await _import_group(category, classes, questions, saved, out, hub, report,
                            created or date.today().isoformat())
    return report


async def _import_group(category: Category, classes: tuple[str, ...],
                        questions: list[dict[str, Any]], saved: dict[str, list[str]], out: Path,
                        hub: SandboxHub, report: AceReport, created: str) -> None:
    docs: dict[str, dict[str, Any]] = {}
    for question in questions:
        for doc in question.get("function") or ():
            docs.setdefault(doc.get("name", ""), doc)
    try:
        code = build(category, classes, list(docs.values()))
    except EnvCodeError as exc:
        report.errors += [Problem(q.get("id", "?"), str(exc)) for q in questions]
        return
    scenarios = []
    async with Replayer(hub, source=code.source, class_name=CLASS_NAME, tools=code.tools,
                        purpose=env_id(classes)) as replayer:
        for question in questions:
            try:
                scenarios.append(await _scenario(question, classes, saved, code, replayer,
                                                 report))
            except QuestionError as exc:
                report.errors.append(Problem(question.get("id", "?"), str(exc)))
    if not scenarios:
        report.errors.append(Problem(env_id(classes), "no question of these classes imported"))
        return
    manifest = _manifest(classes, code.source, derive_tools(code.source, CLASS_NAME), created)
    path = out / env_id(classes)
    publish_env(path, env_files(code.source.encode("utf-8"), EnvManifest.model_validate(manifest),
                                scenarios, canonical=False))
    report.imported.append(ImportedEnv(
        env_id(classes), classes, len(code.tools), len(scenarios),
        sum(1 for scenario in scenarios if scenario.verified), str(path)))


async def _scenario(question: dict[str, Any], classes: tuple[str, ...],
                    saved: dict[str, list[str]], code: EnvCode, replayer: Replayer,
                    report: AceReport) -> Scenario:
    truth = question.get("ground_truth")
    if not isinstance(truth, list) or not question.get("question"):
        raise QuestionError("it has no question or no ground truth (a list of class states)")
    init_config = {CONFIG_KEY: question.get("initial_config") or {}}
    check = ChecklistItem(item=CHECK_ITEM, check_func=check_source(list(classes), saved,
                                                                  SUCCEEDED, truth))
    solution: list[ToolCall] | None = None
    try:
        calls = milestone_calls(question.get("mile_stone"))
        final = await replayer.final_state(init_config, calls)
        if end_to_end(saved_result(final, list(classes), saved, SUCCEEDED), truth):
            solution = calls
        else:
            report.unverified.append(Problem(question["id"], "its milestones replayed do not "
                                             "pass ACEBench's check"))
    except (QuestionError, ReplayError) as exc:
        report.unverified.append(Problem(question["id"], str(exc)))
    return Scenario(id=question["id"], split="eval", task=question["question"],
                    init_config=init_config, checklist=[check], solution=solution,
                    verified=solution is not None)


def milestone_calls(milestones: Any) -> list[ToolCall]:
    """The calls of ACEBench's ``mile_stone`` (texts such as ``[f(a=1), g(b='x')]``; the first
    path when there are several)."""
    if isinstance(milestones, list) and milestones and isinstance(milestones[0], list):
        milestones = milestones[0]
    if not isinstance(milestones, list):
        raise QuestionError("it has no milestones")
    calls = []
    for text in milestones:
        source = str(text).strip()
        source = source if source.startswith("[") else f"[{source}]"
        try:
            tree = ast.parse(source, mode="eval").body
            items = tree.elts if isinstance(tree, ast.List) else [tree]
            for item in items:
                if not (isinstance(item, ast.Call) and isinstance(item.func, ast.Name)
                        and not item.args):
                    raise ValueError("not a call with keyword arguments")
                calls.append(ToolCall(name=item.func.id, arguments={
                    keyword.arg: ast.literal_eval(keyword.value) for keyword in item.keywords
                    if keyword.arg}))
        except (SyntaxError, ValueError) as exc:
            raise QuestionError(f"milestone {source!r} does not parse: {exc}") from None
    return calls


def _manifest(classes: tuple[str, ...], source: str, tools: list[dict[str, Any]],
              created: str) -> dict[str, Any]:
    names = ", ".join(classes)
    return {
        "id": env_id(classes), "class_name": CLASS_NAME,
        "summary": f"ACEBench agent classes {names}.",
        "introduction": f"The ACEBench agent environment of {names}, imported from an ACEBench "
                        "checkout: its classes as ACEBench wrote them, its function docs as tools.",
        "state_space": [{"entity": name, "attributes": "its public attributes",
                         "description": f"The {name} instance."} for name in classes]
        + [{"entity": SUCCEEDED, "attributes": "a count",
            "description": "The calls that ran without raising."}],
        "constraint_rules": [],
        "operations": [{"name": tool["function"]["name"],
                        "description": tool["function"]["description"], "type": "state_change"}
                       for tool in tools],
        "tools": tools,
        "provenance": {"model": "acebench", "created": created,
                       "pipeline_version": PIPELINE_PREFIX + env_id(classes),
                       "content_hash": content_hash(source.encode("utf-8"))},
    }


__all__ = ["AceReport", "ImportedEnv", "Problem", "env_id", "import_acebench",
           "milestone_calls"]
