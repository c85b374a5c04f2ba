"""The catalogue as the gateway serves it: loaded once, tool-argument validators compiled once.

Environments whose files do not load are logged (one line per `FormatError`) and left out; the
rest are served. A scenario line the loader skipped is logged too (``file:line: reason``); its
environment is served with its other scenarios. Nothing here imports or executes environment
code: the loader reads files and the manifests' tool schemas, and the code itself only ever runs
inside a sandbox.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from envscaler.common.jsoncodec import dump_bytes, dumps
from envscaler.format.loader import EnvPackage, load_catalogue
from envscaler.format.models import EnvManifest, Scenario
from envscaler.sandbox.runtime.determinism import DEFAULT_START
from envscaler.server import strictjson
from envscaler.server.errors import invalid_arguments, not_found

REPORTED_ERRORS = 16  # schema errors looked at to name the one a caller is told

log = logging.getLogger("envscaler.server.catalogue")

# Keywords whose meaning jsonschema_rs and jsonschema share exactly (tests/unit/
# test_server_catalogue.py compares them); a schema with any other keyword is judged by jsonschema
# alone. jsonschema_rs only ever accepts: what it refuses, jsonschema judges and words.
FAST_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "enum", "const", "items",
    "minLength", "maxLength", "minItems", "maxItems",
    "description", "title", "default", "examples", "$comment",
})
SUBSCHEMA_MAPS = ("properties",)
SUBSCHEMAS = ("additionalProperties", "items")


@dataclass(frozen=True)
class Initial:
    """Where a session starts, as the sandbox receives it: a JSON text (a scenario's
    ``init_config``, the data file it builds on, or a caller's ``init_config``) and, over a data
    file, the scenario's merge patch. A scenario's is made once and shared by every session that
    starts from it; a session's record only names its scenario."""

    text: str
    patch: dict[str, Any] | None = None

    @classmethod
    def of(cls, init_config: dict[str, Any]) -> Initial:
        return cls(dumps(init_config))

    @property
    def size(self) -> int:
        """Characters of JSON the sandbox receives: what a session's state starts from."""
        return len(self.text) + (len(dump_bytes(self.patch)) if self.patch else 0)


@dataclass
class ServedEnv:
    """One environment with what the hot path needs precomputed."""

    package: EnvPackage
    tools: list[dict[str, Any]]  # OpenAI function schemas, as in env.json
    tool_names: list[str]
    validators: dict[str, Draft202012Validator] = field(default_factory=dict)
    # tool -> jsonschema_rs's is_valid, for the schemas of FAST_KEYWORDS only
    accepts: dict[str, Callable[[Any], bool]] = field(default_factory=dict)
    scenarios_by_id: dict[str, Scenario] = field(default_factory=dict)
    # scenario id -> its Initial, made on first use (a data file's text is the package's own)
    initials: dict[str, Initial] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.package.manifest.id

    @property
    def manifest(self) -> EnvManifest:
        return self.package.manifest

    @property
    def source(self) -> str:
        return self.package.source

    @property
    def class_name(self) -> str:
        return self.package.manifest.class_name

    @property
    def scenarios(self) -> tuple[Scenario, ...]:
        return self.package.scenarios

    def clock_start(self, scenario_id: str | None) -> str:
        """Where a session's virtual clock starts: the scenario's, else the environment's, else
        the runtime's default (explicit, so that a reset into another scenario moves it)."""
        scenario = None if scenario_id is None else self.scenario(scenario_id)
        return (scenario and scenario.clock_start) or self.manifest.clock_start or DEFAULT_START

    def initial(self, scenario_id: str) -> Initial:
        initial = self.initials.get(scenario_id)
        if initial is None:
            scenario = self.scenario(scenario_id)
            if scenario.init_data is None:
                initial = Initial.of(scenario.init_config)
            else:
                initial = Initial(self.package.data[scenario.init_data], scenario.init_config)
            self.initials[scenario_id] = initial
        return initial

    def scenario(self, scenario_id: str) -> Scenario:
        scenario = self.scenarios_by_id.get(scenario_id)
        if scenario is not None:
            return scenario
        raise not_found(
            "UnknownScenario", f"environment {self.id!r} has no scenario {scenario_id!r}"
        )


def tool_name(schema: dict[str, Any]) -> str:
    function = schema.get("function", schema)
    return str(function["name"])


def tool_parameters(schema: dict[str, Any]) -> dict[str, Any]:
    function = schema.get("function", schema)
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    return parameters


class ServedCatalogue:
    def __init__(self, root: Path) -> None:
        self.root = root
        catalogue = load_catalogue(root)
        for error in catalogue.errors:
            log.error("catalogue error root=%s error=%s", root, error)
        self.envs: dict[str, ServedEnv] = {}
        for env_id, package in sorted(catalogue.envs.items()):
            for skipped in package.skipped:
                log.warning("scenario skipped env=%s error=%s", env_id, skipped)
            tools = list(package.manifest.tools)
            served = ServedEnv(
                package=package,
                tools=tools,
                tool_names=[tool_name(t) for t in tools],
                scenarios_by_id={s.id: s for s in package.scenarios},
            )
            for schema in tools:
                name = tool_name(schema)
                try:
                    parameters = tool_parameters(schema)
                    Draft202012Validator.check_schema(parameters)
                    served.validators[name] = Draft202012Validator(parameters)
                except Exception as exc:  # noqa: BLE001 - a bad schema must not stop the service
                    log.error("tool schema rejected env=%s tool=%s error=%s", env_id, name, exc)
                    continue
                accepts = _fast_validator(parameters)
                if accepts is not None:
                    served.accepts[name] = accepts
            self.envs[env_id] = served
        log.info(
            "catalogue loaded root=%s envs=%d errors=%d",
            root,
            len(self.envs),
            len(catalogue.errors),
        )

    def env(self, env_id: str) -> ServedEnv:
        try:
            return self.envs[env_id]
        except KeyError:
            raise not_found("UnknownEnv", f"no environment {env_id!r} in the catalogue") from None

    def validate_arguments(self, env: ServedEnv, tool: str, arguments: Any) -> None:
        """Raise 404 ``UnknownTool`` or 422 ``InvalidArguments`` (naming the field)."""
        validator = env.validators.get(tool)
        if validator is None:
            if tool in env.tool_names:  # its schema was rejected at load time: the runtime judges
                if not isinstance(arguments, dict):
                    raise invalid_arguments("arguments must be a JSON object", field="arguments")
                _require_strict_json(arguments)
                return
            raise not_found("UnknownTool", f"environment {env.id!r} has no tool {tool!r}")
        if not isinstance(arguments, dict):
            raise invalid_arguments(
                f"arguments must be a JSON object, not {type(arguments).__name__}",
                field="arguments",
            )
        _require_strict_json(arguments)  # first: schema messages quote keys and values
        accepts = env.accepts.get(tool)
        if accepts is not None:
            try:
                if accepts(arguments):
                    return
            except Exception:  # noqa: BLE001, S110 - a value it cannot take: jsonschema judges
                pass
        # The best of the first few: jsonschema finds errors lazily, and arguments with thousands of
        # wrong items would otherwise have every one of them found (seconds of the event loop).
        error = best_match(islice(validator.iter_errors(arguments), REPORTED_ERRORS))
        if error is not None:
            field_path, reason = describe(error)
            raise invalid_arguments(
                f"{field_path}: {reason}" if field_path else reason, field=field_path or None
            )


def _fast_validator(schema: Any) -> Callable[[Any], bool] | None:
    """jsonschema_rs's ``is_valid`` for a schema of `FAST_KEYWORDS` only (about forty times
    jsonschema's speed on a tool's arguments), else None."""
    if not _fast_keywords_only(schema):
        return None
    try:
        return jsonschema_rs.Draft202012Validator(schema).is_valid  # type: ignore[no-any-return]
    except Exception:  # noqa: BLE001 - jsonschema alone then
        return None


def _fast_keywords_only(schema: Any) -> bool:
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or not schema.keys() <= FAST_KEYWORDS:
        return False
    for key in SUBSCHEMA_MAPS:
        if key in schema and not (
            isinstance(schema[key], dict) and all(map(_fast_keywords_only, schema[key].values()))
        ):
            return False
    return all(_fast_keywords_only(schema[key]) for key in SUBSCHEMAS if key in schema)


def _require_strict_json(arguments: dict[str, Any]) -> None:
    """NaN, Infinity and lone surrogates pass a JSON schema but can be neither stored nor sent."""
    found = strictjson.problem(arguments)
    if found is not None:
        field_path, reason = found
        raise invalid_arguments(f"{field_path}: {reason}" if field_path else reason,
                                field=field_path or None)


def describe(error: ValidationError) -> tuple[str, str]:
    """The field to blame (dotted path; array items by index) and why, in jsonschema's words."""
    path = [str(part) for part in error.absolute_path]
    reason = error.message
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [name for name in error.validator_value if name not in error.instance]
        if missing:
            path.append(missing[0])
            reason = (
                "is a required property"
                if len(missing) == 1
                else f"is a required property (also missing: {', '.join(missing[1:])})"
            )
    elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set((error.schema or {}).get("properties", {}))
        extra = sorted(name for name in error.instance if name not in allowed)
        if extra:
            path.append(extra[0])
            reason = (
                "is not a parameter of this tool"
                if len(extra) == 1
                else f"is not a parameter of this tool (nor are: {', '.join(extra[1:])})"
            )
    return ".".join(path), reason
