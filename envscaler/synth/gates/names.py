"""Names that code uses but nothing defines: a ``NameError`` whenever that line runs.

Bindings are over-approximated (a name bound anywhere in a scope counts as bound everywhere in it,
comprehension variables count for their whole function) so that only names nothing could ever
bind are reported. Annotations are not looked at: with postponed evaluation they never run, and
the runtime reports those that do when the module loads.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

BUILTIN_NAMES = frozenset(dir(builtins))
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True)
class Scope:
    names: frozenset[str]
    is_class: bool = False


def undefined_names(module: ast.Module) -> list[tuple[str, int]]:
    """``(name, line)`` of the first use of each name that no scope binds; empty when the module
    has a ``from ... import *`` (which may bind anything)."""
    star = any(isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names)
               for node in ast.walk(module))
    if star:
        return []
    declared_global = {name for node in ast.walk(module) if isinstance(node, ast.Global)
                       for name in node.names}
    found: dict[str, int] = {}
    _visit_body(module.body, [Scope(frozenset(bound_names(module.body) | declared_global))], found)
    return sorted(found.items(), key=lambda item: (item[1], item[0]))


def bound_names(body: list[ast.stmt] | list[ast.AST]) -> set[str]:
    """Every name a scope's statements bind, nested function and class bodies excluded."""
    names: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, ast.Lambda):
            continue
        names |= _binds(node)
        stack.extend(ast.iter_child_nodes(node))
    return names


def _binds(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return {node.id}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    if isinstance(node, ast.ExceptHandler) and node.name:
        return {node.name}
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return {node.name}
    if isinstance(node, ast.MatchMapping) and node.rest:
        return {node.rest}
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return set(node.names)
    return set()


def parameter_names(args: ast.arguments) -> set[str]:
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {arg.arg for arg in every if arg is not None}


def _visible(scopes: list[Scope]) -> list[Scope]:
    """What a function nested in ``scopes`` sees: class scopes are skipped (Python's rule)."""
    return [scope for scope in scopes if not scope.is_class]


def _visit_body(body: list[ast.stmt], scopes: list[Scope], found: dict[str, int]) -> None:
    for stmt in body:
        _visit(stmt, scopes, found)


def _visit(node: ast.AST, scopes: list[Scope], found: dict[str, int]) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        _visit_all([*node.decorator_list, *node.args.defaults,
                    *(d for d in node.args.kw_defaults if d is not None)], scopes, found)
        inner = Scope(frozenset(parameter_names(node.args) | bound_names(node.body)))
        _visit_body(node.body, [*_visible(scopes), inner], found)
    elif isinstance(node, ast.Lambda):
        _visit_all([*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)],
                   scopes, found)
        inner = Scope(frozenset(parameter_names(node.args) | bound_names([node.body])))
        _visit(node.body, [*_visible(scopes), inner], found)
    elif isinstance(node, ast.ClassDef):
        _visit_all([*node.decorator_list, *node.bases, *node.keywords], scopes, found)
        _visit_body(node.body, [*scopes, Scope(frozenset(bound_names(node.body)), True)], found)
    elif isinstance(node, _COMPREHENSIONS):
        targets = bound_names([generator.target for generator in node.generators])
        _visit_all(list(ast.iter_child_nodes(node)), [*scopes, Scope(frozenset(targets))], found)
    elif isinstance(node, ast.AnnAssign):
        _visit_all([node.target, *([node.value] if node.value else [])], scopes, found)
    elif isinstance(node, ast.arg):
        return  # its annotation only
    elif isinstance(node, ast.Name):
        # dunder names are the dunder rule's (and the module's own, such as __file__, exist)
        if isinstance(node.ctx, ast.Load) and not node.id.startswith("__") and \
                not _defined(node.id, scopes):
            found.setdefault(node.id, node.lineno)
    else:
        _visit_all(list(ast.iter_child_nodes(node)), scopes, found)


def _visit_all(nodes: list[ast.AST], scopes: list[Scope], found: dict[str, int]) -> None:
    for node in nodes:
        _visit(node, scopes, found)


def _defined(name: str, scopes: list[Scope]) -> bool:
    return name in BUILTIN_NAMES or any(name in scope.names for scope in scopes)
