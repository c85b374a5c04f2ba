"""Arguments for tool calls, generated from the tool's JSON schema (for the executable gate).

Valid cases satisfy the schema. They rotate through strategies so that each tool meets both the
records of its initial state and values it has never seen:

- ``state``: values taken from the state where a name matches (``patient_id`` -> the keys of
  ``patients`` and every ``patient_id`` field; ``status`` -> every ``status`` field), optional
  parameters included;
- ``fresh``: plausible values that are not in the state (``gate-patient_id-1``, ``2025-02-03``),
  required parameters only;
- ``edge``: empty strings, zero, empty arrays, null where allowed, every parameter.

Only schema-valid cases are made: the gateway refuses arguments that do not fit the schema before
a tool sees them, so how a tool would treat them is never asked.

Everything is drawn from ``random.Random(seed + tool name)``: the same inputs give the same cases.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

STRATEGIES = ("state", "fresh", "edge")
MAX_POOL_VALUES = 200


@dataclass(frozen=True)
class Case:
    """One call's arguments, and the strategy that made them."""

    arguments: dict[str, Any]
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {"arguments": self.arguments, "note": self.note}


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
    """Up to ``valid_count`` distinct schema-valid cases for one OpenAI function schema."""
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
        cases.append(Case(arguments, f"{strategy} values"))
    return cases


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
