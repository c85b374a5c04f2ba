"""What the importer reads from a tau-bench checkout the user provides, parsed without running
any of it (``ast`` only): per domain (``tau_bench/envs/<domain>/``) the tools' modules in
``ALL_TOOLS`` order with the schema each ``get_info`` returns, the policy (``wiki.md``), the
``RULES``, the database files ``load_data`` reads and the key each becomes, the terminating tools,
and the test split's tasks."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DOMAINS = ("retail", "airline")
PACKAGE_DIR = Path("tau_bench") / "envs"
TEST_TASKS = "tasks_test.py"
RESPOND = "respond"  # tau's action for a message to the user; its text is kwargs["content"]


class CheckoutError(Exception):
    """The checkout lacks a file the import needs, or a file cannot be read."""


@dataclass(frozen=True)
class ToolSource:
    """One tool: its class (``class_name``) in ``module_source``, its OpenAI schema and the
    defaults of its ``invoke`` (as source text)."""

    class_name: str
    module_source: str
    schema: dict[str, Any]
    defaults: dict[str, str]

    @property
    def name(self) -> str:
        return str(self.schema["function"]["name"])


@dataclass(frozen=True)
class Action:
    name: str
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class Task:
    index: int
    user_id: str
    instruction: str
    actions: tuple[Action, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class Domain:
    name: str
    folder: Path
    tools: tuple[ToolSource, ...]
    wiki: str
    rules: tuple[str, ...]
    data_files: dict[str, Path]  # database key -> its JSON file, in load_data's order
    terminate_tools: tuple[str, ...]
    tasks: tuple[Task, ...]

    def database_text(self) -> str:
        """The whole database as one JSON object (each file's text under its key, unparsed)."""
        parts = []
        for key, path in self.data_files.items():
            parts.append(f"{json.dumps(key)}: {_read(path).strip()}")
        return "{" + ", ".join(parts) + "}"


def locate(root: Path) -> Path:
    """The folder holding ``tau_bench/envs`` (the checkout, or its parent)."""
    for candidate in (root, root / "tau-bench"):
        if (candidate / PACKAGE_DIR).is_dir():
            return candidate
    raise CheckoutError(f"{root} is not a tau-bench checkout: no {PACKAGE_DIR} in it")


def read_domain(root: Path, name: str) -> Domain:
    folder = locate(root) / PACKAGE_DIR / name
    if not folder.is_dir():
        raise CheckoutError(f"no domain {name!r} in {folder.parent}")
    return Domain(name=name, folder=folder, tools=_tools(folder / "tools"),
                  wiki=_read(folder / "wiki.md"), rules=tuple(_literal(folder / "rules.py",
                                                                       "RULES")),
                  data_files=_data_files(folder / "data"),
                  terminate_tools=_terminate_tools(folder / "env.py"),
                  tasks=_tasks(folder / TEST_TASKS))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckoutError(f"cannot read {path}: {exc}") from None


def _parse(path: Path) -> ast.Module:
    try:
        return ast.parse(_read(path))
    except SyntaxError as exc:
        raise CheckoutError(f"{path}:{exc.lineno}: does not parse: {exc.msg}") from None


def _assigned(path: Path, name: str) -> ast.expr:
    for node in _parse(path).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == name for target in node.targets):
            return node.value
    raise CheckoutError(f"{path} does not assign {name}")


def _literal(path: Path, name: str) -> Any:
    try:
        return ast.literal_eval(_assigned(path, name))
    except ValueError as exc:
        raise CheckoutError(f"{path}: {name} is not a literal: {exc}") from None


def _tools(folder: Path) -> tuple[ToolSource, ...]:
    """The tools ``ALL_TOOLS`` lists, each from the module its ``from .module import Class``
    names."""
    init = folder / "__init__.py"
    modules = {alias.asname or alias.name: node.module for node in _parse(init).body
               if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
               for alias in node.names}
    listed = _assigned(init, "ALL_TOOLS")
    if not isinstance(listed, ast.List) or not all(isinstance(e, ast.Name) for e in listed.elts):
        raise CheckoutError(f"{init}: ALL_TOOLS is not a list of class names")
    tools = []
    for element in listed.elts:
        name = element.id  # type: ignore[attr-defined]
        if name not in modules:
            raise CheckoutError(f"{init}: {name} is not imported from a module of the folder")
        tools.append(_tool(folder / f"{modules[name]}.py", name))
    return tuple(tools)


