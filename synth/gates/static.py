"""The static gate: rules checked on the syntax tree of generated code, which is never run here.

For an environment module (``static_gate``):

- ``syntax``: the module parses; the class exists, with an ``__init__`` taking ``init_config``;
- ``import``: imports (anywhere) only of allowlisted standard modules; no relative imports;
- ``forbidden-name``: no ``exec``, ``eval``, ``compile``, ``open``, ``__import__``, ``globals``,
  ``locals``, ``vars``, ``breakpoint``, ``input``, ``exit``, ``quit``, ``help``, ``memoryview``;
- ``dunder``: no dunder attribute (``x.__class__``, ``__dict__``, ``__globals__``...; only
  ``__init__`` and ``__name__`` are allowed) and no dunder name (``__builtins__``, ``__file__``...);
- ``dynamic-attribute``: ``getattr``/``setattr``/``delattr`` only with a literal name that does not
  start with ``_`` (``hasattr`` may take any non-private name);
- ``top-level``: at module level only imports, classes, functions, docstrings and constant
  assignments (literals, type expressions, ``TypedDict(...)``/``NewType``/``TypeVar`` calls); class
  bodies likewise; decorators only ``staticmethod``/``classmethod``/``property`` (and its
  accessors)/``dataclass``; default values constant; no metaclass;
- ``shared-state``: no ``global`` statement, no write to class-level state (``ClassName.x = ...``,
  ``type(self).x``, ``cls.x``, or mutating a class-level list/dict/set through ``self``) and no
  mutation of a module-level container: such state would survive a reset and leak from one
  episode into the next;
- ``return``: every tool (public method) returns a dict literal with a ``"success"`` key on every
  ``return``, cannot end without returning, and is not a generator or ``async``. (The original's
  check of this was a no-op; this one is not.)

For check functions (``check_function_problems``): the same import, name, dunder and top-level
rules, plus a ``check_func`` with exactly one positional parameter.
"""

from __future__ import annotations

import ast

from synth.gates.report import GateResult, Problem

ALLOWED_MODULES = frozenset({
    "__future__", "abc", "bisect", "calendar", "collections", "copy", "dataclasses", "datetime",
    "decimal", "enum", "fractions", "functools", "hashlib", "heapq", "itertools", "json", "math",
    "numbers", "operator", "random", "re", "statistics", "string", "textwrap", "time", "typing",
    "uuid",
})
FORBIDDEN_NAMES = frozenset({
    "exec", "eval", "compile", "open", "__import__", "globals", "locals", "vars", "breakpoint",
    "input", "exit", "quit", "help", "memoryview",
})
ALLOWED_DUNDER_ATTRIBUTES = frozenset({"__init__", "__name__"})
ATTRIBUTE_FUNCTIONS = frozenset({"getattr", "setattr", "delattr"})
CONSTANT_CALLS = frozenset({
    "TypedDict", "NewType", "TypeVar", "NamedTuple", "namedtuple", "frozenset", "set", "tuple",
    "dict", "list", "Decimal", "timedelta", "date", "datetime", "time", "field", "range",
    "enumerate", "zip", "sorted", "reversed", "len", "min", "max", "sum", "abs", "round", "str",
    "int", "float", "bool",
})
ALLOWED_DECORATORS = frozenset({"staticmethod", "classmethod", "property", "cached_property",
                                "dataclass", "abstractmethod"})
PROPERTY_ACCESSORS = frozenset({"setter", "getter", "deleter"})
MUTATING_METHODS = frozenset({"append", "extend", "insert", "pop", "popitem", "remove", "clear",
                              "update", "setdefault", "add", "discard", "sort", "reverse"})
CHECK_FUNC = "check_func"
_MUTABLE_VALUES = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.Call)
_CONSTANT_NODES = (ast.Constant, ast.Name, ast.Attribute, ast.Subscript, ast.Tuple, ast.List,
                   ast.Set, ast.Dict, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Slice,
                   ast.Starred, ast.keyword, ast.IfExp, ast.JoinedStr, ast.FormattedValue,
                   ast.comprehension, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
                   ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)


