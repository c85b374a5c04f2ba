"""BFCL multi-turn questions into catalogue environments: one environment per set of classes
that questions involve together, one scenario per question.

A question becomes a scenario whose ``turns`` are its user messages, each with that turn's
ground-truth calls as its reference calls, and whose checks compare each stateful class's final
state with the one the ground truth leaves (BFCL's state check) and require the results the
ground truth's calls return among the session's (BFCL's response check, on the final state: each
turn's results among all the session's, not only those of the turns so far). Both are found by
replaying the ground truth in a sandbox (the classes never run in this process), the same way the
gateway will run it, so the reference solution earns reward 1.0 by construction. A question
that cannot be imported (a turn without a user message, a call that does not parse or does not
fit its tool's schema, a class that does not load) is reported with its id and the reason; the
others still import.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import date
from itertools import accumulate
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from envscaler.format import EnvManifest, content_hash, env_files, publish_env
from envscaler.format.models import SCENARIO_ID_PATTERN, ChecklistItem, Scenario, UserTurn
from envscaler.format.requirements import import_names, pins_problem
from envscaler.format.toolschema import derive_tools
from envscaler.importers.bfcl.calls import CallError, parse_call
from envscaler.importers.bfcl.checkout import Checkout, locate
from envscaler.importers.bfcl.envcode import (
    CLASS_NAME,
    CONFIG_KEY,
    RESULTS,
    EnvCode,
    EnvCodeError,
    build,
)
from envscaler.importers.problem import Problem
from envscaler.importers.sandbox_replay import Replayer, ReplayError
from envscaler.synth.sandboxes import SandboxHub

CATEGORIES = ("base", "miss_param")
PIPELINE_PREFIX = "bfcl-import@"


class QuestionError(ValueError):
    """A question that cannot become a scenario."""


@dataclass(frozen=True)
class ImportedEnv:
    env_id: str
    classes: tuple[str, ...]
    tools: int
    scenarios: int
    warnings: tuple[str, ...]
    path: str


@dataclass
class BfclReport:
    checkout: str
    out: str
    categories: tuple[str, ...]
    questions: int = 0
    imported: list[ImportedEnv] = field(default_factory=list)
    errors: list[Problem] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {"questions": self.questions, "envs_imported": len(self.imported),
                "scenarios_imported": sum(env.scenarios for env in self.imported),
                "not_imported": len(self.errors)}

    def to_dict(self) -> dict[str, Any]:
        return {"checkout": self.checkout, "out": self.out, "categories": list(self.categories),
                "counts": self.counts(), "imported": [asdict(env) for env in self.imported],
                "errors": [asdict(problem) for problem in self.errors]}


@dataclass
class _Group:
    """The questions of one set of classes."""

    classes: tuple[str, ...]
    questions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def env_id(self) -> str:
        return env_id(self.classes)


def env_id(classes: tuple[str, ...]) -> str:
    """The environment of a set of classes (sorted by name)."""
    return ("bfcl-" + "-".join(name.lower() for name in classes))[:64]


async def import_bfcl(root: Path, out: Path, hub: SandboxHub, *,
                      categories: tuple[str, ...] = ("base",),
                      requirements: tuple[str, ...] = (),
                      created: str | None = None) -> BfclReport:
    """Import ``categories`` of the checkout at ``root`` into ``out``; ``requirements``: exact
    pins of the third-party packages the classes import (each environment gets those its code
    imports). Raises ``CheckoutError`` when the checkout lacks what the import needs."""
    unknown = set(categories) - set(CATEGORIES)
    if unknown:
        raise ValueError(f"unknown categories {sorted(unknown)}: choose from {CATEGORIES}")
    problem = pins_problem(requirements)
    if problem is not None:
        raise ValueError(problem)
    checkout = locate(root)
    report = BfclReport(checkout=str(root), out=str(out), categories=categories)
    groups: dict[tuple[str, ...], _Group] = {}
    for category in categories:
        questions, answers = checkout.questions(category)
        report.questions += len(questions)
        for question in questions:
            problem = question_id_problem(question)
            if problem is not None:
                record = question.get("id") if isinstance(question, dict) else None
                report.errors.append(Problem(str(record or "?"), problem))
                continue
            question = {**question, "ground_truth": answers.get(question["id"])}
            classes = tuple(sorted(question.get("involved_classes") or ()))
            groups.setdefault(classes, _Group(classes)).questions.append(question)
    for group in groups.values():
        await _import_group(checkout, group, out, hub, report, requirements,
                            created or date.today().isoformat())
    return report


def question_id_problem(question: Any) -> str | None:
    """Why a question cannot become a scenario by its id (a scenario's id names it in files and
    URLs, so a path or any other text is refused), or None."""
    if not isinstance(question, dict):
        return "a question is a JSON object"
    question_id = question.get("id")
    if not (isinstance(question_id, str) and re.fullmatch(SCENARIO_ID_PATTERN, question_id)):
        return (f"its id {question_id!r} is not a scenario id (a letter or digit, then up to 127 "
                "letters, digits, '_', '.' or '-')")
    return None


async def _import_group(checkout: Checkout, group: _Group, out: Path, hub: SandboxHub,
                        report: BfclReport, pins: tuple[str, ...], created: str) -> None:
    try:
        code = build(checkout, list(group.classes))
        requirements = _requirements(code, pins)
    except EnvCodeError as exc:
        report.errors += [Problem(q.get("id", "?"), str(exc)) for q in group.questions]
        return
    tools = derive_tools(code.source, CLASS_NAME)
    validators = {tool["function"]["name"]: Draft202012Validator(tool["function"]["parameters"])
                  for tool in tools}
    scenarios: list[Scenario] = []
    async with Replayer(hub, source=code.source, class_name=CLASS_NAME, tools=list(code.tools),
                        purpose=group.env_id, requirements=requirements) as replayer:
        for question in group.questions:
            try:
                turns = _turns(question, code, validators)
                init_config = {CONFIG_KEY: {name: (question.get("initial_config") or {})
                                            .get(name, {}) for name in group.classes}}
                final = await replayer.final_state(
                    init_config, (call for turn in turns for call in turn.solution or ()))
                scenarios.append(_scenario(question, group, init_config, turns, final))
            except (QuestionError, ReplayError) as exc:
                report.errors.append(Problem(question.get("id", "?"), str(exc)))
    if not scenarios:
        report.errors.append(Problem(group.env_id, "no question of these classes imported"))
        return
    manifest = _manifest(group, code.source, tools, created)
    if requirements:
        manifest["requirements"] = requirements
    path = out / group.env_id
    publish_env(path, env_files(code.source.encode("utf-8"), EnvManifest.model_validate(manifest),
                                scenarios, canonical=False))
    report.imported.append(ImportedEnv(group.env_id, group.classes, len(tools), len(scenarios),
                                       code.warnings, str(path)))


def _requirements(code: EnvCode, pins: tuple[str, ...]) -> list[str]:
    """The pins of the third-party modules ``code`` imports; a module without one is an error
    (it would fail to load in a sandbox that lacks it)."""
    by_module = {name: pin for pin in pins for name in import_names([pin])}
    missing = [module for module in code.imports if module not in by_module]
    if missing:
        raise EnvCodeError(f"its classes import {', '.join(missing)}, which the standard sandbox "
                           "lacks: pin it with --requirement NAME==VERSION")
    return sorted(by_module[module] for module in code.imports)


def _turns(question: dict[str, Any], code: EnvCode,
           validators: dict[str, Draft202012Validator]) -> list[UserTurn]:
    messages = question.get("question") or []
    truth = question.get("ground_truth")
    if not isinstance(truth, list) or len(truth) != len(messages):
        raise QuestionError("its ground truth does not have one list of calls per turn")
    turns = []
    for number, (turn, calls) in enumerate(zip(messages, truth, strict=True)):
        text = "\n".join(m.get("content", "") for m in turn if m.get("role") == "user").strip()
        if not text:
            raise QuestionError(f"turn {number} has no user message")
        try:
            solution = [parse_call(call, code.tools) for call in calls]
        except CallError as exc:
            raise QuestionError(f"turn {number}: {exc}") from None
        for call in solution:
            error = best_match(validators[call.name].iter_errors(call.arguments))
            if error is not None:
                raise QuestionError(f"turn {number}: {call.name}: {error.message}")
        turns.append(UserTurn(user=text, solution=solution))
    return turns


def _scenario(question: dict[str, Any], group: _Group, init_config: dict[str, Any],
              turns: list[UserTurn], final: dict[str, Any]) -> Scenario:
    checks = [ChecklistItem(item=f"Is the state of {name} the one BFCL's ground truth leaves?",
                            check_func=_state_check(name, final[name]))
              for name in group.classes if final.get(name)]
    if not checks:
        raise QuestionError("its classes hold no state to check")
    expected = _results_by_turn(turns, final.get(RESULTS) or [])
    if any(expected):
        checks.append(ChecklistItem(
            item="Did the calls return every result BFCL's ground truth returns?",
            check_func=_response_check(expected)))
    return Scenario(id=question["id"], split="eval", task=turns[0].user, init_config=init_config,
                    checklist=checks, turns=turns)


def _results_by_turn(turns: list[UserTurn], results: list[str]) -> list[list[str]]:
    """The ground truth's rendered results, split by turn (one per call)."""
    ends = list(accumulate(len(turn.solution or ()) for turn in turns))
    return [results[start:end] for start, end in zip([0, *ends[:-1]], ends, strict=True)]


