"""One release record into our format: an environment record into ``env.py`` + ``EnvManifest``,
an RL scenario row into a ``Scenario``. Pure functions; nothing is written and nothing is run.

Generated code is never executed here: ``env_class_code`` is parsed (``ast``) and its tool schemas
derived statically by ``envscaler.format.toolschema.derive_tools``. The release's own ``tools`` (thin
schemas: docstring as description, types only, every parameter required, private helpers exposed)
are ignored; they are only compared by name, so the report can say which methods the release
exposed that we do not (its ``_private`` helpers).

Field mapping (release -> ours):

==============================  =============================================================
``env_id``                      ``id``: ``envscaler_`` + the env_id slugified (lower case,
                                runs of other characters than ``a-z0-9_-`` become ``_``),
                                e.g. ``env_12_rl`` -> ``envscaler_env_12_rl``
``env_class_name``              ``class_name``
``env_class_code``              ``env.py``, byte for byte (UTF-8)
``environment_summary``         ``summary``
``environment_introduction``    ``introduction``
``state_space_definition``      ``state_space`` (``entity``, ``attributes``, ``description``)
``constraints_rules``           ``constraint_rules``
``operation_list``              ``operations`` (``operation_name`` / ``operation_description`` /
                                ``operation_type``; ``modify`` is read as ``state_change``)
``tools``                       ignored: ``tools`` are derived from ``env.py``
``env_class_def``,              ignored (derivable from the code)
``env_structure``,
``env_func_details``
------------------------------  -------------------------------------------------------------
``task_id``                     ``id`` (kept as is when it is a valid scenario id)
``init_config`` (JSON string)   ``init_config`` (an object)
``task``                        ``task``
``checklist_with_func``         ``checklist``: ``check_item`` -> ``item``, ``check_func`` as is
(no solution in the release)    ``split: "rl"``, ``solution: null``, ``verified: false``
==============================  =============================================================

``tools``, ``init_config`` (and, defensively, ``checklist_with_func``, ``state_space_definition``,
``operation_list`` and ``constraints_rules``) are accepted both as JSON strings and as decoded
values, since the release's own loaders feed them both ways.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from envscaler.format.loader import (
    check_func_problem,  # the loader's own rule, so load_env agrees
    content_hash,
)
from envscaler.format.models import (
    CLASS_NAME_PATTERN,
    ENV_ID_PATTERN,
    SCENARIO_ID_PATTERN,
    ChecklistItem,
    EnvManifest,
    Operation,
    Provenance,
    Scenario,
    StateEntity,
)
from envscaler.format.toolschema import ToolSchemaError, derive_tools, public_tool_names
from envscaler.importers.envscaler_release.pins import ENV_ID_PREFIX, MODEL

SPLIT = "rl"
_QUERY_TYPES = {"query", "read", "get", "information query", "information_query"}
_CHANGE_TYPES = {"state_change", "state change", "state-change", "statechange", "modify",
                 "modification", "update", "write", "change"}


class RecordError(ValueError):
    """A record cannot be imported; the message is the reason, for the report."""


@dataclass(frozen=True)
class ConvertedEnv:
    """An environment record in our format, with what the report says about it."""

    release_id: str
    manifest: EnvManifest
    source_bytes: bytes
    release_only_tools: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def env_id(self) -> str:
        return self.manifest.id

    @property
    def class_name(self) -> str:
        return self.manifest.class_name


# --- ids ----------------------------------------------------------------------------------------

def env_id_for(release_id: str) -> str:
    """Our environment id for a release env_id: ``envscaler_`` + its slug."""
    slug = re.sub(r"[^a-z0-9_\-]+", "_", release_id.strip().lower()).strip("_-")
    if not slug:
        raise RecordError(f"env_id {release_id!r} has no usable characters for an id")
    env_id = ENV_ID_PREFIX + slug
    if not re.fullmatch(ENV_ID_PATTERN, env_id):
        raise RecordError(f"env_id {release_id!r} gives {env_id!r}, longer than ids may be "
                          "(64 characters)")
    return env_id


def scenario_id_for(task_id: str) -> str:
    """Our scenario id for a release task_id: itself when valid, else its slug."""
    if re.fullmatch(SCENARIO_ID_PATTERN, task_id):
        return task_id
    slug = re.sub(r"[^A-Za-z0-9_.\-]+", "-", task_id.strip())
    slug = re.sub(r"^[^A-Za-z0-9]+", "", slug)[:128]
    if not re.fullmatch(SCENARIO_ID_PATTERN, slug):
        raise RecordError(f"task_id {task_id!r} has no usable characters for an id")
    return slug


def release_env_id(data: Any, key: str | None) -> str:
    """The env_id of an environment record: its field, else its key in the GitHub dict."""
    if not isinstance(data, dict):
        raise RecordError(f"the record is a JSON {_json_type(data)}, not an object")
    value = data.get("env_id", key)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise RecordError("env_id is missing or not a string")
    if key is not None and value != key:
        raise RecordError(f"env_id {value!r} differs from its key {key!r} in the file")
    return value


# --- environments -------------------------------------------------------------------------------

def convert_env(data: dict[str, Any], release_id: str, *, created: str,
                pipeline_version: str) -> ConvertedEnv:
    """An environment record -> (manifest, env.py bytes); RecordError says why it cannot be."""
    warnings: list[str] = []
    env_id = env_id_for(release_id)
    class_name = _required_str(data, "env_class_name")
    if not re.fullmatch(CLASS_NAME_PATTERN, class_name):
        raise RecordError(f"env_class_name {class_name!r} is not a Python class name")
    source = _required_str(data, "env_class_code")
    try:
        source_bytes = source.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RecordError(f"env_class_code cannot be encoded as UTF-8 ({exc.reason} at "
                          f"character {exc.start})") from None
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        raise RecordError(f"env_class_code does not parse: {exc.msg} (line {exc.lineno})") from None
    classes = [node.name for node in module.body if isinstance(node, ast.ClassDef)]
    if class_name not in classes:
        found = ", ".join(classes) if classes else "none"
        raise RecordError(f"env_class_code does not define class {class_name!r} at top level "
                          f"(classes found: {found})")
    try:
        tools = derive_tools(source, class_name)
    except ToolSchemaError as exc:
        line = f" (line {exc.line})" if exc.line else ""
        raise RecordError(f"no tool schemas can be derived from env_class_code: {exc}{line}") \
            from None
    ours = public_tool_names(tools)
    if not ours:
        warnings.append(f"class {class_name} has no public method: the environment has no tools")
    theirs = _release_tool_names(data.get("tools"), warnings)
    release_only = tuple(name for name in theirs if name not in ours)
    private = [name for name in release_only if name.startswith("_")]
    if private:
        warnings.append("the release also exposes private helper(s) as tools, which are not "
                        f"tools here: {', '.join(private)}")
    public_missing = [name for name in release_only if not name.startswith("_")]
    if public_missing:
        warnings.append(f"tools of the release that are not public methods of {class_name}: "
                        f"{', '.join(public_missing)}")
    if theirs:
        extra = [name for name in ours if name not in theirs]
        if extra:
            warnings.append(f"public methods missing from the release's tool list: "
                            f"{', '.join(extra)}")
    operations = _operations(data.get("operation_list"), warnings)
    missing_ops = [op.name for op in operations if op.name not in ours]
    if missing_ops:
        warnings.append(f"operations without a public method of that name: "
                        f"{', '.join(missing_ops)}")
    try:
        manifest = EnvManifest(
            id=env_id,
            class_name=class_name,
            summary=_optional_str(data, "environment_summary", warnings),
            introduction=_optional_str(data, "environment_introduction", warnings),
            state_space=_state_space(data.get("state_space_definition"), warnings),
            constraint_rules=_rules(data.get("constraints_rules"), warnings),
            operations=operations,
            tools=tools,
            provenance=Provenance(model=MODEL, created=created, pipeline_version=pipeline_version,
                                  content_hash=content_hash(source_bytes)),
        )
    except ValidationError as exc:  # e.g. an unusable --created date
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise RecordError(f"{where}: {first['msg']}") from None
    return ConvertedEnv(release_id=release_id, manifest=manifest, source_bytes=source_bytes,
                        release_only_tools=release_only, warnings=tuple(warnings))


def _release_tool_names(value: Any, warnings: list[str]) -> list[str]:
    """Names in the release's ``tools`` (only compared with ours; the schemas are not used)."""
    if value is None:
        return []
    try:
        tools = _decoded(value, "tools", list)
    except RecordError as exc:
        warnings.append(f"{exc} (ignored: tools are derived from the code)")
        return []
    names = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str):
            names.append(name)
    return names


