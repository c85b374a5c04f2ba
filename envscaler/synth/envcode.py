"""An environment as the later stages see it, and the initial-state configs they generate for it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from envscaler.format.folders import sorted_json
from envscaler.sandbox.errors import RuntimeFault, SandboxError
from envscaler.synth.codeinfo import state_schemas
from envscaler.synth.llm import Answer, ModelClient, ParseError, TransientFailure
from envscaler.synth.parsing import json_value
from envscaler.synth.prompts import messages
from envscaler.synth.prompts import quality as prompts
from envscaler.synth.sandboxes import SandboxHub, is_infrastructure_fault

MAX_STATE_CHARS = 12_000


@dataclass(frozen=True)
class EnvCode:
    env_id: str
    class_name: str
    summary: str
    introduction: str
    rules: list[str]
    source: str
    tools: list[dict[str, Any]]

    @property
    def tool_names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.tools]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EnvCode:
        return cls(env_id=data["env_id"], class_name=data["class_name"], summary=data["summary"],
                   introduction=data["introduction"], rules=list(data["rules"]),
                   source=data["source"], tools=data["tools"])

    def to_dict(self) -> dict[str, Any]:
        return {"env_id": self.env_id, "class_name": self.class_name, "summary": self.summary,
                "introduction": self.introduction, "rules": self.rules, "source": self.source,
                "tools": self.tools}


def state_json(state: Any, limit: int = MAX_STATE_CHARS) -> str:
    """A state for a prompt: indented JSON, cut (and said so) beyond ``limit`` characters."""
    text = json.dumps(state, indent=1, ensure_ascii=False, sort_keys=True)
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... ({len(text) - limit} more characters not shown)"


def attributes_text(schemas: dict[str, dict[str, Any]]) -> str:
    return "\n".join(f"- {name}: {json.dumps(schema, sort_keys=True)}"
                     for name, schema in schemas.items())


def config_validator(schemas: dict[str, dict[str, Any]]):  # type: ignore[no-untyped-def]
    """A parser of a reply into an init_config that fits the state attributes' schemas."""

    def parse(text: str) -> dict[str, Any]:
        config = json_value(text)
        if not isinstance(config, dict) or not config:
            raise ParseError("the initial state must be a non-empty JSON object")
        unknown = sorted(set(config) - set(schemas))
        if unknown:
            raise ParseError(f"unknown state attributes {', '.join(unknown)}; the class has "
                             f"{', '.join(schemas)}")
        for name, value in config.items():
            error = best_match(Draft202012Validator(schemas[name]).iter_errors(value))
            if error is not None:
                where = "/".join(str(part) for part in (name, *error.absolute_path))
                raise ParseError(f"{where}: {error.message}")
        return sorted_json(config)

    return parse


async def instantiate(hub: SandboxHub, env: EnvCode, config: dict[str, Any], seed: int,
                      purpose: str) -> None:
    """Raise ParseError when the environment does not instantiate with ``config`` (in a sandbox)."""
    try:
        async with hub.sandbox(purpose) as box:
            await box.load(source=env.source, class_name=env.class_name, tools=env.tool_names,
                           init_config=config, seed=seed,
                           max_result_bytes=hub.limits.max_result_bytes,
                           timeout=hub.limits.load_timeout)
            await box.state(timeout=hub.limits.call_timeout)
    except RuntimeFault as exc:
        if is_infrastructure_fault(exc.kind):
            raise TransientFailure(f"sandbox runtime failure: {exc}") from None
        raise ParseError(f"the environment does not instantiate with it: {exc.message}") from None
    except SandboxError as exc:
        raise TransientFailure(f"sandbox failure while instantiating: {exc}") from None


async def generate_config(model: ModelClient, hub: SandboxHub, env: EnvCode, *, stage: str,
                          item: str, index: int, count: int, focus: str,
                          seed: int) -> Answer[dict[str, Any]]:
    """An initial state that fits the class and instantiates in a sandbox (else retried with the
    reason, then dropped)."""
    schemas = state_schemas(env.source, env.class_name)

    async def validate(config: dict[str, Any]) -> None:
        await instantiate(hub, env, config, seed, item)

    return await model.ask(stage, item, messages(
        prompts.CONFIG_SYSTEM, prompts.CONFIG_USER, summary=env.summary,
        introduction=env.introduction, source=env.source.strip(),
        attributes=attributes_text(schemas), index=index, count=count, focus=focus),
        config_validator(schemas), validate)


def describe_tools(tools: list[dict[str, Any]]) -> str:
    """Tools for a prompt: name, first line of the description, parameters as JSON."""
    lines = []
    for tool in tools:
        function = tool["function"]
        summary = (function.get("description") or "").strip().splitlines()
        lines.append(f"- {function['name']}: {summary[0] if summary else ''}\n"
                     f"  parameters: {json.dumps(function['parameters'].get('properties', {}))}")
    return "\n".join(lines)