def _response_check(expected: list[list[str]]) -> str:
    """BFCL's response check on the final state: each turn's results among the session's."""
    text = json.dumps(expected, ensure_ascii=False)
    return ("def check_func(final_state):\n"
            "    import json\n"
            "    from collections import Counter\n"
            f"    returned = Counter(final_state.get({RESULTS!r}) or [])\n"
            f"    return all(not Counter(turn) - returned for turn in json.loads({text!r}))\n")


def _state_check(name: str, expected: Any) -> str:
    text = json.dumps(expected, ensure_ascii=False, sort_keys=False, separators=(",", ":"))
    return ("def check_func(final_state):\n"
            "    import json\n"
            f"    return final_state.get({name!r}) == json.loads({text!r})\n")


def _manifest(group: _Group, source: str, tools: list[dict[str, Any]],
              created: str) -> dict[str, Any]:
    names = ", ".join(group.classes)
    return {
        "id": group.env_id, "class_name": CLASS_NAME,
        "summary": f"BFCL multi-turn classes {names}.",
        "introduction": f"The BFCL multi-turn environment of {names}, imported from a BFCL "
                        "checkout: its classes as BFCL wrote them, its function docs as tools.",
        "state_space": [*({"entity": name, "attributes": "its public attributes",
                           "description": f"The {name} instance."} for name in group.classes),
                        {"entity": RESULTS, "attributes": "a list of texts",
                         "description": "Every call's result as BFCL renders it for the model."}],
        "constraint_rules": [],
        "operations": [{"name": tool["function"]["name"],
                        "description": tool["function"]["description"], "type": "state_change"}
                       for tool in tools],
        "tools": tools,
        "provenance": {"model": "bfcl", "created": created,
                       "pipeline_version": PIPELINE_PREFIX + group.env_id,
                       "content_hash": content_hash(source.encode("utf-8"))},
    }


__all__ = ["CATEGORIES", "BfclReport", "ImportedEnv", "Problem", "env_id", "import_bfcl"]
