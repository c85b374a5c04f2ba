"""Facts about an environment's source, read from its syntax tree (the code is never run here).

- ``state_attributes``: the public attributes ``__init__`` declares (``self.patients: ... = {}``),
  which are the keys an ``init_config`` may set;
- ``state_schemas``: a JSON schema per attribute, from its annotation, with TypedDict records
  expanded (through ``envformat.derive_tools``, so one AST type mapping serves tools and state);
- ``method_source`` and ``class_header``: pieces of source for prompts.
"""

from __future__ import annotations

import ast
from typing import Any

from envscaler.format import ToolSchemaError, derive_tools

SCHEMA_CLASS = "EnvscalerStateSchema"


def _class(module: ast.Module, class_name: str) -> ast.ClassDef | None:
    return next((node for node in module.body
                 if isinstance(node, ast.ClassDef) and node.name == class_name), None)


def _init(cls: ast.ClassDef) -> ast.FunctionDef | None:
    return next((node for node in cls.body
                 if isinstance(node, ast.FunctionDef) and node.name == "__init__"), None)


def state_attributes(source: str, class_name: str) -> dict[str, str | None]:
    """Public attributes assigned on ``self`` in ``__init__``, with their annotation's source."""
    module = ast.parse(source)
    cls = _class(module, class_name)
    init = _init(cls) if cls else None
    found: dict[str, str | None] = {}
    if init is None:
        return found
    for node in ast.walk(init):
        if isinstance(node, ast.AnnAssign):
            targets, annotation = [node.target], ast.get_source_segment(source, node.annotation)
        elif isinstance(node, ast.Assign):
            targets, annotation = list(node.targets), None
        else:
            continue
        for target in targets:
            public = isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                and target.value.id == "self" and not target.attr.startswith("_") \
                and target.attr != "init_config"
            if public and (annotation is not None or target.attr not in found):
                assert isinstance(target, ast.Attribute)
                found[target.attr] = annotation or found.get(target.attr)
    return found


def state_schemas(source: str, class_name: str) -> dict[str, dict[str, Any]]:
    """A JSON schema for each state attribute ({} when it has no annotation)."""
    attributes = state_attributes(source, class_name)
    annotated = {name: annotation for name, annotation in attributes.items() if annotation}
    schemas: dict[str, dict[str, Any]] = {name: {} for name in attributes}
    if not annotated:
        return schemas
    parameters = ", ".join(f"{name}: {annotation}" for name, annotation in annotated.items())
    probe = f"{source.rstrip()}\n\n\nclass {SCHEMA_CLASS}:\n    def state(self, *, {parameters}):\n" \
            "        return {}\n"
    try:
        tools = derive_tools(probe, SCHEMA_CLASS)
    except (ToolSchemaError, SyntaxError):
        return schemas
    properties = tools[0]["function"]["parameters"]["properties"] if tools else {}
    for name in annotated:
        schemas[name] = properties.get(name, {})
    return schemas


def method_source(source: str, class_name: str, name: str) -> str:
    module = ast.parse(source)
    cls = _class(module, class_name)
    for node in cls.body if cls else []:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment(source, node, padded=True) or ""
    return ""


def class_header(source: str, class_name: str) -> str:
    """The source from the start of the module to the end of ``__init__`` (types and state)."""
    module = ast.parse(source)
    cls = _class(module, class_name)
    init = _init(cls) if cls else None
    if init is None or init.end_lineno is None:
        return source
    return "\n".join(source.splitlines()[: init.end_lineno]) + "\n"
