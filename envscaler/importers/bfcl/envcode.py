"""The ``env.py`` of one set of BFCL classes (a question's ``involved_classes``), as text.

The classes' module sources come first, as BFCL wrote them (an import from a sibling module,
relative or by its package path, is replaced by that module's source, since an environment is one
file), then ``BfclMultiTurn``: it makes each class and calls its ``_load_scenario`` with that
class's part of BFCL's ``initial_config`` (from ``init_config["_initial_config"]``, a private
attribute afterwards, so not state), as BFCL does; the state is one public attribute per class,
named after it, holding the instance (served as the tree of its public attributes). Each function
of the classes' function docs becomes a method of the same name with BFCL's description and
parameters (typed from the docs, defaults from the class's own signature) that calls the
instance's method and records its result as BFCL renders it for the model (a failure as BFCL's
``Error during execution: ...``) in the public list ``execution_results``, part of the state: what
BFCL's response checker compares, so that the scenario's checks can see it.

BFCL compares states attribute by attribute with ``==``, so a nested object counts as what its
class's ``__eq__`` compares (a ``Directory`` as its name and contents, not its link back to its
parent nor a file's modification time). Such a class gets a ``__getstate__`` returning just the
attributes its ``__eq__`` reads, which is how the sandbox serves it: checks then compare what
BFCL compares, and a parent link is no cycle.
"""

from __future__ import annotations

import ast
import inspect
import io
import sys
import tokenize
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from envscaler.importers.bfcl.checkout import Checkout, ClassSource
from envscaler.importers.bfcl.runner import ERROR_PREFIX, render_result
from envscaler.importers.funcdoc import FuncDocError, documented_method

CLASS_NAME = "BfclMultiTurn"
CONFIG_KEY = "_initial_config"
RESULTS = "execution_results"  # the state's list of every call's result, as BFCL renders it
_RENDERED = inspect.getsource(render_result).replace("def render_result(", "def _bfcl_rendered(")
_CALL = f"""    def _bfcl_call(self, method, **arguments):
        \"\"\"A class's method called, its result (or failure) recorded as BFCL hands it to the
        model, for the response check.\"\"\"
        try:
            result = method(**arguments)
        except Exception as exc:
            self.{RESULTS}.append({ERROR_PREFIX!r} + str(exc))
            raise
        self.{RESULTS}.append(_bfcl_rendered(result))
        return result"""


class EnvCodeError(ValueError):
    """The classes cannot be served together (a tool defined twice, a doc without a method)."""


@dataclass(frozen=True)
class EnvCode:
    source: str
    tools: dict[str, list[str]]  # tool -> parameter names, in order
    warnings: tuple[str, ...]
    imports: tuple[str, ...] = ()  # third-party top-level modules the classes' modules import


def build(checkout: Checkout, class_names: list[str]) -> EnvCode:
    classes = [_class(checkout, name) for name in class_names]
    modules = _modules(checkout, [cls.module for cls in classes])
    methods, tools, warnings = [], {}, []
    for cls in classes:
        for doc in checkout.func_docs.get(cls.module, {}).values():
            if doc["name"] in tools:
                raise EnvCodeError(f"{doc['name']} is a function of two of {class_names}")
            method = cls.method(doc["name"])
            if method is None:
                warnings.append(f"{cls.name} has no method {doc['name']} (documented): left out")
                continue
            text, names = _method(cls.name, method, doc)
            methods.append(text)
            tools[doc["name"]] = names
    nested = [found for found in checkout.classes.values()
              if found.module in modules and found.name not in class_names]
    parts = [*modules.values(), *_compared_states(nested), _wrapper(classes, methods)]
    source = "\n\n".join(part for part in parts if part) + "\n"
    return EnvCode(source=source, tools=tools, warnings=tuple(warnings),
                   imports=_third_party(modules.values()))


def _class(checkout: Checkout, name: str) -> ClassSource:
    found = checkout.classes.get(name)
    if found is None:
        raise EnvCodeError(f"no class {name} in {checkout.source_dir}")
    return found


def _modules(checkout: Checkout, wanted: list[str]) -> dict[str, str]:
    """Module sources in dependency order, each once, relative imports replaced by the module."""
    texts: dict[str, str] = {}

    def add(module: str, chain: tuple[str, ...]) -> None:
        if module in texts:
            return
        if module in chain or module not in checkout.sources:
            raise EnvCodeError(f"module {module} is missing or imports itself ({chain})")
        text = checkout.sources[module]
        lines = text.splitlines()
        for node in ast.parse(text).body:
            sibling = _sibling(node, checkout)
            if sibling is not None:
                add(sibling, (*chain, module))
                for number in range(node.lineno - 1, node.end_lineno or node.lineno):
                    lines[number] = ""
        texts[module] = "\n".join(lines).strip()

    for module in wanted:
        add(module, ())
    return {module: f"# --- BFCL module {module} ---\n{text}"
            for module, text in _separated(texts).items()}


