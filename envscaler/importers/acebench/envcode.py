"""The ``env.py`` of one set of ACEBench classes (a question's ``involved_classes``), as text.

The classes' modules come first, as ACEBench wrote them (an import of another module of the
checkout replaced by that module's source, each source once), then ``AceBench``: it makes each
class and loads it as ACEBench's ``execute_agent_func_call`` does, with the class's part of the
question's ``initial_config`` and then with the ``BaseApi`` part (from
``init_config["_initial_config"]``, a private attribute afterwards, so not state). The state is one
public attribute per class, named after it, holding the instance, and ``calls_succeeded``: ACEBench
saves a final state only once a call has run without raising. Each function of the questions'
function docs becomes a method of the same name that runs, as ACEBench does, the method of that
name of every class that has it (in ``involved_classes`` order; the last result is the answer), or fails when no class has
it, as ACEBench's execution does (the docs list more functions than the classes have).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from envscaler.importers.acebench.checkout import Category
from envscaler.importers.funcdoc import FuncDocError, documented_method

CLASS_NAME = "AceBench"
CONFIG_KEY = "_initial_config"
SUCCEEDED = "calls_succeeded"
BASE_CLASS = "BaseApi"


class EnvCodeError(ValueError):
    """The classes cannot be served together (a doc without a method, a clash)."""


@dataclass(frozen=True)
class EnvCode:
    source: str
    tools: list[str]


def build(category: Category, classes: tuple[str, ...], docs: list[dict]) -> EnvCode:
    missing = [name for name in classes if name not in category.classes]
    if missing:
        raise EnvCodeError(f"no class {', '.join(missing)} in the checkout")
    methods, owners = [], {}
    for doc in docs:
        name = doc.get("name", "")
        if not name.isidentifier() or name.startswith("_"):
            raise EnvCodeError(f"a function doc names {name!r}, which cannot be a tool")
        having = [cls for cls in classes
                  if category.classes[cls].method(name, category.classes) is not None]
        method = (category.classes[having[0]].method(name, category.classes) if having
                  else _undefined(doc))
        try:
            text, _ = documented_method(method, doc, f"self._run({name!r})")
        except FuncDocError as exc:
            raise EnvCodeError(str(exc)) from None
        methods.append(text)
        owners[name] = tuple(having)
    modules = _modules(category, [category.classes[name].module for name in classes])
    return EnvCode(source="\n\n\n".join([*modules, _wrapper(classes, owners, methods)]) + "\n",
                   tools=list(owners))


def _undefined(doc: dict) -> ast.FunctionDef:
    """A signature for a documented function no involved class defines (the docs of a question
    list more than its classes have): the doc's parameters, the optional ones defaulting to
    None; calling it fails, as in ACEBench."""
    parameters = doc.get("parameters") or {}
    required = set(parameters.get("required") or ())
    names = [name for name in parameters.get("properties") or {} if name.isidentifier()]
    listed = [*(n for n in names if n in required), *(f"{n}=None" for n in names
                                                        if n not in required)]
    node = ast.parse(f"def {doc['name']}(self, {', '.join(listed)}): pass").body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


def _modules(category: Category, wanted: list[str]) -> list[str]:
    """Module sources in dependency order, each text once (ACEBench's multi-step modules import
    the multi-turn ``BaseApi``, the same source), checkout imports blanked."""
    ordered: dict[str, str] = {}

    def add(module: str, chain: tuple[str, ...]) -> None:
        if module in ordered:
            return
        if module in chain:
            raise EnvCodeError(f"module {module} imports itself ({chain})")
        text = category.sources[module]
        lines = text.splitlines()
        for node in ast.parse(text).body:
            if isinstance(node, ast.ImportFrom) and node.module in category.sources:
                add(node.module, (*chain, module))
                for number in range(node.lineno - 1, node.end_lineno or node.lineno):
                    lines[number] = ""
        ordered[module] = "\n".join(lines).strip()

    for module in wanted:
        add(module, ())
    texts = list(dict.fromkeys(ordered.values()))
    defined = [node.name for text in texts for node in ast.parse(text).body
               if isinstance(node, ast.ClassDef)]
    clashes = sorted({name for name in defined if defined.count(name) > 1})
    if clashes:
        raise EnvCodeError(f"classes {clashes} are defined differently by two modules")
    return [f"# --- ACEBench module ---\n{text}" for text in texts]


def _wrapper(classes: tuple[str, ...], owners: dict[str, tuple[str, ...]],
             methods: list[str]) -> str:
    setup = []
    for name in classes:
        setup.append(f"        self.{name} = {name}()")
        for part in (name, BASE_CLASS):
            setup.append(f"        self.{name}._load_scenario(_ace_copy.deepcopy("
                         f"initial.get({part!r}, {{}})), long_context=False)")
    run = ("    def _run(self, name):\n"
           '        """A call as ACEBench executes it: on every class that has the method."""\n'
           "        def run(**arguments):\n"
           f"            if not {owners!r}[name]:\n"
           "                raise AttributeError(f'no involved class has a method {name}')\n"
           "            result = None\n"
           f"            for owner in {owners!r}[name]:\n"
           "                result = getattr(getattr(self, owner), name)(**arguments)\n"
           f"            self.{SUCCEEDED} += 1\n"
           "            return result\n"
           "        return run")
    return ("import copy as _ace_copy\n\n\n"
            f"class {CLASS_NAME}:\n"
            f'    """ACEBench: {", ".join(classes)}, each loaded from its part of the question\'s '
            'initial_config and the BaseApi part."""\n\n'
            "    def __init__(self, init_config):\n"
            f"        initial = init_config.get({CONFIG_KEY!r}, {{}})\n"
            + "\n".join(setup) + f"\n        self.{SUCCEEDED} = 0\n\n"
            + run + "\n\n" + "\n\n".join(methods))


__all__ = ["CLASS_NAME", "CONFIG_KEY", "SUCCEEDED", "EnvCode", "EnvCodeError", "build"]
