"""BFCL's ground truth is Python call text (``mv(source='a', destination='b')``); here it becomes
tool calls with named arguments, read with ``ast`` and ``ast.literal_eval`` (never evaluated)."""

from __future__ import annotations

import ast
from typing import Any

from envscaler.format.models import ToolCall


class CallError(ValueError):
    """A ground-truth call that is not a call of a tool with literal arguments."""


def parse_call(text: str, parameters: dict[str, list[str]]) -> ToolCall:
    """The call in ``text``; ``parameters``: tool name -> its parameter names in order (to name
    positional arguments)."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise CallError(f"{text!r} does not parse: {exc.msg}") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise CallError(f"{text!r} is not a call of a function by name")
    name = node.func.id
    if name not in parameters:
        raise CallError(f"{text!r} calls {name}, which is not a tool")
    names = parameters[name]
    if len(node.args) > len(names):
        raise CallError(f"{text!r} passes {len(node.args)} positional arguments; {name} takes "
                        f"{len(names)}")
    arguments = {names[index]: _literal(text, arg) for index, arg in enumerate(node.args)}
    for keyword in node.keywords:
        if keyword.arg is None or keyword.arg in arguments:
            raise CallError(f"{text!r} repeats or unpacks an argument")
        arguments[keyword.arg] = _literal(text, keyword.value)
    return ToolCall(name=name, arguments=arguments)


def _literal(text: str, node: ast.expr) -> Any:
    try:
        return _json_value(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise CallError(f"{text!r} has an argument that is not a literal") from None


def _json_value(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return [_json_value(item) for item in sorted(value, key=repr)]
    if isinstance(value, (tuple, list)):
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _json_value(item) for key, item in value.items()}
    if isinstance(value, (bytes, complex)):
        raise ValueError("no JSON form")
    return value
