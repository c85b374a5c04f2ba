"""`envscaler import bfcl-compare`: does the gateway reproduce BFCL's own execution of the
questions that `envscaler import bfcl` imported?

For the questions of a category found in the catalogue (environments the importer wrote, scenarios
named after the questions), BFCL's execution of each ground truth (``envscaler.importers.bfcl.container``,
one container per requirement set of the environments) is set beside the scenario's reference
calls replayed through the gateway (``envscaler.importers.bfcl.replay``): the same call results and the same
final state of each class BFCL reports, or the differences (``envscaler.importers.bfcl.compare``). A
question either side could not execute is reported with the reason, not compared.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from envscaler_client import AuthError, EnvClient, EnvScalerError, TransportError

from envscaler.format.loader import Catalogue, FormatError, load_catalogue
from envscaler.format.models import Scenario
from envscaler.format.requirements import requirement_set
from envscaler.importers.bfcl import container
from envscaler.importers.bfcl.checkout import Checkout, CheckoutError, locate
from envscaler.importers.bfcl.compare import Execution, QuestionComparison, compare
from envscaler.importers.bfcl.importer import CATEGORIES, PIPELINE_PREFIX, question_id_problem
from envscaler.importers.bfcl.replay import replay
from envscaler.server.settings import Settings

BFCL_PHASE, GATEWAY_PHASE = "BFCL's execution", "through the gateway"
Step = Callable[[str, int, int], None]
"""Progress: called with a phase (`BFCL_PHASE`, `GATEWAY_PHASE`), questions done, and its total."""


class FidelityError(Exception):
    """The measurement cannot run: a bad checkout or catalogue, or no way to run BFCL's code."""


@dataclass(frozen=True)
class Imported:
    """A question the catalogue holds: its environment, scenario, and BFCL's own record of it
    (its ``id``, ``involved_classes``, ``initial_config`` and ``ground_truth``)."""

    env: str
    scenario: Scenario
    requirements: tuple[str, ...]
    question: dict[str, Any]

    @property
    def calls(self) -> list[str]:
        return [call for turn in self.question["ground_truth"] for call in turn]


@dataclass
class FidelityReport:
    checkout: str
    catalogue: str
    category: str
    gateway: str
    questions: int = 0
    comparisons: list[QuestionComparison] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        rows = self.comparisons
        return {"questions": self.questions, "imported": len(rows),
                "compared": sum(row.compared for row in rows),
                "calls_equal": sum(row.calls_equal for row in rows),
                "state_equal": sum(row.state_equal for row in rows),
                "exact": sum(row.exact for row in rows)}

    def to_dict(self) -> dict[str, Any]:
        return {"checkout": self.checkout, "catalogue": self.catalogue, "category": self.category,
                "gateway": self.gateway, "counts": self.counts(),
                "questions": [{**asdict(row), "calls_equal": row.calls_equal,
                               "state_equal": row.state_equal, "exact": row.exact}
                              for row in self.comparisons]}


@dataclass(frozen=True)
class Plan:
    """What to compare: the checkout's questions of ``category`` (``questions`` of them) and
    those of them the catalogue holds."""

    root: Path
    catalogue: Path
    category: str
    checkout: Checkout
    questions: int
    imported: list[Imported]


def plan(root: Path, catalogue: Path, category: str = "base") -> Plan:
    """Read the checkout and the catalogue (nothing runs); `FidelityError` when either is
    unusable or the catalogue holds none of the category's questions."""
    if category not in CATEGORIES:
        raise FidelityError(f"unknown category {category!r}: choose from {', '.join(CATEGORIES)}")
    try:
        checkout = locate(root.resolve())  # the container mounts its folders by absolute path
        questions, answers = checkout.questions(category)
        loaded = load_catalogue(catalogue)
    except (CheckoutError, FormatError) as exc:
        raise FidelityError(str(exc)) from exc
    records = {question["id"]: {"id": question["id"],
                                "involved_classes": question.get("involved_classes") or [],
                                "initial_config": question.get("initial_config") or {},
                                "ground_truth": answers.get(question["id"]) or []}
               for question in questions if question_id_problem(question) is None}
    imported = _imported(loaded, records)
    if not imported:
        raise FidelityError(f"{catalogue} holds none of the {len(records)} {category} questions "
                            f"of {root}: import them first with `envscaler import bfcl --from "
                            f"{root} --out {catalogue}`")
    return Plan(root, catalogue, category, checkout, len(records), imported)


def measure(planned: Plan, client: EnvClient, *, gateway: str = "",
            step: Step | None = None) -> FidelityReport:
    """Compare the gateway (``client``, serving the planned catalogue) with BFCL's execution.
    `FidelityError` when BFCL's code cannot be run; a transport or authentication failure of the
    gateway is raised as is."""
    report_step = step or (lambda _phase, _done, _total: None)
    report = FidelityReport(str(planned.root), str(planned.catalogue), planned.category, gateway,
                            questions=planned.questions)
    outcomes = _bfcl_executions(planned.checkout, planned.imported, report_step)
    for done, item in enumerate(planned.imported, start=1):
        report.comparisons.append(_compared(client, item, outcomes[item.scenario.id]))
        report_step(GATEWAY_PHASE, done, len(planned.imported))
    return report


def _imported(loaded: Catalogue, records: dict[Any, dict[str, Any]]) -> list[Imported]:
    """The questions of ``records`` that the importer's environments of ``loaded`` hold, in the
    order of BFCL's file."""
    found = {scenario.id: Imported(env.manifest.id, scenario,
                                   requirement_set(env.manifest.requirements),
                                   records[scenario.id])
             for env in loaded.envs.values()
             if env.manifest.provenance.pipeline_version.startswith(PIPELINE_PREFIX)
             for scenario in env.scenarios if scenario.id in records}
    return [found[key] for key in records if key in found]


def _bfcl_executions(checkout: Checkout, imported: list[Imported],
                     step: Step) -> dict[str, container.BfclOutcome]:
    """BFCL's execution of each question, in one container per requirement set."""
    by_set: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for item in imported:
        by_set[item.requirements].append(item.question)
    wanted = {item.scenario.id for item in imported}
    done: set[str] = set()

    def finished(question_id: str) -> None:
        if question_id in wanted and question_id not in done:
            done.add(question_id)
            step(BFCL_PHASE, len(done), len(wanted))

    outcomes: dict[str, container.BfclOutcome] = {}
    try:
        settings = Settings()  # read once, for the images and every container
        images = container.images(by_set, settings)
        step(BFCL_PHASE, 0, len(wanted))
        for pins, questions in sorted(by_set.items()):
            outcomes |= container.execute(checkout, questions, images[pins], finished, settings)
    except container.ContainerError as exc:
        raise FidelityError(str(exc)) from exc
    return outcomes


def _compared(client: EnvClient, item: Imported,
              outcome: container.BfclOutcome) -> QuestionComparison:
    row = QuestionComparison(item.scenario.id, item.env)
    if outcome.error is not None:
        row.error = f"BFCL's execution failed: {outcome.error}"
        return row
    try:
        gateway = replay(client, item.env, item.scenario)
    except (TransportError, AuthError):
        raise
    except EnvScalerError as exc:
        row.error = f"the gateway failed it: {exc}"
        return row
    return compare(row, item.calls, gateway, Execution(outcome.results, outcome.state))