def _state_space(value: Any, warnings: list[str]) -> list[StateEntity]:
    if value is None:
        warnings.append("state_space_definition is missing")
        return []
    entities = []
    for index, entry in enumerate(_decoded(value, "state_space_definition", list)):
        where = f"state_space_definition[{index}]"
        if not isinstance(entry, dict):
            raise RecordError(f"{where} is a JSON {_json_type(entry)}, not an object")
        name = entry.get("entity", entry.get("entity_name"))
        if not isinstance(name, str):
            raise RecordError(f"{where} has no entity name")
        entities.append(StateEntity(entity=name,
                                    attributes=_attributes(entry.get("attributes"), where),
                                    description=_text(entry.get("description", ""), where)))
    return entities


def _attributes(value: Any, where: str) -> str:
    """Attributes as prose: the release has ``"a, b, c"``; a list of names or of
    ``{name, type, description}`` (the shape its skel_builder README shows) is joined."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for item in value:
            if isinstance(item, str):
                parts.append(item)
            elif isinstance(item, dict) and isinstance(item.get("name"), str):
                kind = item.get("type")
                parts.append(f"{item['name']} ({kind})" if isinstance(kind, str) and kind
                             else item["name"])
            else:
                raise RecordError(f"{where}.attributes holds a {_json_type(item)}")
        return ", ".join(parts)
    raise RecordError(f"{where}.attributes is a JSON {_json_type(value)}")


def _rules(value: Any, warnings: list[str]) -> list[str]:
    if value is None:
        warnings.append("constraints_rules is missing")
        return []
    rules = _decoded(value, "constraints_rules", list)
    for index, rule in enumerate(rules):
        if not isinstance(rule, str):
            raise RecordError(f"constraints_rules[{index}] is a JSON {_json_type(rule)}, "
                              "not a string")
    return rules


def _operations(value: Any, warnings: list[str]) -> list[Operation]:
    if value is None:
        warnings.append("operation_list is missing")
        return []
    operations = []
    for index, entry in enumerate(_decoded(value, "operation_list", list)):
        where = f"operation_list[{index}]"
        if not isinstance(entry, dict):
            raise RecordError(f"{where} is a JSON {_json_type(entry)}, not an object")
        name = entry.get("operation_name", entry.get("name"))
        if not isinstance(name, str) or not name:
            raise RecordError(f"{where} has no operation_name")
        description = entry.get("operation_description", entry.get("description", ""))
        kind = entry.get("operation_type", entry.get("type"))
        normal = kind.strip().lower() if isinstance(kind, str) else None
        if normal in _QUERY_TYPES:
            op_type = "query"
        elif normal in _CHANGE_TYPES:
            op_type = "state_change"
        else:
            raise RecordError(f"{where} ({name}) has operation_type {kind!r}; expected query or "
                              "state_change")
        operations.append(Operation(name=name, description=_text(description, where),
                                    type=op_type))
    return operations


# --- scenarios ----------------------------------------------------------------------------------

def task_id_of(data: Any) -> str | None:
    """The task_id of a scenario row, when it has a usable one."""
    if isinstance(data, dict):
        value = data.get("task_id")
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value)
    return None


def scenario_env_id(data: Any) -> str:
    """The release env_id a scenario row belongs to."""
    if not isinstance(data, dict):
        raise RecordError(f"the row is a JSON {_json_type(data)}, not an object")
    value = data.get("env_id")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise RecordError("env_id is missing or not a string")
    return value


def convert_scenario(data: dict[str, Any], env: ConvertedEnv) -> Scenario:
    """An RL scenario row of ``env`` -> an unverified Scenario; RecordError says why not."""
    task_id = task_id_of(data)
    if task_id is None:
        raise RecordError("task_id is missing or not a string")
    class_name = data.get("env_class_name")
    if class_name is not None and class_name != env.class_name:
        raise RecordError(f"env_class_name {class_name!r} differs from its environment's "
                          f"({env.class_name!r})")
    init_config = _decoded(data.get("init_config"), "init_config", dict)
    task = data.get("task")
    if not isinstance(task, str) or not task.strip():
        raise RecordError("task is missing or blank")
    raw_checks = data.get("checklist_with_func")
    if raw_checks is None:
        raise RecordError("checklist_with_func is missing: nothing would score the task")
    checks = _decoded(raw_checks, "checklist_with_func", list)
    if not checks:
        raise RecordError("checklist_with_func is empty: nothing would score the task")
    checklist = []
    for index, entry in enumerate(checks):
        where = f"checklist_with_func[{index}]"
        if not isinstance(entry, dict):
            raise RecordError(f"{where} is a JSON {_json_type(entry)}, not an object")
        item, func = entry.get("check_item"), entry.get("check_func")
        if not isinstance(item, str):
            raise RecordError(f"{where}.check_item is missing or not a string")
        if not isinstance(func, str):
            raise RecordError(f"{where}.check_func is missing or not a string")
        problem = check_func_problem(func)
        if problem:
            raise RecordError(f"{where}.check_func {problem}")
        checklist.append(ChecklistItem(item=item, check_func=func))
    try:
        return Scenario(id=scenario_id_for(task_id), split=SPLIT, task=task,
                        init_config=init_config, checklist=checklist, solution=None,
                        verified=False)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise RecordError(f"{where}: {first['msg']}") from None


# --- helpers ------------------------------------------------------------------------------------

def _decoded(value: Any, name: str, expected: type) -> Any:
    """``value``, decoded first when it is a JSON string, which must be of type ``expected``."""
    if value is None:
        raise RecordError(f"{name} is missing")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{name} is not valid JSON: {exc.msg} (line {exc.lineno}, column "
                              f"{exc.colno})") from None
    if not isinstance(value, expected):
        want = "an object" if expected is dict else "a list"
        raise RecordError(f"{name} is a JSON {_json_type(value)}, not {want}")
    return value


def _required_str(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip():
        raise RecordError(f"{name} is missing or not a string")
    return value


def _optional_str(data: dict[str, Any], name: str, warnings: list[str]) -> str:
    value = data.get(name)
    if value is None:
        warnings.append(f"{name} is missing")
        return ""
    return _text(value, name)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise RecordError(f"{where}: expected a string, found a JSON {_json_type(value)}")
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object" if isinstance(value, dict) else type(value).__name__
