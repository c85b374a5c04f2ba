"""The ``env.py`` of one tau-bench domain, as text.

The tools' modules come first, as tau-bench wrote them (their import of tau's ``Tool`` base
replaced by a stub of it, since an environment is one file and tau-bench is not installed in the
sandbox), then ``TauBench``: its state is the database, one public attribute per key of tau's
``load_data`` (set from the scenario's ``init_config``), and ``messages_to_user``, the agent's
messages to the user. Each tool of ``ALL_TOOLS`` becomes a method of the same name, typed from its
``get_info`` schema (records as TypedDicts, enums as Literals, descriptions in the docstring, so
the derived schema is tau's), that calls the tool's ``invoke`` on the database as tau's
``Env.step`` does: an exception becomes the observation ``Error: ...`` and the changes made before
it stay. ``TERMINATE_TOOLS`` names the tools at which tau ends an episode (its
``terminate_tools``), for scoring. ``respond`` is tau's action of the same name: the message is recorded for the reward's
output check (tau looks for each required output in these messages).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from envscaler.importers.funcdoc import one_line
from envscaler.importers.tau_bench.checkout import RESPOND, Domain, ToolSource

CLASS_NAME = "TauBench"
MESSAGES = "messages_to_user"
TERMINATE = "TERMINATE_TOOLS"
_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
_TAU_IMPORT = "tau_bench"
_STUB = ('class Tool:\n    """tau-bench\'s tool base (tau_bench.envs.tool.Tool): tools are '
         'static invoke and get_info."""')


class EnvCodeError(ValueError):
    """The domain's tools cannot be served (a schema this module cannot type, a clash)."""


@dataclass(frozen=True)
class EnvCode:
    source: str
    tools: list[str]
    database: tuple[str, ...]  # the state's attributes that are tau's database


def build(domain: Domain) -> EnvCode:
    names = [tool.name for tool in domain.tools]
    if len(set(names)) != len(names) or RESPOND in names:
        raise EnvCodeError(f"tool names clash: {names}")
    records: list[str] = []
    methods = [_method(tool, records) for tool in domain.tools]
    modules = [_module(tool) for tool in domain.tools]
    parts = ["from typing import Literal, TypedDict", _STUB, *modules, *records,
             _wrapper(domain, methods)]
    return EnvCode(source="\n\n\n".join(parts) + "\n", tools=[*names, RESPOND],
                   database=tuple(domain.data_files))


def _module(tool: ToolSource) -> str:
    """The tool's module, without its imports of tau-bench (the stub stands in for ``Tool``)."""
    lines = tool.module_source.splitlines()
    for node in ast.parse(tool.module_source).body:
        module = (node.module if isinstance(node, ast.ImportFrom) else
                  node.names[0].name if isinstance(node, ast.Import) else None)
        if module is not None and module.split(".")[0] == _TAU_IMPORT:
            for number in range(node.lineno - 1, node.end_lineno or node.lineno):
                lines[number] = ""
    return f"# --- tau-bench tool {tool.class_name} ---\n" + "\n".join(lines).strip()


def _method(tool: ToolSource, records: list[str]) -> str:
    function = tool.schema["function"]
    parameters = function.get("parameters") or {}
    required = set(parameters.get("required") or ())
    signature, passed, described = ["self"], [], []
    for name, spec in (parameters.get("properties") or {}).items():
        annotation = _annotation(spec, f"_{tool.class_name}_{name}", records)
        if name in required:
            signature.append(f"{name}: {annotation}")
        elif name in tool.defaults:
            signature.append(f"{name}: {annotation} = {tool.defaults[name]}")
        else:
            raise EnvCodeError(f"{tool.name}: {name} is optional but invoke has no default")
        passed.append(f"{name!r}: {name}")
        if spec.get("description"):
            described.append(f"            {name}: {one_line(spec['description'])}")
    docstring = one_line(function.get("description") or tool.name)
    if described:
        docstring += "\n\n        Args:\n" + "\n".join(described)
    required_first = sorted(signature[1:], key=lambda text: "=" in text)
    return (f"    def {tool.name}({', '.join(['self', *required_first])}):\n"
            f'        """{docstring}\n        """\n'
            f"        return self._invoke({tool.class_name}, {{{', '.join(passed)}}})")


def _annotation(spec: dict[str, Any], record: str, records: list[str]) -> str:
    kind = spec.get("type")
    if "enum" in spec:
        return f"Literal[{', '.join(repr(value) for value in spec['enum'])}]"
    if kind == "array":
        items = spec.get("items")
        return f"list[{_annotation(items, record, records)}]" if items else "list"
    if kind == "object" and spec.get("properties"):
        _record(spec, record, records)
        return record
    if kind == "object":
        return "dict"
    if kind in _TYPES:
        return _TYPES[kind]
    raise EnvCodeError(f"a parameter of type {kind!r} cannot be typed")


def _record(spec: dict[str, Any], name: str, records: list[str]) -> None:
    """A TypedDict for an object parameter (its optional fields in a total=False base)."""
    required = set(spec.get("required") or ())
    fields = {key: _annotation(value, f"{name}_{key}", records)
              for key, value in spec["properties"].items()}
    lines = [f"    {key}: {annotation}" for key, annotation in fields.items() if key in required]
    optional = [f"    {key}: {annotation}" for key, annotation in fields.items()
                if key not in required]
    base = "TypedDict"
    if optional:
        records.append(f"class {name}_optional(TypedDict, total=False):\n" + "\n".join(optional))
        base = f"{name}_optional"
    records.append(f"class {name}({base}):\n" + ("\n".join(lines) or "    pass"))


def _wrapper(domain: Domain, methods: list[str]) -> str:
    keys = tuple(domain.data_files)
    respond = (f"    def {RESPOND}(self, content: str):\n"
               '        """Send a message to the user (tau-bench\'s respond action: every output '
               "the task requires must appear in one of these messages).\n\n"
               "        Args:\n"
               "            content: The message to the user.\n"
               '        """\n'
               f"        self.{MESSAGES}.append(content)\n"
               '        return "sent"')
    invoke = ("    def _invoke(self, tool, arguments):\n"
              '        """The tool on the database, as tau\'s Env.step runs it."""\n'
              f"        data = {{key: getattr(self, key) for key in {keys!r}}}\n"
              "        try:\n"
              "            return tool.invoke(data=data, **arguments)\n"
              "        except Exception as exc:\n"
              '            return f"Error: {exc}"\n'
              "        finally:\n"
              "            for key, value in data.items():\n"
              "                setattr(self, key, value)")
    return (f"{TERMINATE}: tuple[str, ...] = {tuple(domain.terminate_tools)!r}  "
            "# tau ends an episode at these\n\n\n"
            f"class {CLASS_NAME}:\n"
            f'    """tau-bench {domain.name}: the database ({", ".join(keys)}) and the '
            f'messages to the user."""\n\n'
            "    def __init__(self, init_config):\n"
            + "".join(f"        self.{key} = init_config.get({key!r}, {{}})\n" for key in keys)
            + f"        self.{MESSAGES} = []\n\n"
            + invoke + "\n\n" + "\n\n".join(methods) + "\n\n" + respond)


__all__ = ["CLASS_NAME", "MESSAGES", "TERMINATE", "EnvCode", "EnvCodeError", "build"]