def _separated(texts: dict[str, str]) -> dict[str, str]:
    """The modules, each global that two of them define renamed after its module in each (every
    BFCL module has its own ``DEFAULT_STATE``; in one file the last would win)."""
    owned = {module: _globals(text) for module, text in texts.items()}
    counts = Counter(name for names in owned.values() for name in names)
    shared = {name for name, count in counts.items() if count > 1}
    classes = shared & {node.name for text in texts.values() for node in ast.parse(text).body
                        if isinstance(node, ast.ClassDef)}
    if classes:
        raise EnvCodeError(f"classes {sorted(classes)} are defined by two modules")
    return {module: _renamed(text, owned[module] & shared, module)
            for module, text in texts.items()}


def _globals(text: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {found.id for target in targets for found in ast.walk(target)
                      if isinstance(found, ast.Name)}
    return names


def _renamed(text: str, names: set[str], module: str) -> str:
    """``text`` with each name of ``names`` (not an attribute) suffixed with ``_{module}``."""
    if not names:
        return text
    lines = text.splitlines(keepends=True)
    previous = ""
    places = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.NAME and token.string in names and previous != ".":
            places.append((*token.start, token.string))
        if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            previous = token.string
    for row, col, name in reversed(places):
        line, end = lines[row - 1], col + len(name)
        lines[row - 1] = f"{line[:end]}_{module}{line[end:]}"
    return "".join(lines)


def _third_party(texts: Iterable[str]) -> tuple[str, ...]:
    """The top-level modules ``texts`` import that are not the standard library's (sibling
    imports are gone by now): what the sandbox must have installed (MathAPI imports mpmath)."""
    names = set()
    for text in texts:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module.split(".")[0])
    return tuple(sorted(name for name in names if name not in sys.stdlib_module_names))


def _sibling(node: ast.stmt, checkout: Checkout) -> str | None:
    """The source-folder module ``node`` imports from: relatively (``from .units``) or by its
    package path (``from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.units``)."""
    if not isinstance(node, ast.ImportFrom):
        return None
    parts = (node.module or "").split(".")
    if node.level:
        return parts[0]
    if len(parts) > 1 and parts[-2] == checkout.source_dir.name and parts[-1] in checkout.sources:
        return parts[-1]
    return None


def _compared_states(classes: list[ClassSource]) -> list[str]:
    adapters = []
    for cls in classes:
        equality = cls.method("__eq__")
        names = list(dict.fromkeys(
            node.attr for node in ast.walk(equality) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == "self")) if equality else []
        if names:
            adapters.append(f"{cls.name}.__getstate__ = _bfcl_compared{tuple(names)!r}")
    if not adapters:
        return []
    helper = ("def _bfcl_compared(*names):\n"
              '    """The state of a BFCL object: the attributes its __eq__ compares."""\n'
              "    return lambda self: {name: getattr(self, name) for name in names\n"
              "                         if hasattr(self, name)}")
    return [helper, "\n".join(adapters)]


def _method(owner: str, method: ast.FunctionDef, doc: dict) -> tuple[str, list[str]]:
    try:
        return documented_method(method, doc, f"self.{owner}.{method.name}",
                                 via="self._bfcl_call")
    except FuncDocError as exc:
        raise EnvCodeError(str(exc)) from None


def _wrapper(classes: list[ClassSource], methods: list[str]) -> str:
    names = ", ".join(cls.name for cls in classes)
    setup = []
    for cls in classes:
        setup.append(f"        self.{cls.name} = {cls.name}()")
        if cls.loads_scenario:
            setup.append(f"        self.{cls.name}.{'_load_scenario'}("
                         f"_bfcl_copy.deepcopy(initial.get({cls.name!r}, {{}})))")
    return (f"import copy as _bfcl_copy\nimport json\n\n\n{_RENDERED}\n\n\nclass {CLASS_NAME}:\n"
            f'    """BFCL multi-turn: {names}, each loaded from its part of BFCL\'s '
            f'initial_config; every call\'s result as BFCL renders it in {RESULTS}."""\n\n'
            f"    def __init__(self, init_config):\n"
            f"        initial = init_config.get({CONFIG_KEY!r}, {{}})\n"
            + "\n".join(setup) + f"\n        self.{RESULTS} = []\n\n{_CALL}\n\n"
            + "\n\n".join(methods))