def _tool(path: Path, class_name: str) -> ToolSource:
    source = _read(path)
    cls = next((node for node in ast.parse(source).body
                if isinstance(node, ast.ClassDef) and node.name == class_name), None)
    if cls is None:
        raise CheckoutError(f"{path} does not define {class_name}")
    methods = {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}
    if "invoke" not in methods or "get_info" not in methods:
        raise CheckoutError(f"{path}: {class_name} lacks invoke or get_info")
    returned = [node.value for node in ast.walk(methods["get_info"])
                if isinstance(node, ast.Return) and node.value is not None]
    try:
        schema = ast.literal_eval(returned[0]) if len(returned) == 1 else None
    except ValueError:
        schema = None
    if not isinstance(schema, dict) or not isinstance(schema.get("function"), dict):
        raise CheckoutError(f"{path}: {class_name}.get_info does not return one literal schema")
    invoke = methods["invoke"].args
    positional = [*invoke.posonlyargs, *invoke.args]
    defaults = {arg.arg: ast.unparse(value) for arg, value in
                zip(positional[len(positional) - len(invoke.defaults):], invoke.defaults,
                    strict=True)}
    defaults |= {arg.arg: ast.unparse(value) for arg, value in
                 zip(invoke.kwonlyargs, invoke.kw_defaults, strict=True) if value is not None}
    return ToolSource(class_name, source, schema, defaults)


def _data_files(folder: Path) -> dict[str, Path]:
    """``load_data``'s keys and the files they hold: each key's value is a name bound by
    ``json.load`` inside ``with open(os.path.join(FOLDER_PATH, "<file>.json"))``."""
    module = _parse(folder / "__init__.py")
    loader = next((node for node in module.body
                   if isinstance(node, ast.FunctionDef) and node.name == "load_data"), None)
    if loader is None:
        raise CheckoutError(f"{folder / '__init__.py'} does not define load_data")
    files: dict[str, str] = {}
    for node in ast.walk(loader):
        if isinstance(node, ast.With):
            names = [c.value for c in ast.walk(node.items[0].context_expr)
                     if isinstance(c, ast.Constant) and str(c.value).endswith(".json")]
            bound = [t.id for stmt in node.body if isinstance(stmt, ast.Assign)
                     for t in stmt.targets if isinstance(t, ast.Name)]
            if len(names) == 1 and len(bound) == 1:
                files[bound[0]] = names[0]
    returned = next((node.value for node in ast.walk(loader) if isinstance(node, ast.Return)),
                    None)
    if not isinstance(returned, ast.Dict):
        raise CheckoutError(f"{folder}: load_data does not return a dict literal")
    keys: dict[str, Path] = {}
    for key, value in zip(returned.keys, returned.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(value, ast.Name)
                and value.id in files):
            raise CheckoutError(f"{folder}: load_data returns a value not read from a file")
        keys[str(key.value)] = folder / files[value.id]
    return keys


def _terminate_tools(path: Path) -> tuple[str, ...]:
    for node in ast.walk(_parse(path)):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Attribute)
                and node.targets[0].attr == "terminate_tools"):
            return tuple(ast.literal_eval(node.value))
    return ()


def _tasks(path: Path) -> tuple[Task, ...]:
    """The tasks of the list the module assigns (``TASKS_TEST`` or ``TASKS``): ``Task(...)``
    and ``Action(...)`` calls of literals."""
    module = _parse(path)
    lists = [node.value for node in module.body if isinstance(node, ast.Assign)
             and isinstance(node.value, ast.List)]
    if len(lists) != 1:
        raise CheckoutError(f"{path}: expected one list of tasks")
    try:
        return tuple(_task(index, _record(element, "Task"))
                     for index, element in enumerate(lists[0].elts))
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckoutError(f"{path}: a task is not a Task(...) of literals: {exc}") from None


def _record(node: ast.expr, kind: str) -> dict[str, Any]:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == kind and not node.args):
        raise ValueError(f"expected {kind}(...) with keyword arguments at line {node.lineno}")
    return {keyword.arg: keyword.value for keyword in node.keywords if keyword.arg}


def _task(index: int, fields: dict[str, Any]) -> Task:
    actions = fields["actions"]
    if not isinstance(actions, ast.List):
        raise ValueError(f"actions of task {index} are not a list")
    parsed = []
    for element in actions.elts:
        action = _record(element, "Action")
        kwargs = ast.literal_eval(action["kwargs"])
        parsed.append(Action(str(ast.literal_eval(action["name"])), dict(kwargs)))
    outputs = ast.literal_eval(fields["outputs"]) if "outputs" in fields else []
    return Task(index=index, user_id=str(ast.literal_eval(fields["user_id"])),
                instruction=str(ast.literal_eval(fields["instruction"])),
                actions=tuple(parsed), outputs=tuple(str(o) for o in outputs))


__all__ = ["DOMAINS", "RESPOND", "Action", "CheckoutError", "Domain", "Task", "ToolSource",
           "locate", "read_domain"]
