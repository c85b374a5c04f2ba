"""Structural limits on the JSON that clients send: nesting depth, items per array, keys per
object, characters per string (``ENVSCALER_MAX_JSON_*``).

Why: what a JSON value costs the gateway grows with its shape, not only its size. A million-item
array of the wrong type kept the schema validator collecting a million errors (the gateway process
stalled for seconds); a value nested 500 deep was stored, then could never be encoded again (its
trajectory answered 500 for ever); a body nested 100,000 deep overflowed the standard library's
parser (RecursionError, 500). So every body and every tool call's arguments are parsed without
recursion errors (`loads`) and walked without recursion (`check`) before any schema sees them, and
a value past a limit is refused with 422 ``JsonTooComplex`` naming the limit and the field;
nothing is stored or run. A value within the limits can be validated, encoded and decoded by any
JSON library the gateway uses (orjson stops encoding at 254 levels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envscaler.common import jsoncodec
from envscaler.server.errors import ApiError

TYPE = "JsonTooComplex"


@dataclass(frozen=True)
class JsonLimits:
    depth: int
    items: int
    keys: int
    string: int

    def too_deep(self, field: str) -> ApiError:
        return ApiError(422, TYPE, f"{_named(field)}nests arrays and objects deeper than "
                        f"{self.depth} levels (ENVSCALER_MAX_JSON_DEPTH)", field=field or None)


def loads(text: bytes | str, limits: JsonLimits, field: str = "body") -> Any:
    """Parse JSON (`envscaler.common.jsoncodec.loads`: NaN and Infinity pass, for the strict-JSON checks to
    name) and `check` it. Invalid JSON raises ``ValueError``; too deep raises `ApiError`
    ``JsonTooComplex``."""
    try:
        value = jsoncodec.loads(text)
    except RecursionError:  # deeper than orjson (1024 levels) and then the standard library go
        raise limits.too_deep(field) from None
    check(value, limits, field)
    return value


def check(value: Any, limits: JsonLimits, field: str = "") -> None:
    """Raise 422 ``JsonTooComplex`` naming the first limit ``value`` exceeds and where; one pass
    without recursion, which stops at the first container too large before looking inside it."""
    if isinstance(value, str):
        _check_string(value, limits, field)
        return
    stack: list[tuple[Any, int, str]] = [(value, 1, field)]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, dict):
            if len(node) > limits.keys:
                raise _exceeded(path, f"has {len(node)} keys; the limit is {limits.keys} "
                                "(ENVSCALER_MAX_JSON_KEYS)")
            children: Any = node.items()
        elif isinstance(node, list):
            if len(node) > limits.items:
                raise _exceeded(path, f"has {len(node)} items; the limit is {limits.items} "
                                "(ENVSCALER_MAX_JSON_ITEMS)")
            children = enumerate(node)
        else:
            continue
        for key, item in children:
            if isinstance(key, str) and len(key) > limits.string:
                raise _exceeded(path, f"has a key of {len(key)} characters; the limit is "
                                f"{limits.string} (ENVSCALER_MAX_JSON_STRING)")
            if isinstance(item, str):
                if len(item) > limits.string:
                    _check_string(item, limits, _join(path, key))
            elif isinstance(item, dict | list):
                if depth >= limits.depth:
                    raise limits.too_deep(_join(path, key))
                stack.append((item, depth + 1, _join(path, key)))


def _check_string(text: str, limits: JsonLimits, field: str) -> None:
    if len(text) > limits.string:
        raise _exceeded(field, f"is a string of {len(text)} characters; the limit is "
                        f"{limits.string} (ENVSCALER_MAX_JSON_STRING)")


def _exceeded(field: str, reason: str) -> ApiError:
    return ApiError(422, TYPE, _named(field) + reason, field=field or None)


def _named(field: str) -> str:
    return f"{field}: " if field else ""


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)
