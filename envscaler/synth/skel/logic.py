"""SkelBuilder step 2, logic modelling: state -> class skeleton -> operations -> methods -> module.

Every step is one model call per environment, except the methods: one call per operation, as in the
paper. The assembled module must parse and yield a tool schema for every operation.
"""

from __future__ import annotations

from typing import Any

from envscaler.format import ToolSchemaError, derive_tools
from envscaler.synth.gates.static import ALLOWED_MODULES
from envscaler.synth.llm import ItemDropped, ParseError
from envscaler.synth.parsing import json_reply
from envscaler.synth.prompts import logic as prompts
from envscaler.synth.prompts import messages
from envscaler.synth.run import Run
from envscaler.synth.skel.assemble import Method, assemble, parse_method, parse_skeleton
from envscaler.synth.skel.models import OperationList, StateDesign

_MODULES_TEXT = ", ".join(sorted(ALLOWED_MODULES - {"__future__"}))


def _entities_text(design: dict[str, Any]) -> str:
    return "\n".join(f"- {entity['entity']}: {entity['attributes']}. {entity['description']}".rstrip()
                     for entity in design["entities"])


def _rules_text(design: dict[str, Any]) -> str:
    return "\n".join(f"- {rule}" for rule in design["rules"]) or "- (none)"


def _operations_text(operations: list[dict[str, Any]]) -> str:
    return "\n".join(f"- {op['name']} ({op['type']}): {op['description']}" for op in operations)


async def model_logic(run: Run, topics: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per env_id: the topic plus ``state``, ``skeleton``, ``operations``, ``source``, ``tools``."""
    assert run.model is not None
    model = run.model
    settings = run.settings
    envs = {topic["env_id"]: topic for topic in topics}

    async def state(item: str, topic: dict[str, Any]) -> dict[str, Any]:
        answer = await model.ask("logic.state", item, messages(
            prompts.DESIGNER_SYSTEM, prompts.STATE_USER, summary=topic["summary"],
            introduction=topic["introduction"], task=topic["task"]),
            lambda text: json_reply(text, StateDesign))
        return {**answer.value.model_dump(), "created": answer.created}

    designs = await run.stage("logic.state", list(envs.items()), state)

    async def skeleton(item: str, value: dict[str, Any]) -> dict[str, Any]:
        topic, design = value["topic"], value["design"]
        answer = await model.ask("logic.skeleton", item, messages(
            prompts.DESIGNER_SYSTEM, prompts.SKELETON_USER, summary=topic["summary"],
            introduction=topic["introduction"], entities=_entities_text(design),
            rules=_rules_text(design)), parse_skeleton)
        return {"code": answer.value.code, "class_name": answer.value.class_name,
                "attributes": answer.value.attributes, "created": answer.created}

    skeletons = await run.stage("logic.skeleton", [
        (env_id, {"topic": envs[env_id], "design": design}) for env_id, design in designs.items()],
        skeleton)

    def parse_operations(text: str) -> OperationList:
        operations = json_reply(text, OperationList)
        count = len(operations.operations)
        if not settings.min_operations <= count <= settings.max_operations:
            raise ParseError(f"give between {settings.min_operations} and "
                             f"{settings.max_operations} operations, not {count}")
        return operations

    async def operations(item: str, value: dict[str, Any]) -> dict[str, Any]:
        topic = value["topic"]
        answer = await model.ask("logic.operations", item, messages(
            prompts.DESIGNER_SYSTEM, prompts.OPERATIONS_USER, summary=topic["summary"],
            introduction=topic["introduction"], rules=_rules_text(value["design"]),
            skeleton=value["skeleton"]["code"].strip(), task=topic["task"],
            min_operations=settings.min_operations, max_operations=settings.max_operations),
            parse_operations)
        return {"operations": [op.model_dump() for op in answer.value.operations],
                "created": answer.created}

    op_lists = await run.stage("logic.operations", [
        (env_id, {"topic": envs[env_id], "design": designs[env_id], "skeleton": skeleton_data})
        for env_id, skeleton_data in skeletons.items()], operations)

    method_items: list[tuple[str, Any]] = []
    for env_id, op_list in op_lists.items():
        topic, design, skeleton_data = envs[env_id], designs[env_id], skeletons[env_id]
        for operation in op_list["operations"]:
            method_items.append((f"{env_id}/{operation['name']}", {
                "summary": topic["summary"], "introduction": topic["introduction"],
                "rules": _rules_text(design), "skeleton": skeleton_data["code"].strip(),
                "operations": _operations_text(op_list["operations"]), "operation": operation}))

    async def method(item: str, value: dict[str, Any]) -> dict[str, Any]:
        operation = value["operation"]
        answer = await model.ask("logic.methods", item, messages(
            prompts.METHOD_SYSTEM, prompts.METHOD_USER, modules=_MODULES_TEXT,
            summary=value["summary"], introduction=value["introduction"], rules=value["rules"],
            skeleton=value["skeleton"], operations=value["operations"], name=operation["name"],
            type=operation["type"], description=operation["description"]),
            lambda text: parse_method(text, operation["name"]))
        return {"imports": answer.value.imports, "code": answer.value.code,
                "model": answer.model, "created": answer.created}

    methods = await run.stage("logic.methods", method_items, method)
    method_drops = {drop["item"]: drop["reason"] for drop in run.report.stage("logic.methods").drops}

    async def assemble_env(item: str, value: dict[str, Any]) -> dict[str, Any]:
        missing = [f"{name}: {value['drops'][name]}" for name in value["operations"]
                   if name not in value["methods"]]
        if missing:
            raise ItemDropped(f"no method for {len(missing)} operation(s): {'; '.join(missing)}")
        parts = [Method(name, data["imports"], data["code"])
                 for name, data in ((name, value["methods"][name]) for name in value["operations"])]
        try:
            source = assemble(value["skeleton"], parts)
            tools = derive_tools(source, value["class_name"])
        except (ParseError, ToolSchemaError) as exc:
            raise ItemDropped(str(exc)) from None
        names = {tool["function"]["name"] for tool in tools}
        absent = [name for name in value["operations"] if name not in names]
        if absent:
            raise ItemDropped(f"operations that are not tools after assembly: {', '.join(absent)}")
        return {"source": source, "tools": tools}

    assemble_items = []
    for env_id, op_list in op_lists.items():
        names = [op["name"] for op in op_list["operations"]]
        assemble_items.append((env_id, {
            "skeleton": skeletons[env_id]["code"], "class_name": skeletons[env_id]["class_name"],
            "operations": names,
            "methods": {name: methods[f"{env_id}/{name}"] for name in names
                        if f"{env_id}/{name}" in methods},
            "drops": {name: method_drops.get(f"{env_id}/{name}", "dropped") for name in names}}))
    assembled = await run.stage("logic.assemble", assemble_items, assemble_env)

    results: dict[str, dict[str, Any]] = {}
    for env_id, built in assembled.items():
        names = [op["name"] for op in op_lists[env_id]["operations"]]
        created = max([envs[env_id]["created"], designs[env_id]["created"],
                       skeletons[env_id]["created"], op_lists[env_id]["created"],
                       *(methods[f"{env_id}/{name}"]["created"] for name in names)])
        code_models = sorted({methods[f"{env_id}/{name}"]["model"] for name in names})
        results[env_id] = {
            **envs[env_id], "state": designs[env_id], "class_name": skeletons[env_id]["class_name"],
            "operations": op_lists[env_id]["operations"], "source": built["source"],
            "tools": built["tools"], "created": created, "model": ", ".join(code_models)}
    return results

