"""Python signatures and Google-style docstrings built from a tool's JSON schema.

Trainers that take environments as Python classes (TRL's ``environment_factory``) read each
method's signature and docstring back into a tool schema with transformers' ``get_json_schema``.
So the generated method must carry annotations that map back to the session's schema: JSON types
become ``str``/``int``/``float``/``bool``/``None``, arrays ``list[...]`` (``tuple[...]`` for
``prefixItems``), objects ``dict[str, ...]``, ``enum`` a ``Literal``, type lists and ``anyOf`` a
``Union``, the empty schema ``Any``; and a docstring whose ``Args:`` describe every parameter
(``get_json_schema`` refuses a parameter without one).

What a Python annotation cannot say (an object's ``properties``, a tuple's length) is appended to
that parameter's description as its JSON schema, so the model still sees it.
"""

from __future__ import annotations

import inspect
import json
import re
import textwrap
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool,
                            "null": type(None)}
_SCALAR_VALUES = (str, int, float, bool, type(None))
_RESULT_DOC = ('The tool\'s result as JSON text, or {"error": {"type", "message"}} when the call '
               "failed.")
_SECTION = re.compile(r"(Args|Returns|Raises):")


class _Omitted:
    """The default of an optional parameter whose schema gives none: the gateway applies the
    tool's own default when the argument is left out."""

    def __repr__(self) -> str:
        return "<omitted>"


OMITTED = _Omitted()


def annotation(schema: Mapping[str, Any]) -> Any:
    """The Python type hint for a JSON schema (see the module docstring for the mapping)."""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, _SCALAR_VALUES) for v in enum):
        return Literal[tuple(enum)]
    if isinstance(schema.get("anyOf"), list):
        return _union([annotation(member) for member in schema["anyOf"]])
    json_type = schema.get("type")
    if isinstance(json_type, list):
        return _union([_typed(name, schema) for name in json_type])
    if isinstance(json_type, str):
        return _typed(json_type, schema)
    return Any


def _union(members: list[Any]) -> Any:
    return members[0] if len(members) == 1 else Union[tuple(members)]  # noqa: UP007 (runtime form)


def _typed(json_type: str, schema: Mapping[str, Any]) -> Any:
    if json_type == "array":
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list) and len(prefix) > 1:
            return tuple[tuple(annotation(item) for item in prefix)]
        items = schema.get("items")
        return list[annotation(items)] if isinstance(items, Mapping) and items else list
    if json_type == "object":
        values = schema.get("additionalProperties")
        return dict[str, annotation(values)] if isinstance(values, Mapping) and values else dict
    return _SCALARS.get(json_type, Any)


def _unsaid(schema: Any) -> bool:
    """Whether the schema holds structure a type hint drops: object properties, tuple bounds."""
    if isinstance(schema, Mapping):
        if "properties" in schema or "minItems" in schema or "maxItems" in schema:
            return True
        return any(_unsaid(value) for value in schema.values())
    if isinstance(schema, list):
        return any(_unsaid(value) for value in schema)
    return False


def parameter_description(name: str, schema: Mapping[str, Any]) -> str:
    """The ``Args:`` text of a parameter: its description on one line (``get_json_schema`` joins
    lines anyway), a stand-in when it has none, and its JSON schema when a hint cannot say it."""
    text = " ".join(str(schema.get("description") or "").split()) or f"The {name}."
    if _unsaid(schema):
        text += " JSON schema: " + json.dumps({k: v for k, v in schema.items()
                                                if k not in ("description", "default")})
    return text


def split_description(description: str) -> tuple[str, str | None]:
    """The tool's description cut where ``get_json_schema`` cuts it, and the rest as the text of
    a ``Returns:`` section (None when there is no rest).

    ``get_json_schema`` ends the description at the first ``Args:``, ``Returns:`` or ``Raises:``
    anywhere in it and keeps only a ``Returns:`` block, as the return value's description. The
    catalogue's descriptions end with their tool's ``Returns:`` block: that block becomes the
    method's, and any later section marker loses its colon so that nothing is dropped.
    """
    text = description.strip()
    marker = _SECTION.search(text)
    if marker is None:
        return text, None
    rest = text[marker.end():] if marker.group(1) == "Returns" else text[marker.start():]
    rest = _SECTION.sub(lambda match: match.group(1), rest)
    return text[:marker.start()].strip(), textwrap.dedent(rest.strip("\n")).strip() or None


def docstring(function: Mapping[str, Any]) -> str:
    """A Google-style docstring: the tool's description, ``Args:`` and ``Returns:``."""
    properties: Mapping[str, Any] = function.get("parameters", {}).get("properties", {})
    description, returns = split_description(str(function.get("description") or ""))
    lines = [description or function["name"]]
    if properties:
        lines += ["", "Args:"]
        lines += [f"    {name}: {parameter_description(name, schema)}"
                  for name, schema in properties.items()]
    lines += ["", "Returns:", textwrap.indent(returns or _RESULT_DOC, "    ")]
    return "\n".join(lines)


def signature(function: Mapping[str, Any]) -> inspect.Signature:
    """``(self, *, <parameter>: <hint> [= default], ...) -> str`` in the schema's order: required
    parameters have no default, optional ones the schema's default (or `OMITTED`)."""
    parameters_schema = function.get("parameters", {})
    required = set(parameters_schema.get("required", []))
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for name, schema in parameters_schema.get("properties", {}).items():
        default = (inspect.Parameter.empty if name in required
                   else schema.get("default", OMITTED))
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                            default=default, annotation=annotation(schema)))
    return inspect.Signature(parameters, return_annotation=str)


def tool_method(tool: Mapping[str, Any],
                run: Callable[[Any, str, dict[str, Any]], str]) -> Callable[..., str]:
    """A function to set on a class as the method of one tool (OpenAI function format).

    It passes on only the arguments the caller gave (``run(self, name, arguments)``): defaults
    are the gateway's to apply, and the gateway checks the arguments against the schema.
    """
    function = tool["function"]
    name = function["name"]

    def method(self: Any, **arguments: Any) -> str:
        return run(self, name, arguments)

    method_signature = signature(function)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = docstring(function)
    method.__signature__ = method_signature  # type: ignore[attr-defined]
    method.__annotations__ = {
        **{param.name: param.annotation for param in method_signature.parameters.values()
           if param.name != "self"}, "return": str}
    return method
