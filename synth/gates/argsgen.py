"""Arguments for tool calls, generated from the tool's JSON schema (for the executable gate).

Valid cases satisfy the schema. They rotate through strategies so that each tool meets both the
records of its initial state and values it has never seen:

- ``state``: values taken from the state where a name matches (``patient_id`` -> the keys of
  ``patients`` and every ``patient_id`` field; ``status`` -> every ``status`` field), optional
  parameters included;
- ``fresh``: plausible values that are not in the state (``gate-patient_id-1``, ``2025-02-03``),
  required parameters only;
- ``edge``: empty strings, zero, empty arrays, null where allowed, every parameter.

Invalid cases break the schema in one place: a required parameter left out, an argument the tool
does not take, or a parameter given a value of the wrong JSON type.

Everything is drawn from ``random.Random(seed + tool name)``: the same inputs give the same cases.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from envformat.toolschema import json_type

VALID = "valid"
MISSING_REQUIRED = "missing_required"
UNEXPECTED_ARGUMENT = "unexpected_argument"
WRONG_TYPE = "wrong_type"
UNEXPECTED_NAME = "envscaler_unexpected"
STRATEGIES = ("state", "fresh", "edge")
_JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")
_WRONG_VALUES: dict[str, Any] = {"string": 7, "integer": "7", "number": "7.5", "boolean": "yes",
                                 "array": "not-a-list", "object": "not-an-object", "null": "x"}
MAX_POOL_VALUES = 200


@dataclass(frozen=True)
class Case:
    kind: str
    arguments: dict[str, Any]
    note: str

    @property
    def valid(self) -> bool:
        return self.kind == VALID

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "arguments": self.arguments, "note": self.note}


@dataclass
class ValuePool:
    """Values found in a state: by field name (``status`` -> every status) and by container
    (``patients`` -> its keys)."""

    by_field: dict[str, list[Any]] = field(default_factory=dict)
    by_container: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ValuePool:
        by_field: dict[str, set[str]] = {}
        by_container: dict[str, list[str]] = {}
        for name, value in state.items():
            if isinstance(value, dict):
                by_container[name] = sorted(str(key) for key in value)[:MAX_POOL_VALUES]
            _collect(value, by_field, depth=0)
        return cls(by_field={name: [json.loads(text) for text in sorted(texts)][:MAX_POOL_VALUES]
                             for name, texts in sorted(by_field.items())},
                   by_container=dict(sorted(by_container.items())))

    def candidates(self, name: str) -> list[Any]:
        """Values that could fit a parameter called ``name``."""
        found: list[Any] = list(self.by_field.get(name, []))
        stem = _stem(name)
        stems = {stem, stem.rsplit("_", 1)[-1]} if stem else set()  # new_slot_id: slot too
        for candidate in sorted(stems):
            for container, keys in self.by_container.items():
                if container.lower().startswith(candidate.lower()):
                    found.extend(keys)
            for field_name, values in self.by_field.items():
                if field_name != name and _stem(field_name) == candidate:
                    found.extend(values)
        unique: dict[str, Any] = {}
        for value in found:
            unique.setdefault(json.dumps(value, sort_keys=True), value)
        return [unique[key] for key in sorted(unique)]


def _collect(value: Any, by_field: dict[str, set[str]], depth: int) -> None:
    if depth > 6:
        return
    if isinstance(value, dict):
        for key, inner in value.items():
            if isinstance(inner, (str, int, float)):  # bool is an int
                by_field.setdefault(str(key), set()).add(json.dumps(inner))
            _collect(inner, by_field, depth + 1)
    elif isinstance(value, list):
        for inner in value[:50]:
            _collect(inner, by_field, depth + 1)


def _stem(name: str) -> str | None:
    lowered = name.lower()
    for suffix in ("_ids", "_id", "id"):
        if lowered.endswith(suffix) and len(lowered) > len(suffix):
            return name[: len(name) - len(suffix)].rstrip("_")
    return None


def generate_cases(tool: dict[str, Any], pool: ValuePool, seed: int,
                   valid_count: int = 3) -> list[Case]:
    """Valid cases first, then invalid ones, for one OpenAI function schema."""
    function = tool["function"]
    name = function["name"]
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    rng = random.Random(_seed(seed, name))
    validator = Draft202012Validator(parameters)
    generator = _Generator(parameters, pool, rng)
    cases: list[Case] = []
    seen: set[str] = set()
    for index in range(valid_count):
        strategy = STRATEGIES[index % len(STRATEGIES)]
        arguments = generator.arguments(strategy, index)
        text = json.dumps(arguments, sort_keys=True)
        if text in seen or not validator.is_valid(arguments):
            continue
        seen.add(text)
        cases.append(Case(VALID, arguments, f"{strategy} values"))
    base = cases[0].arguments if cases else generator.arguments("fresh", 0)
    cases.extend(_invalid_cases(parameters, base, validator))
    return cases


def _invalid_cases(parameters: dict[str, Any], base: dict[str, Any],
                   validator: Draft202012Validator) -> list[Case]:
    cases: list[Case] = []
    required = [name for name in parameters.get("required", []) if name in base]
    if required:
        arguments = {key: value for key, value in base.items() if key != required[0]}
        cases.append(Case(MISSING_REQUIRED, arguments, f"{required[0]} left out"))
    if parameters.get("additionalProperties") is False:
        cases.append(Case(UNEXPECTED_ARGUMENT, {**base, UNEXPECTED_NAME: "x"},
                          f"extra argument {UNEXPECTED_NAME}"))
    for name, schema in (parameters.get("properties") or {}).items():
        wrong = _wrong_value(schema)
        if wrong is _NONE:
            continue
        arguments = {**base, name: wrong}
        if validator.is_valid(arguments):
            continue
        cases.append(Case(WRONG_TYPE, arguments, f"{name} given {json.dumps(wrong)}"))
    return cases


class _NoValue:
    pass


_NONE = _NoValue()


def _wrong_value(schema: dict[str, Any]) -> Any:
    """A value of a JSON type the schema does not allow, or _NONE when every type is allowed."""
    allowed = _allowed_types(schema)
    if allowed is None:
        return _NONE
    if "number" in allowed:
        allowed = allowed | {"integer"}
    for candidate in ("string", "integer", "boolean", "array", "object"):
        if candidate in allowed:
            wrong = _WRONG_VALUES[candidate]
            if _type_of(wrong) not in allowed and not (_type_of(wrong) == "integer"
                                                        and "number" in allowed):
                return wrong
    return "wrong"  # e.g. only null allowed


def _allowed_types(schema: dict[str, Any]) -> set[str] | None:
    if "enum" in schema:
        types = {_type_of(value) for value in schema["enum"]}
        return types
    if "type" in schema:
        declared = schema["type"]
        return set(declared if isinstance(declared, list) else [declared])
    if "anyOf" in schema:
        found: set[str] = set()
        for member in schema["anyOf"]:
            types = _allowed_types(member)
            if types is None:
                return None
            found |= types
        return found
    return None


def _type_of(value: Any) -> str:
    return json_type(value) or "object"


def _seed(seed: int, name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "big")


class _Generator:
    def __init__(self, parameters: dict[str, Any], pool: ValuePool, rng: random.Random) -> None:
        self.parameters = parameters
        self.pool = pool
        self.rng = rng

    def arguments(self, strategy: str, index: int) -> dict[str, Any]:
        properties: dict[str, Any] = self.parameters.get("properties") or {}
        required = set(self.parameters.get("required") or [])
        arguments: dict[str, Any] = {}
        for name, schema in properties.items():
            if name not in required and strategy == "fresh":
                continue
            arguments[name] = self.value(name, schema, strategy, index, depth=0)
        return arguments

    def value(self, name: str, schema: dict[str, Any], strategy: str, index: int,
              depth: int) -> Any:
        if "enum" in schema:
            options = [value for value in schema["enum"] if value is not None] or schema["enum"]
            if strategy == "edge" and None in schema["enum"]:
                return None
            return options[(index + self.rng.randrange(len(options))) % len(options)]
        if "anyOf" in schema:
            members = [m for m in schema["anyOf"] if m.get("type") != "null"] or schema["anyOf"]
            nullable = any(m.get("type") == "null" for m in schema["anyOf"])
            if strategy == "edge" and nullable:
                return None
            return self.value(name, members[index % len(members)], strategy, index, depth)
        declared = schema.get("type")
        types = declared if isinstance(declared, list) else [declared] if declared else []
        if strategy == "edge" and "null" in types:
            return None
        concrete = [t for t in types if t != "null"]
        json_type = concrete[0] if concrete else None
        if json_type is None:
            return self._any(name, strategy, index)
        if json_type == "string":
            return self._string(name, strategy, index)
        if json_type in ("integer", "number"):
            return self._number(name, json_type, strategy)
        if json_type == "boolean":
            return strategy != "edge" and (index % 2 == 0)
        if json_type == "array":
            return self._array(name, schema, strategy, index, depth)
        if json_type == "object":
            return self._object(schema, strategy, index, depth)
        return None

    def _from_pool(self, name: str, kind: type | tuple[type, ...]) -> list[Any]:
        return [value for value in self.pool.candidates(name)
                if isinstance(value, kind) and not isinstance(value, bool)]

    def _any(self, name: str, strategy: str, index: int) -> Any:
        found = self.pool.candidates(name)
        if strategy == "state" and found:
            return self.rng.choice(found)
        return "" if strategy == "edge" else f"gate-{name}-{index}"

    def _string(self, name: str, strategy: str, index: int) -> str:
        if strategy == "edge":
            return ""
        found = self._from_pool(name, str)
        if strategy == "state" and found:
            return self.rng.choice(found)
        lowered = name.lower()
        if lowered.endswith(("_at", "datetime", "timestamp", "time", "when")):
            return f"2025-02-{3 + index:02d}T10:30:00"
        if "date" in lowered or lowered in ("day", "start", "end", "since", "until"):
            return f"2025-02-{3 + index:02d}"
        if "email" in lowered:
            return f"gate{index}@example.org"
        if "phone" in lowered:
            return f"+1 555-010-{index:04d}"
        return f"gate-{name}-{index + 1}"

    def _number(self, name: str, json_type: str, strategy: str) -> int | float:
        if strategy == "edge":
            return 0
        found = self._from_pool(name, (int, float))
        if json_type == "integer":
            found = [value for value in found if isinstance(value, int)]
        if strategy == "state" and found:
            return self.rng.choice(found)
        value = self.rng.randint(1, 20)
        return value if json_type == "integer" else value + 0.5

    def _array(self, name: str, schema: dict[str, Any], strategy: str, index: int,
               depth: int) -> list[Any]:
        if strategy == "edge" or depth > 3:
            return []
        items = schema.get("items") or {}
        if "prefixItems" in schema:
            return [self.value(name, item, strategy, index, depth + 1)
                    for item in schema["prefixItems"]]
        singular = name.removesuffix("s")
        count = 1 if strategy == "fresh" else 2
        values = [self.value(singular, items, strategy, index + offset, depth + 1)
                  for offset in range(count)]
        unique: list[Any] = []
        for value in values:
            if value not in unique:
                unique.append(value)
        return unique

    def _object(self, schema: dict[str, Any], strategy: str, index: int,
                depth: int) -> dict[str, Any]:
        properties: dict[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        if depth > 3:
            return {}
        result: dict[str, Any] = {}
        for key, inner in properties.items():
            if key in required or strategy != "fresh":
                result[key] = self.value(key, inner, strategy, index, depth + 1)
        extra = schema.get("additionalProperties")
        if not properties and isinstance(extra, dict) and strategy != "edge":
            result[f"gate-key-{index}"] = self.value("value", extra, strategy, index, depth + 1)
        return result