def static_gate(source: str, class_name: str) -> GateResult:
    """Every rule of the module docstring, on an environment's source."""
    result = GateResult(gate="static")
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        result.problems.append(Problem("syntax", f"does not parse: {exc.msg}", exc.lineno))
        return result
    problems = result.problems
    problems += _safety_problems(module)
    problems += _top_level_problems(module)
    cls = next((node for node in module.body
                if isinstance(node, ast.ClassDef) and node.name == class_name), None)
    if cls is None:
        problems.append(Problem("syntax", f"class {class_name} is not defined at module level"))
    else:
        problems += _class_problems(cls)
        problems += _shared_state_problems(module, cls)
        problems += _return_problems(cls)
    result.details = {"tools": [node.name for node in _tools(cls)] if cls else []}
    problems.sort(key=lambda problem: (problem.line or 0, problem.rule, problem.message))
    return result


def check_function_problems(source: str) -> list[Problem]:
    """Why a ``check_func(final_state)`` source is unusable; empty when it is fine."""
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        return [Problem("syntax", f"does not parse: {exc.msg}", exc.lineno)]
    problems = _safety_problems(module) + _top_level_problems(module)
    func = next((node for node in module.body
                 if isinstance(node, ast.FunctionDef) and node.name == CHECK_FUNC), None)
    if func is None:
        problems.append(Problem("syntax", f"does not define {CHECK_FUNC}(final_state)"))
    else:
        args = func.args
        positional = len(args.posonlyargs) + len(args.args)
        required_keywords = sum(default is None for default in args.kw_defaults)
        if positional != 1 or args.vararg is not None or required_keywords:
            problems.append(Problem("syntax", f"{CHECK_FUNC} must take exactly one parameter "
                                    "(final_state)", func.lineno))
    return problems


# --- imports, names, dunders ---------------------------------------------------------------------

