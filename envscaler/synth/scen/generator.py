"""ScenGenerator: per environment, initial states -> tasks -> checklists -> checks -> solutions,
then the scenario gate in a sandbox, and ``scenarios.jsonl`` in the catalogue format.

Items are named ``<env_id>/<NNN>`` after the initial state they start from (``/check-K`` for the
K-th check), and scenario ids are ``<env_id>-<NNN>``: stable whatever else is dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from envscaler.format import (
    ChecklistItem,
    EnvFolderError,
    FormatError,
    Scenario,
    ToolCall,
    load_env,
    scenarios_bytes,
    write_files,
)
from envscaler.format.loader import ENV_MANIFEST, ENV_SCENARIOS, ENV_SOURCE
from envscaler.synth.catalogue import read_env, split_for
from envscaler.synth.envcode import EnvCode, describe_tools, generate_config, state_json
from envscaler.synth.gates.scenario import ScenarioSpec, scenario_gate
from envscaler.synth.gates.static import check_function_problems
from envscaler.synth.llm import ItemDropped, ParseError, TransientFailure
from envscaler.synth.parsing import json_reply, python_reply
from envscaler.synth.prompts import messages
from envscaler.synth.prompts import scenarios as prompts
from envscaler.synth.run import Run
from envscaler.synth.sandboxes import INFRASTRUCTURE
from envscaler.synth.scen.models import ChecklistReply, SolutionReply, TaskReply


async def generate_scenarios(run: Run, folders: list[Path], out: Path, *,
                             overwrite: bool = False) -> dict[str, int]:
    """Scenarios for the environments in ``folders``, written under ``out``; returns the number of
    scenarios written per environment. Existing files with other content are only replaced with
    ``overwrite``."""
    assert run.model is not None and run.hub is not None
    model, hub, settings = run.model, run.hub, run.settings
    envs: dict[str, tuple[EnvCode, Path]] = {}
    unreadable: list[tuple[str, str]] = []
    for folder in folders:
        try:
            code, _manifest = read_env(folder)
        except EnvFolderError as exc:
            unreadable.append((folder.name, str(exc)))
            continue
        envs[code.env_id] = (code, folder)
    run.select("scen.load", len(folders), len(envs), unreadable)

    count = settings.configs_per_env

    async def config(item: str, value: dict[str, Any]) -> dict[str, Any]:
        index = value["index"]
        focus = prompts.CONFIG_FOCUSES[(index - 1) % len(prompts.CONFIG_FOCUSES)]
        answer = await generate_config(model, hub, EnvCode.from_dict(value["env"]),
                                       stage="scen.configs", item=item, index=index, count=count,
                                       focus=focus, seed=settings.seed)
        return {"init_config": answer.value}

    configs = await run.stage("scen.configs", [
        (f"{env_id}/{index:03d}", {"env": code.to_dict(), "index": index})
        for env_id, (code, _folder) in envs.items() for index in range(1, count + 1)], config)

    def env_of(item: str) -> EnvCode:
        return envs[item.split("/")[0]][0]

    async def task(item: str, value: dict[str, Any]) -> dict[str, Any]:
        answer = await model.ask("scen.tasks", item, messages(
            prompts.SCENARIO_SYSTEM, prompts.TASK_USER, summary=value["summary"],
            introduction=value["introduction"], tools=value["tools"],
            state=state_json(value["init_config"])), lambda text: json_reply(text, TaskReply))
        return {"task": answer.value.task}

    tasks = await run.stage("scen.tasks", [
        (item, {"summary": env_of(item).summary, "introduction": env_of(item).introduction,
                "tools": describe_tools(env_of(item).tools), "init_config": data["init_config"]})
        for item, data in configs.items()], task)

    async def checklist(item: str, value: dict[str, Any]) -> dict[str, Any]:
        answer = await model.ask("scen.checklist", item, messages(
            prompts.SCENARIO_SYSTEM, prompts.CHECKLIST_USER, state=state_json(value["init_config"]),
            task=value["task"]), lambda text: json_reply(text, ChecklistReply))
        return {"items": answer.value.items}

    checklists = await run.stage("scen.checklist", [
        (item, {"init_config": configs[item]["init_config"], "task": data["task"]})
        for item, data in tasks.items()], checklist)

    def parse_check(text: str) -> str:
        code = python_reply(text)
        problems = check_function_problems(code)
        if problems:
            raise ParseError("; ".join(str(problem) for problem in problems[:3]))
        return code

    async def check(item: str, value: dict[str, Any]) -> dict[str, Any]:
        answer = await model.ask("scen.checks", item, messages(
            prompts.SCENARIO_SYSTEM, prompts.CHECK_USER, summary=value["summary"],
            state=state_json(value["init_config"]), task=value["task"], item=value["item"]),
            parse_check)
        return {"check_func": answer.value}

    check_items = [(f"{item}/check-{number}", {
        "summary": env_of(item).summary, "init_config": configs[item]["init_config"],
        "task": tasks[item]["task"], "item": text})
        for item, data in checklists.items() for number, text in enumerate(data["items"], 1)]
    checks = await run.stage("scen.checks", check_items, check)
    check_drops = {drop["item"]: drop["reason"] for drop in run.report.stage("scen.checks").drops}

    async def solution(item: str, value: dict[str, Any]) -> dict[str, Any]:
        tools = value["tools"]
        validators = {tool["function"]["name"]: Draft202012Validator(tool["function"]["parameters"])
                      for tool in tools}

        def parse(text: str) -> SolutionReply:
            reply = json_reply(text, SolutionReply)
            for step, call in enumerate(reply.calls, start=1):
                validator = validators.get(call.name)
                if validator is None:
                    raise ParseError(f"call {step}: {call.name!r} is not a tool")
                error = best_match(validator.iter_errors(call.arguments))
                if error is not None:
                    raise ParseError(f"call {step} ({call.name}): {error.message}")
            return reply

        answer = await model.ask("scen.solution", item, messages(
            prompts.SCENARIO_SYSTEM, prompts.SOLUTION_USER,
            tools=json.dumps(tools, indent=1, sort_keys=True),
            state=state_json(value["init_config"]), task=value["task"]), parse)
        return {"calls": [call.model_dump() for call in answer.value.calls]}

    solutions = await run.stage("scen.solution", [
        (item, {"tools": env_of(item).tools, "init_config": configs[item]["init_config"],
                "task": tasks[item]["task"]}) for item in checklists], solution)

    async def gate(item: str, value: dict[str, Any]) -> dict[str, Any]:
        if value["missing"]:
            raise ItemDropped(f"no check function for: {'; '.join(value['missing'])}")
        env = EnvCode.from_dict(value["env"])
        spec = ScenarioSpec(init_config=value["init_config"], items=value["items"],
                            checks=value["checks"], solution=value["solution"])
        async with hub.sandbox(f"scen-{item}") as box:
            result = await scenario_gate(box, judge=hub.judge, source=env.source,
                                         class_name=env.class_name,
                                         tool_names=env.tool_names, scenario=spec,
                                         seed=settings.seed, limits=hub.limits)
        if any(problem.rule == INFRASTRUCTURE for problem in result.problems):
            raise TransientFailure(result.summary())
        if not result.passed:
            raise ItemDropped(result.summary())
        return {"reward": result.details.get("reward")}

    gate_items = []
    for item in solutions:
        items = checklists[item]["items"]
        keys = [f"{item}/check-{number}" for number in range(1, len(items) + 1)]
        gate_items.append((item, {
            "env": env_of(item).to_dict(), "init_config": configs[item]["init_config"],
            "items": items, "checks": [checks[key]["check_func"] for key in keys if key in checks],
            "missing": [f"check {key.rsplit('-', 1)[1]}: {check_drops.get(key, 'dropped')}"
                        for key in keys if key not in checks],
            "solution": solutions[item]["calls"]}))
    gated = await run.stage("scen.gate", gate_items, gate,
                            concurrency=settings.sandbox_concurrency)

    per_env: dict[str, list[Scenario]] = {env_id: [] for env_id in envs}
    for item in gated:
        env_id, number = item.split("/")
        scenario_id = f"{env_id}-{number}"
        per_env[env_id].append(Scenario(
            id=scenario_id, split=split_for(scenario_id, settings.splits),  # type: ignore[arg-type]
            task=tasks[item]["task"], init_config=configs[item]["init_config"],
            checklist=[ChecklistItem(item=text, check_func=checks[f"{item}/check-{k}"]["check_func"])
                       for k, text in enumerate(checklists[item]["items"], start=1)],
            solution=[ToolCall(name=call["name"], arguments=call["arguments"])
                      for call in solutions[item]["calls"]]))
    written: dict[str, int] = {}
    drops: list[tuple[str, str]] = []
    for env_id, scenarios in per_env.items():
        if not scenarios:
            drops.append((env_id, "no scenario passed the gate"))
            continue
        try:
            write_env_with_scenarios(envs[env_id][1], out / env_id, scenarios, overwrite=overwrite)
        except EnvFolderError as exc:
            drops.append((env_id, str(exc)))
            continue
        except FormatError as exc:
            drops.append((env_id, f"written files do not load: {exc}"))
            continue
        written[env_id] = len(scenarios)
    run.select("scen.write", len(per_env), len(written), drops)
    return written


def write_env_with_scenarios(source: Path, target: Path, scenarios: list[Scenario], *,
                             overwrite: bool) -> None:
    """env.py and env.json (copied when ``target`` is another folder) and scenarios.jsonl, then
    the result loaded by the catalogue loader (every rule of the format checked)."""
    files = {ENV_SCENARIOS: scenarios_bytes(scenarios, canonical=True)}
    if not target.exists() or source.resolve() != target.resolve():
        files = {ENV_SOURCE: (source / ENV_SOURCE).read_bytes(),
                 ENV_MANIFEST: (source / ENV_MANIFEST).read_bytes(), **files}
    write_files(target, files, overwrite=overwrite)
    load_env(target)
