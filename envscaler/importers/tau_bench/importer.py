"""tau-bench's domains into catalogue environments: one environment per domain (``tau-retail``,
``tau-airline``), one scenario per task of the test split (``retail-0``: the task's index).

The database is the environment's shared data file (``data/<domain>.json``, read once by the
gateway however many scenarios build on it; a scenario's ``init_config`` is an empty patch), the
policy (``wiki.md``) its introduction and tau's ``RULES`` its rules. A task's instruction, which
tau gives its simulated user, is the scenario's task; its ground-truth actions followed by a
``respond`` with each required output are the reference solution; its one check is tau's reward,
with the hash of the database the ground truth leaves, found by replaying the ground truth in a
sandbox (tau's tools never run in this process). A task that cannot be imported (a ground-truth
action that is not a tool or does not fit its schema, a replay that fails) is reported with its id
and the reason; the others still import.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from envscaler.format import EnvManifest, content_hash, env_files, publish_env
from envscaler.format.models import ChecklistItem, Scenario, ToolCall
from envscaler.format.toolschema import derive_tools
from envscaler.importers.problem import Problem
from envscaler.importers.sandbox_replay import Replayer, ReplayError
from envscaler.importers.tau_bench.checkout import DOMAINS, RESPOND, Domain, Task, read_domain
from envscaler.importers.tau_bench.envcode import CLASS_NAME, MESSAGES, EnvCode, EnvCodeError, build
from envscaler.importers.tau_bench.reward import check_source, data_hash
from envscaler.synth.sandboxes import SandboxHub

PIPELINE_PREFIX = "tau-bench-import@"
# tau's tools that change the database (and respond, the messages) start with one of these verbs
STATE_CHANGING_VERBS = frozenset({"book", "cancel", "exchange", "modify", "respond", "return",
                                  "send", "update"})
CHECK_ITEM = ("Does the database equal the one the task's ground-truth actions leave, and does "
              "every output the task requires appear in the agent's messages to the user "
              "(tau-bench's reward)?")


class TaskError(ValueError):
    """A task that cannot become a scenario."""


@dataclass(frozen=True)
class ImportedEnv:
    env_id: str
    domain: str
    tools: int
    scenarios: int
    path: str


@dataclass
class TauReport:
    checkout: str
    out: str
    tasks: int = 0
    imported: list[ImportedEnv] = field(default_factory=list)
    errors: list[Problem] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {"tasks": self.tasks, "envs_imported": len(self.imported),
                "scenarios_imported": sum(env.scenarios for env in self.imported),
                "not_imported": len(self.errors)}

    def to_dict(self) -> dict[str, Any]:
        return {"checkout": self.checkout, "out": self.out, "counts": self.counts(),
                "imported": [asdict(env) for env in self.imported],
                "errors": [asdict(problem) for problem in self.errors]}


def env_id(domain: str) -> str:
    return f"tau-{domain}"


def scenario_id(domain: str, index: int) -> str:
    return f"{domain}-{index}"


async def import_tau_bench(root: Path, out: Path, hub: SandboxHub, *,
                           domains: tuple[str, ...] = DOMAINS,
                           created: str | None = None) -> TauReport:
    """Import ``domains`` of the checkout at ``root`` into ``out``. Raises ``CheckoutError`` when
    the checkout lacks what the import needs."""
    unknown = set(domains) - set(DOMAINS)
    if unknown:
        raise ValueError(f"unknown domains {sorted(unknown)}: choose from {DOMAINS}")
    report = TauReport(checkout=str(root), out=str(out))
    for name in domains:
        domain = read_domain(root, name)
        report.tasks += len(domain.tasks)
        await _import_domain(domain, out, hub, report, created or date.today().isoformat())
    return report


async def _import_domain(domain: Domain, out: Path, hub: SandboxHub, report: TauReport,
                         created: str) -> None:
    try:
        code = build(domain)
    except EnvCodeError as exc:
        report.errors.append(Problem(env_id(domain.name), str(exc)))
        return
    tools = derive_tools(code.source, CLASS_NAME)
    validators = {tool["function"]["name"]: Draft202012Validator(tool["function"]["parameters"])
                  for tool in tools}
    database = domain.database_text()
    scenarios = []
    async with Replayer(hub, source=code.source, class_name=CLASS_NAME, tools=code.tools,
                        purpose=env_id(domain.name)) as replayer:
        for task in domain.tasks:
            try:
                truth = _ground_truth(task, domain, validators)
                final = await replayer.final_state(database, truth, init_patch={})
                scenarios.append(_scenario(domain, task, code, truth, final))
            except (TaskError, ReplayError) as exc:
                report.errors.append(Problem(scenario_id(domain.name, task.index), str(exc)))
    if not scenarios:
        report.errors.append(Problem(env_id(domain.name), "no task imported"))
        return
    manifest = EnvManifest.model_validate(_manifest(domain, code.source, tools, created))
    path = out / env_id(domain.name)
    publish_env(path, env_files(code.source.encode("utf-8"), manifest, scenarios, canonical=False,
                                data={_data_file(domain): database}))
    report.imported.append(ImportedEnv(env_id(domain.name), domain.name, len(tools),
                                       len(scenarios), str(path)))


def _ground_truth(task: Task, domain: Domain,
                  validators: dict[str, Draft202012Validator]) -> list[ToolCall]:
    """The calls tau's reward replays: the task's actions but the terminating ones (and its
    respond actions, which change no database)."""
    calls = []
    for action in task.actions:
        if action.name in domain.terminate_tools or action.name == RESPOND:
            continue
        if action.name not in validators:
            raise TaskError(f"its ground truth calls {action.name}, which is not a tool")
        error = best_match(validators[action.name].iter_errors(action.kwargs))
        if error is not None:
            raise TaskError(f"{action.name}: {error.message}")
        calls.append(ToolCall(name=action.name, arguments=action.kwargs))
    return calls


def _scenario(domain: Domain, task: Task, code: EnvCode, truth: list[ToolCall],
              final: dict[str, Any]) -> Scenario:
    digest = data_hash(final, code.database)
    answers = [ToolCall(name=RESPOND, arguments={"content": output}) for output in task.outputs]
    return Scenario(id=scenario_id(domain.name, task.index), split="eval", task=task.instruction,
                    init_config={}, init_data=_data_file(domain),
                    checklist=[ChecklistItem(item=CHECK_ITEM, check_func=check_source(
                        code.database, digest, task.outputs, MESSAGES))],
                    solution=[*truth, *answers])


def _data_file(domain: Domain) -> str:
    return f"{domain.name}.json"


def _manifest(domain: Domain, source: str, tools: list[dict[str, Any]],
              created: str) -> dict[str, Any]:
    return {
        "id": env_id(domain.name), "class_name": CLASS_NAME,
        "summary": f"tau-bench {domain.name}: its database, tools and policy.",
        "introduction": domain.wiki,
        "state_space": [{"entity": key, "attributes": "tau-bench's records, by id",
                         "description": f"The {key} of tau-bench's {domain.name} database."}
                        for key in domain.data_files]
        + [{"entity": MESSAGES, "attributes": "texts",
            "description": "The agent's messages to the user (respond), in order."}],
        "constraint_rules": list(domain.rules),
        "operations": [{"name": tool["function"]["name"],
                        "description": tool["function"]["description"],
                        "type": "state_change" if tool["function"]["name"].split("_")[0]
                        in STATE_CHANGING_VERBS else "query"} for tool in tools],
        "tools": tools,
        "provenance": {"model": "tau-bench", "created": created,
                       "pipeline_version": PIPELINE_PREFIX + env_id(domain.name),
                       "content_hash": content_hash(source.encode("utf-8"))},
    }


__all__ = ["ImportedEnv", "Problem", "TauReport", "env_id", "import_tau_bench", "scenario_id"]