def _safety_problems(module: ast.Module) -> list[Problem]:
    problems: list[Problem] = []
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            for alias in node.names:
                problems += _import_problem(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                problems.append(Problem("import", "relative imports are not allowed", node.lineno))
            else:
                problems += _import_problem(node.module or "", node.lineno)
        elif isinstance(node, ast.Name):
            if node.id in FORBIDDEN_NAMES:
                problems.append(Problem("forbidden-name", f"uses {node.id}", node.lineno))
            elif _is_dunder(node.id):
                problems.append(Problem("dunder", f"uses the name {node.id}", node.lineno))
        elif isinstance(node, ast.Attribute):
            if _is_dunder(node.attr) and node.attr not in ALLOWED_DUNDER_ATTRIBUTES:
                problems.append(Problem("dunder", f"accesses the attribute {node.attr}",
                                        node.lineno))
        elif isinstance(node, ast.Call):
            problems += _attribute_call_problem(node)
        elif isinstance(node, ast.Global):
            problems.append(Problem("shared-state", "global statement: module state survives "
                                    "a reset", node.lineno))
    return problems


def _import_problem(name: str, line: int) -> list[Problem]:
    top = name.split(".")[0]
    if top in ALLOWED_MODULES:
        return []
    return [Problem("import", f"imports {name}, which is not an allowed module", line)]


def _attribute_call_problem(node: ast.Call) -> list[Problem]:
    if not isinstance(node.func, ast.Name) or len(node.args) < 2:
        return []
    name, target = node.func.id, node.args[1]
    literal = target.value if isinstance(target, ast.Constant) else None
    if name in ATTRIBUTE_FUNCTIONS or name == "hasattr":
        if isinstance(literal, str) and literal.startswith("_"):
            return [Problem("dunder" if _is_dunder(literal) else "dynamic-attribute",
                            f"{name}(..., {literal!r}) reaches a private attribute", node.lineno)]
        if name in ATTRIBUTE_FUNCTIONS and not isinstance(literal, str):
            return [Problem("dynamic-attribute", f"{name} with a computed attribute name",
                            node.lineno)]
    return []


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


# --- what runs at import time --------------------------------------------------------------------

def _top_level_problems(module: ast.Module) -> list[Problem]:
    problems: list[Problem] = []
    for index, stmt in enumerate(module.body):
        problems += _definition_problems(stmt, "module", docstring=index == 0)
    return problems


def _definition_problems(stmt: ast.stmt, where: str, docstring: bool) -> list[Problem]:
    """Problems of one statement of a module or class body (code that runs at import)."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass)):
        return []
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and \
            isinstance(stmt.value.value, str):
        return []  # a docstring or a bare string
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _decorator_problems(stmt) + _default_problems(stmt)
    if isinstance(stmt, ast.ClassDef):
        problems = _decorator_problems(stmt)
        if any(keyword.arg == "metaclass" for keyword in stmt.keywords):
            problems.append(Problem("top-level", f"class {stmt.name} sets a metaclass",
                                    stmt.lineno))
        for index, inner in enumerate(stmt.body):
            problems += _definition_problems(inner, f"class {stmt.name}", docstring=index == 0)
        return problems
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        value = stmt.value
        if value is None or _is_constant_expr(value):
            return []
        return [Problem("top-level", f"{where}-level assignment runs code at import",
                        stmt.lineno)]
    kind = type(stmt).__name__
    return [Problem("top-level", f"{where}-level {kind} statement runs at import", stmt.lineno)]


def _is_constant_expr(node: ast.AST) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call):
            if _call_name(inner.func) not in CONSTANT_CALLS:
                return False
        elif isinstance(inner, ast.Lambda):
            continue
        elif not isinstance(inner, _CONSTANT_NODES):
            return False
    return True


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _decorator_problems(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[Problem]:
    problems = []
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = _call_name(target)
        accessor = isinstance(target, ast.Attribute) and target.attr in PROPERTY_ACCESSORS
        if name not in ALLOWED_DECORATORS and not accessor:
            problems.append(Problem("top-level", f"decorator {name or '?'} on {node.name} runs "
                                    "code at import", decorator.lineno))
    return problems


def _default_problems(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[Problem]:
    defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
    return [Problem("top-level", f"a default value of {node.name} runs code at import",
                    default.lineno)
            for default in defaults if not _is_constant_expr(default)]


# --- the environment class -----------------------------------------------------------------------

def _methods(cls: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in cls.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _is_property(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in node.decorator_list:
        name = _call_name(decorator.func if isinstance(decorator, ast.Call) else decorator)
        if name in ("property", "cached_property") or name in PROPERTY_ACCESSORS:
            return True
    return False


def _tools(cls: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in _methods(cls) if not node.name.startswith("_") and not _is_property(node)]


def _class_problems(cls: ast.ClassDef) -> list[Problem]:
    problems: list[Problem] = []
    init = next((node for node in _methods(cls) if node.name == "__init__"), None)
    if init is None:
        problems.append(Problem("syntax", f"class {cls.name} has no __init__", cls.lineno))
    else:
        positional = len(init.args.posonlyargs) + len(init.args.args) - 1
        required = positional - len(init.args.defaults)
        if positional > 1 or required > 1 or init.args.vararg or \
                any(default is None for default in init.args.kw_defaults):
            problems.append(Problem("syntax", "__init__ must take at most one argument "
                                    "(init_config)", init.lineno))
    if not _tools(cls):
        problems.append(Problem("syntax", f"class {cls.name} has no tools (public methods)",
                                cls.lineno))
    return problems


def _shared_state_problems(module: ast.Module, cls: ast.ClassDef) -> list[Problem]:
    """Writes to class-level state, which survives resets (the instance is rebuilt, not the class)."""
    problems: list[Problem] = []
    instance_attributes = _instance_attributes(cls)
    mutable_class_attributes = {
        target.id for stmt in cls.body if isinstance(stmt, (ast.Assign, ast.AnnAssign))
        for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
        if isinstance(target, ast.Name) and isinstance(stmt.value, _MUTABLE_VALUES)
    } - instance_attributes
    class_names = {node.name for node in module.body if isinstance(node, ast.ClassDef)}
    module_mutable = {
        target.id for stmt in module.body if isinstance(stmt, (ast.Assign, ast.AnnAssign))
        for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
        if isinstance(target, ast.Name) and isinstance(stmt.value, _MUTABLE_VALUES)}
    for method in _methods(cls):
        for node in ast.walk(method):
            targets: list[ast.expr] = []
            receiver = False
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = list(node.targets)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in MUTATING_METHODS:
                targets, receiver = [node.func.value], True
            for target in targets:
                reason = _class_state_write(target, class_names, mutable_class_attributes) or \
                    _module_state_write(target, module_mutable, receiver)
                if reason:
                    problems.append(Problem("shared-state", f"{method.name} {reason}, which "
                                            "survives a reset", node.lineno))
    return problems


def _module_state_write(target: ast.expr, module_mutable: set[str], receiver: bool) -> str | None:
    """Why writing ``target`` (or calling a mutating method on it) changes a module-level
    container; rebinding a plain name is local and fine."""
    chain = target
    while isinstance(chain, (ast.Attribute, ast.Subscript)):
        chain = chain.value
    if isinstance(chain, ast.Name) and chain.id in module_mutable and \
            (receiver or chain is not target):
        return f"mutates the module-level container {chain.id}"
    return None


def _instance_attributes(cls: ast.ClassDef) -> set[str]:
    names = set()
    for node in ast.walk(cls):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and \
                    target.value.id == "self":
                names.add(target.attr)
    return names


def _class_state_write(target: ast.expr, class_names: set[str], mutable: set[str]) -> str | None:
    """Why writing ``target`` changes class-level state, or None."""
    chain = target
    while isinstance(chain, (ast.Attribute, ast.Subscript)):
        inner = chain.value
        if isinstance(chain, ast.Attribute):
            if isinstance(inner, ast.Name) and inner.id in class_names | {"cls"}:
                return f"writes the class attribute {inner.id}.{chain.attr}"
            if isinstance(inner, ast.Call) and _call_name(inner.func) == "type":
                return f"writes the class attribute type(...).{chain.attr}"
            if isinstance(inner, ast.Name) and inner.id == "self" and chain.attr in mutable:
                return f"mutates the class-level container {chain.attr} (shared by all instances)"
        chain = inner
    return None


# --- tools return {"success": ...} on every path -----------------------------------------------

def _return_problems(cls: ast.ClassDef) -> list[Problem]:
    problems: list[Problem] = []
    for tool in _tools(cls):
        if isinstance(tool, ast.AsyncFunctionDef):
            problems.append(Problem("return", f"tool {tool.name} is async; tools are called "
                                    "synchronously", tool.lineno, tool.name))
            continue
        for node in _own_nodes(tool):
            if isinstance(node, (ast.Yield, ast.YieldFrom)):
                problems.append(Problem("return", f"tool {tool.name} is a generator",
                                        node.lineno, tool.name))
            elif isinstance(node, ast.Return):
                what = _returned_kind(node.value)
                if what is not None:
                    problems.append(Problem("return", f"tool {tool.name} returns {what}, not a "
                                            "dict literal with a 'success' key", node.lineno,
                                            tool.name))
        if not _always_exits(tool.body):
            problems.append(Problem("return", f"tool {tool.name} can end without a return "
                                    "(it would return None)", tool.lineno, tool.name))
    return problems


def _own_nodes(func: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of ``func``'s body, without those of nested functions, lambdas and classes."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(func.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _returned_kind(value: ast.expr | None) -> str | None:
    """None when ``value`` is a dict literal with a "success" key; otherwise what it is."""
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return "None (a bare return)" if value is None else "None"
    if isinstance(value, ast.Dict):
        keys = [key.value for key in value.keys if isinstance(key, ast.Constant)]
        return None if "success" in keys else "a dict without a 'success' key"
    if isinstance(value, ast.Call) and _call_name(value.func) == "dict":
        names = [keyword.arg for keyword in value.keywords]
        return None if "success" in names else "a dict without a 'success' key"
    if isinstance(value, ast.Constant):
        return f"the constant {value.value!r}"
    if isinstance(value, ast.Name):
        return f"the variable {value.id}"
    return f"an expression ({type(value).__name__})"


def _always_exits(body: list[ast.stmt]) -> bool:
    """Whether running ``body`` always ends in a return or a raise (or never ends)."""
    return any(_stmt_exits(stmt) for stmt in body)


def _stmt_exits(stmt: ast.stmt) -> bool:
    if isinstance(stmt, (ast.Return, ast.Raise)):
        return True
    if isinstance(stmt, ast.If):
        return _always_exits(stmt.body) and _always_exits(stmt.orelse)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return _always_exits(stmt.body)
    if isinstance(stmt, (ast.Try, ast.TryStar)):
        if _always_exits(stmt.finalbody):
            return True
        main = _always_exits(stmt.body) or _always_exits(stmt.orelse)
        return main and all(_always_exits(handler.body) for handler in stmt.handlers)
    if isinstance(stmt, ast.Match):
        irrefutable = any(isinstance(case.pattern, ast.MatchAs) and case.pattern.pattern is None
                          and case.guard is None for case in stmt.cases)
        return irrefutable and all(_always_exits(case.body) for case in stmt.cases)
    if isinstance(stmt, ast.While):
        endless = isinstance(stmt.test, ast.Constant) and bool(stmt.test.value)
        return endless and not _breaks(stmt.body)
    return False


def _breaks(body: list[ast.stmt]) -> bool:
    """Whether a ``break`` in ``body`` leaves this loop (not a nested one)."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Break):
            return True
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef,
                             ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False
