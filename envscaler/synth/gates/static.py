"""The static gate: rules checked on the syntax tree of generated code, which is never run here.

It flags only what the source proves wrong, or what breaks the sandbox's policy; what tools return
in general is the executable gate's to judge, on the values they actually return. For an
environment module (``static_gate``):

- ``syntax``: the module parses; the class exists; an ``__init__`` of its own, when it has one,
  can be called with ``init_config`` alone; it has tools (public methods), or a base to inherit
  them from;
- ``undefined-name``: no name used in code that nothing could define (a ``NameError`` whenever the
  line runs; annotations are not looked at);
- ``import`` (policy): imports (anywhere) only of allowlisted standard modules and, when env.json
  pins ``requirements``, of modules outside the standard library (a distribution's module may be
  named otherwise than the distribution, PyYAML's ``yaml``: whether it is there, the load shows,
  with its ``ModuleNotFoundError``); no relative imports;
- ``forbidden-name`` (policy): no ``exec``, ``eval``, ``compile``, ``open``, ``__import__``,
  ``globals``, ``locals``, ``vars``, ``breakpoint``, ``input``, ``exit``, ``quit``, ``help``,
  ``memoryview``;
- ``dunder`` (policy): no dunder attribute (``x.__class__``, ``__dict__``, ``__globals__``...; only
  ``__init__`` and ``__name__`` are allowed) and no dunder name (``__builtins__``, ``__file__``...);
- ``dynamic-attribute`` (policy): ``getattr``/``setattr``/``delattr`` only with a literal name
  that does not start with ``_`` (``hasattr`` may take any non-private name);
- ``top-level`` (policy): at module level only imports, classes, functions, docstrings and constant
  assignments (literals, type expressions, ``TypedDict(...)``/``NewType``/``TypeVar`` calls); class
  bodies likewise; decorators only ``staticmethod``/``classmethod``/``property`` (and its
  accessors)/``dataclass``; default values constant; no metaclass;
- ``shared-state``: no ``global`` statement, no write to class-level state (``ClassName.x = ...``,
  ``type(self).x``, ``cls.x``, or mutating a class-level list/dict/set through ``self``; a
  dataclass's fields are per instance) and no mutation of a module-level container (a local of
  the same name is not one): such state lives outside the instance's attributes, so the served
  state and the check functions never see it (a reset runs the module anew, so it does not leak
  between episodes);
- ``return``: no tool returns a literal that cannot be its result (``None``, a bare ``return``,
  a constant, a list, tuple, set, string or generator expression, a dict literal without a
  ``"success"`` key and without ``**``; either branch of a conditional expression), no tool
  never returns a value (every path falls off the end, returns None or raises), and no tool is
  a generator or ``async``. A returned variable, call or other expression is not judged here.

For check functions (``check_function_problems``): the same import, name, dunder and top-level
rules, plus a ``check_func`` with exactly one positional parameter.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Sequence

from envscaler.synth.gates.names import bound_names, parameter_names, undefined_names
from envscaler.synth.gates.report import GateResult, Problem

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


def static_gate(source: str, class_name: str, requirements: Sequence[str] = ()) -> GateResult:
    """Every rule of the module docstring, on an environment's source; ``requirements``: the
    pins of its env.json, whose modules it may import."""
    result = GateResult(gate="static")
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        result.problems.append(Problem("syntax", f"does not parse: {exc.msg}", exc.lineno))
        return result
    problems = result.problems
    problems += _safety_problems(module, third_party=bool(requirements))
    problems += _top_level_problems(module)
    problems += [Problem("undefined-name", f"uses the name {name}, which nothing defines", line)
                 for name, line in undefined_names(module)]
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
    problems = _safety_problems(module, third_party=False) + _top_level_problems(module)
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

def _safety_problems(module: ast.Module, third_party: bool) -> list[Problem]:
    problems: list[Problem] = []
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            for alias in node.names:
                problems += _import_problem(alias.name, node.lineno, third_party)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                problems.append(Problem("import", "relative imports are not allowed", node.lineno))
            else:
                problems += _import_problem(node.module or "", node.lineno, third_party)
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
            problems.append(Problem("shared-state", "global statement: module state, which "
                                    "the served state does not show", node.lineno))
    return problems


def _import_problem(name: str, line: int, third_party: bool) -> list[Problem]:
    top = name.split(".")[0]
    if top in ALLOWED_MODULES or (third_party and top not in sys.stdlib_module_names):
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


def _decorator_problems(
        node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[Problem]:
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
    return [node for node in _methods(cls)
            if not node.name.startswith("_") and not _is_property(node)]


def _class_problems(cls: ast.ClassDef) -> list[Problem]:
    """A constructor the runtime cannot call, or no tools at all (none inherited either)."""
    problems: list[Problem] = []
    init = next((node for node in _methods(cls) if node.name == "__init__"), None)
    if init is not None:
        positional = len(init.args.posonlyargs) + len(init.args.args) - 1
        required = positional - len(init.args.defaults)
        if required > 1 or any(default is None for default in init.args.kw_defaults):
            problems.append(Problem("syntax", "__init__ must take at most one argument "
                                    "(init_config)", init.lineno))
    if not _tools(cls) and not cls.bases:
        problems.append(Problem("syntax", f"class {cls.name} has no tools (public methods)",
                                cls.lineno))
    return problems


def _shared_state_problems(module: ast.Module, cls: ast.ClassDef) -> list[Problem]:
    """Writes to class- or module-level state: state outside the instance's attributes, which
    the served state (and so every check function) never shows."""
    problems: list[Problem] = []
    fields = _dataclass_fields(cls)
    mutable_class_attributes = {
        target.id for stmt in cls.body if isinstance(stmt, (ast.Assign, ast.AnnAssign))
        for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
        if isinstance(target, ast.Name) and isinstance(stmt.value, _MUTABLE_VALUES)
    } - _instance_attributes(cls) - fields
    class_names = {node.name for node in module.body if isinstance(node, ast.ClassDef)}
    module_mutable = {
        target.id for stmt in module.body if isinstance(stmt, (ast.Assign, ast.AnnAssign))
        for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
        if isinstance(target, ast.Name) and isinstance(stmt.value, _MUTABLE_VALUES)}
    for method in _methods(cls):
        local = parameter_names(method.args) | bound_names(method.body)  # they shadow the module's
        for node in ast.walk(method):
            targets, receiver = _written(node)
            for target in targets:
                reason = _class_state_write(target, class_names, mutable_class_attributes) or \
                    _module_state_write(target, module_mutable - local, receiver)
                if reason:
                    problems.append(Problem("shared-state", f"{method.name} {reason}, state "
                                            f"that the served state does not show", node.lineno))
    return problems


def _written(node: ast.AST) -> tuple[list[ast.expr], bool]:
    """The targets ``node`` writes, and whether it is a mutating method call on its target."""
    if isinstance(node, (ast.Assign, ast.Delete)):
        return list(node.targets), False
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target], False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in MUTATING_METHODS:
        return [node.func.value], True
    return [], False


def _dataclass_fields(cls: ast.ClassDef) -> set[str]:
    """The annotated class attributes of a ``@dataclass``: each instance gets its own."""
    decorated = any(_call_name(decorator.func if isinstance(decorator, ast.Call) else decorator)
                    == "dataclass" for decorator in cls.decorator_list)
    return {stmt.target.id for stmt in cls.body if decorated and isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)}


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


# --- what tools return, where the source alone proves it wrong ---------------------------------

def _return_problems(cls: ast.ClassDef) -> list[Problem]:
    problems: list[Problem] = []
    for tool in _tools(cls):
        if isinstance(tool, ast.AsyncFunctionDef):
            problems.append(Problem("return", f"tool {tool.name} is async; tools are called "
                                    "synchronously", tool.lineno, tool.name))
            continue
        own = _own_nodes(tool)
        if any(isinstance(node, (ast.Yield, ast.YieldFrom)) for node in own):
            problems.append(Problem("return", f"tool {tool.name} is a generator", tool.lineno,
                                    tool.name))
            continue
        returns = [node for node in own if isinstance(node, ast.Return)]
        for node in returns:
            what = _not_a_result(node.value)
            if what is not None:
                problems.append(Problem("return", f"tool {tool.name} returns {what}, not a dict "
                                        "with a 'success' key", node.lineno, tool.name))
        if not any(node.value is not None and not _is_none(node.value) for node in returns):
            problems.append(Problem("return", f"tool {tool.name} never returns a value: it can "
                                    "end without a return on every path (it would return None)",
                                    tool.lineno, tool.name))
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


def _is_none(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and value.value is None


def _not_a_result(value: ast.expr | None) -> str | None:
    """What ``value`` is when it is a literal that cannot be a tool's result (a dict with a
    ``success`` key), else None: variables, calls and other expressions are the executable
    gate's to judge, on the values they actually take."""
    if value is None:
        return "None (a bare return)"
    if isinstance(value, ast.Constant):
        return "None" if value.value is None else f"the constant {value.value!r}"
    if isinstance(value, ast.IfExp):
        branch = _not_a_result(value.body) or _not_a_result(value.orelse)
        return None if branch is None else f"a conditional that can give {branch}"
    if isinstance(value, ast.Dict):
        spread = any(key is None for key in value.keys)  # {**other, ...} may bring the key
        keys = {key.value for key in value.keys if isinstance(key, ast.Constant)}
        return None if spread or "success" in keys else "a dict without a 'success' key"
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id == "dict" and not value.args:
        names = {keyword.arg for keyword in value.keywords}  # None: dict(**other)
        return None if None in names or "success" in names else "a dict without a 'success' key"
    for kinds, what in _LITERALS:
        if isinstance(value, kinds):
            return what
    return None


_LITERALS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    ((ast.List, ast.ListComp), "a list"), (ast.Tuple, "a tuple"),
    ((ast.Set, ast.SetComp), "a set"), (ast.GeneratorExp, "a generator"),
    (ast.JoinedStr, "a string"), (ast.Lambda, "a function"))
