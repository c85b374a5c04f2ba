"""The static gate's rules, on small sources (nothing here is ever executed)."""

from __future__ import annotations

import textwrap

import pytest

from envscaler.synth.gates.static import check_function_problems, static_gate
from tests.conftest import REPO_ROOT

GOOD = '''
from datetime import datetime
from typing import Dict, Optional, TypedDict


class ItemInfo(TypedDict):
    item_id: str
    count: int


LIMIT = 10
KINDS = ("a", "b")


class Store:
    """A tiny store."""

    MAX = 3

    def __init__(self, init_config: dict):
        self.items: Dict[str, ItemInfo] = {}
        self.init_config = init_config

    def _helper(self):
        return None

    @property
    def size(self) -> int:
        return len(self.items)

    def get_item(self, item_id: str) -> dict:
        """Get one item."""
        item = self.items.get(item_id)
        if item is None:
            return {"success": False, "error": "not found"}
        return {"success": True, "data": dict(item)}

    def add(self, item_id: str, count: int = 1, note: Optional[str] = None) -> dict:
        try:
            count = int(count)
        except (TypeError, ValueError):
            return {"success": False, "error": "bad count"}
        else:
            self.items[item_id] = {"item_id": item_id, "count": count}
            return {"success": True, "message": datetime.now().isoformat(), **{"id": item_id}}

    def count_all(self) -> dict:
        for item in self.items.values():
            if item["count"] > self.MAX:
                return {"success": True, "data": "big"}
        if self.items:
            return {"success": True, "data": len(self.items)}
        else:
            return dict(success=True, data=0)
'''


def rules(source: str, class_name: str = "Store") -> list[tuple[str, str]]:
    return [(problem.rule, problem.message) for problem in
            static_gate(textwrap.dedent(source), class_name).problems]


def with_tool(body: str, header: str = "") -> str:
    method = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    return f"{header}\nclass Store:\n    def __init__(self, init_config):\n        self.x = {{}}\n\n{method}\n"


def test_a_clean_environment_passes() -> None:
    result = static_gate(GOOD, "Store")
    assert result.passed, result.problems
    assert result.details["tools"] == ["get_item", "add", "count_all"]


def test_the_hand_written_catalogue_environment_passes() -> None:
    source = (REPO_ROOT / "generated_envs" / "library_loans" / "env.py").read_text()
    assert static_gate(source, "LibraryLoanSystem").passed


@pytest.mark.parametrize(("header", "expected"), [
    ("import os", "imports os, which is not an allowed module"),
    ("import os.path", "imports os.path, which is not an allowed module"),
    ("from subprocess import run", "imports subprocess, which is not an allowed module"),
    ("import importlib", "imports importlib, which is not an allowed module"),
    ("from . import sibling", "relative imports are not allowed"),
])
def test_imports_outside_the_allowlist_fail(header: str, expected: str) -> None:
    source = with_tool('def t(self) -> dict:\n    return {"success": True}', header)
    assert ("import", expected) in rules(source)


def test_allowed_imports_pass_even_inside_functions() -> None:
    source = with_tool('''
        def t(self) -> dict:
            import collections.abc
            from decimal import Decimal
            return {"success": True, "data": str(Decimal("1.5"))}
    ''', "from __future__ import annotations\nimport json, re, uuid")
    assert rules(source) == []


def test_a_module_of_a_declared_requirement_may_be_imported() -> None:
    """Whatever its name: PyYAML's module is ``yaml``; the static gate cannot tell which modules
    a distribution brings, so with requirements pinned only the standard library is judged."""
    source = with_tool('''
        def pi(self):
            return {"success": True, "data": str(mpmath.pi) + yaml.dump(1)}
    ''', "import mpmath\nimport yaml\nfrom typing_extensions import Self")
    problems = [(problem.rule, problem.message) for problem in
                static_gate(source, "Store", ["mpmath==1.3.0", "typing-extensions==4.12.2",
                                              "PyYAML==6.0.2"]).problems]
    assert not [problem for problem in problems if problem[0] == "import"], problems
    assert ("import", "imports mpmath, which is not an allowed module") in rules(source)
    assert ("import", "imports os, which is not an allowed module") in [
        (problem.rule, problem.message) for problem in
        static_gate(with_tool("def t(self):\n    return {}", "import os"), "Store",
                    ["mpmath==1.3.0"]).problems]


def test_a_forbidden_import_inside_a_method_fails() -> None:
    source = with_tool('''
        def t(self) -> dict:
            import socket
            return {"success": True}
    ''')
    assert ("import", "imports socket, which is not an allowed module") in rules(source)


@pytest.mark.parametrize("call", ["open('/etc/passwd')", "exec('x = 1')", "eval('1')",
                                  "compile('1', 'f', 'eval')", "__import__('os')", "globals()",
                                  "vars(self)", "breakpoint()", "input()"])
def test_forbidden_builtins_fail(call: str) -> None:
    source = with_tool(f'def t(self) -> dict:\n    x = {call}\n    return {{"success": True}}')
    found = rules(source)
    name = call.split("(")[0]
    assert any(rule in ("forbidden-name", "dunder") and name in message for rule, message in found)


@pytest.mark.parametrize(("expression", "rule"), [
    ("self.__class__", "dunder"),
    ("self.__dict__", "dunder"),
    ("self.t.__globals__", "dunder"),
    ("__builtins__", "dunder"),
    ("getattr(self, '__class__')", "dunder"),
    ("getattr(self, '_secret')", "dynamic-attribute"),
    ("getattr(self, name)", "dynamic-attribute"),
    ("setattr(self, name, 1)", "dynamic-attribute"),
])
def test_dunders_and_dynamic_attributes_fail(expression: str, rule: str) -> None:
    source = with_tool(f'def t(self, name: str) -> dict:\n    x = {expression}\n'
                       '    return {"success": True}')
    assert rule in [found for found, _ in rules(source)]


def test_allowed_dunder_attributes_and_literal_getattr_pass() -> None:
    source = with_tool('''
        def t(self, value: int) -> dict:
            kind = type(value).__name__
            size = getattr(self, "x")
            known = hasattr(self, "x")
            return {"success": True, "data": [kind, len(size), known]}
    ''')
    assert rules(source) == []


@pytest.mark.parametrize(("top", "fragment"), [
    ("print('loading')", "module-level Expr statement runs at import"),
    ("START = datetime.now()", "module-level assignment runs code at import"),
    ("for i in range(3):\n    pass", "module-level For statement runs at import"),
    ("if True:\n    X = 1", "module-level If statement runs at import"),
    ("try:\n    import json\nexcept ImportError:\n    json = None",
     "module-level Try statement runs at import"),
])
def test_top_level_side_effects_fail(top: str, fragment: str) -> None:
    source = with_tool('def t(self) -> dict:\n    return {"success": True}',
                       f"from datetime import datetime\n{top}")
    assert ("top-level", fragment) in rules(source)


def test_class_bodies_decorators_and_defaults_are_checked_too() -> None:
    source = '''
        import functools

        class Store:
            print("class body")

            def __init__(self, init_config):
                self.x = {}

            @functools.lru_cache(maxsize=None)
            def cached(self) -> dict:
                return {"success": True}

            def t(self, when: str = make_default()) -> dict:
                return {"success": True}
    '''
    found = rules(source)
    assert ("top-level", "class Store-level Expr statement runs at import") in found
    assert ("top-level", "decorator lru_cache on cached runs code at import") in found
    assert ("top-level", "a default value of t runs code at import") in found
    assert ("import", "imports functools, which is not an allowed module") not in found


def test_constant_assignments_and_typed_dict_calls_are_fine() -> None:
    source = with_tool('def t(self) -> dict:\n    return {"success": True}', textwrap.dedent('''
        from typing import Literal, TypedDict
        Status = Literal["open", "closed"]
        Point = TypedDict("Point", {"x": int, "y": int})
        RATES = {"a": 1.5, "b": -2}
        NAMES = frozenset({"x", "y"})
        SQUARES = [n * n for n in range(4)]
    '''))
    assert rules(source) == []


@pytest.mark.parametrize(("body", "fragment"), [
    ('def t(self) -> dict:\n    return None', "returns None, not a dict"),
    ('def t(self) -> dict:\n    return', "returns None (a bare return)"),
    ('def t(self) -> dict:\n    return {"ok": True}', "returns a dict without a 'success' key"),
    ('def t(self) -> dict:\n    return True', "returns the constant True"),
    ('def t(self) -> dict:\n    return dict(ok=1)', "returns a dict without a 'success' key"),
    ('def t(self) -> dict:\n    return [1]', "returns a list"),
    ('def t(self, x: int) -> dict:\n    return {"success": True} if x else "no"',
     "returns a conditional that can give the constant 'no'"),
    ('def t(self) -> dict:\n    self.x["a"] = 1', "can end without a return"),
    ('def t(self) -> dict:\n    raise ValueError("no")', "never returns a value"),
    ('def t(self) -> dict:\n    yield {"success": True}', "is a generator"),
    ('async def t(self) -> dict:\n    return {"success": True}', "is async"),
    ('def t(self) -> dict:\n    while True:\n        break\n', "can end without a return"),
])
def test_returns_that_cannot_give_a_success_dict_fail(body: str, fragment: str) -> None:
    found = rules(with_tool(body))
    assert any(rule == "return" and fragment in message for rule, message in found), found


@pytest.mark.parametrize("body", [
    ('def t(self, x: int) -> dict:\n    if x:\n        return {"success": True}\n'
    '    else:\n        raise ValueError("x")'),
    'def t(self) -> dict:\n    while True:\n        return {"success": True}',
    ('def t(self, x: int) -> dict:\n    match x:\n        case 1:\n            return {"success": True}\n'
    '        case _:\n            return {"success": False, "error": "no"}'),
    'def t(self) -> dict:\n    def inner():\n        return 1\n    return {"success": True, "data": inner()}',
    'def _private(self):\n    return 42',
    # what these return is the executable gate's to judge, on the values they actually give
    'def t(self) -> dict:\n    result = {"success": True}\n    return result',
    'def t(self, x: int) -> dict:\n    return {"success": True} if x else self._fail("x")',
    'def t(self) -> dict:\n    return self._answer()',
    'def t(self) -> dict:\n    return {**self._base(), "data": 1}',
    'def t(self, x: int) -> dict:\n    if x:\n        return {"success": True}',
    ('def t(self, x: int) -> dict:\n    try:\n        return {"success": True}\n'
     '    except ValueError:\n        pass'),
])
def test_returns_the_source_cannot_prove_wrong_pass(body: str) -> None:
    found = rules(with_tool(body + '\n\ndef ok(self) -> dict:\n    return {"success": True}'))
    assert [rule for rule, _ in found if rule == "return"] == []


@pytest.mark.parametrize(("body", "fragment"), [
    ('def t(self) -> dict:\n    Store.counter = 1\n    return {"success": True}',
     "writes the class attribute Store.counter"),
    ('def t(self) -> dict:\n    type(self).counter += 1\n    return {"success": True}',
     "writes the class attribute type(...).counter"),
    ('def t(self) -> dict:\n    self.LOG.append(1)\n    return {"success": True}',
     "mutates the class-level container LOG"),
    ('def t(self) -> dict:\n    CACHE["k"] = 1\n    return {"success": True}',
     "mutates the module-level container CACHE"),
    ('def t(self) -> dict:\n    global COUNT\n    COUNT = 1\n    return {"success": True}',
     "global statement"),
])
def test_state_that_survives_a_reset_fails(body: str, fragment: str) -> None:
    method = textwrap.indent(textwrap.dedent(body), "    ")
    source = (f"CACHE = {{}}\nCOUNT = 0\n\nclass Store:\n    LOG = []\n\n"
              f"    def __init__(self, init_config):\n        self.x = {{}}\n\n{method}\n")
    found = rules(source)
    assert any(rule == "shared-state" and fragment in message for rule, message in found), found


def test_names_that_nothing_defines_fail() -> None:
    source = with_tool('''
        def t(self, key: str) -> dict:
            found = [item for item in self.x if item == key]
            return {"success": True, "data": helper(found), "total": totl}
    ''')
    found = rules(source)
    assert ("undefined-name", "uses the name helper, which nothing defines") in found
    assert ("undefined-name", "uses the name totl, which nothing defines") in found
    assert [rule for rule, _ in found if rule == "undefined-name"] == ["undefined-name"] * 2


def test_names_bound_anywhere_in_reach_are_defined() -> None:
    source = textwrap.dedent('''
        from __future__ import annotations
        import json as js

        def helper(value: Unknown) -> Unknown:
            return [js.dumps(value)]

        class Store:
            LIMIT = 3
            DOUBLE = LIMIT * 2

            def __init__(self, init_config):
                self.x = {}

            def t(self, key: str) -> dict:
                try:
                    data = helper(key)
                except ValueError as exc:
                    data = str(exc)
                match key:
                    case {"k": inner, **rest}:
                        data = [inner, rest]
                total = sum(n for n in range(3)) + (m := 2) + m
                later = lambda v: v + total
                return {"success": True, "data": data, "n": later(1), "max": self.LIMIT}
    ''')
    assert [problem for problem in rules(source) if problem[0] == "undefined-name"] == []


def test_class_names_are_not_visible_in_methods() -> None:
    source = textwrap.dedent('''
        class Store:
            LIMIT = 3

            def __init__(self, init_config):
                self.x = {}

            def t(self) -> dict:
                return {"success": True, "data": LIMIT}
    ''')
    assert ("undefined-name", "uses the name LIMIT, which nothing defines") in rules(source)


def test_per_instance_state_is_not_shared_state() -> None:
    source = textwrap.dedent('''
        from dataclasses import dataclass, field

        ITEMS = []

        @dataclass
        class Store:
            items: list = field(default_factory=list)

            def add(self, item: str) -> dict:
                self.items.append(item)
                return {"success": True}

            def copy(self) -> dict:
                ITEMS = list(self.items)
                ITEMS.append("x")
                return {"success": True, "data": ITEMS}
    ''')
    assert rules(source) == []


def test_a_constructor_with_optional_extras_or_none_at_all_is_fine() -> None:
    assert rules("class Store:\n    def __init__(self, init_config, extra=None):\n"
                 "        self.x = 1\n\n    def t(self) -> dict:\n"
                 "        return {\"success\": True}\n") == []
    assert rules("class Store:\n    def t(self) -> dict:\n"
                 "        return {\"success\": True}\n") == []


def test_the_class_must_exist_with_a_usable_constructor_and_tools() -> None:
    assert ("syntax", "class Missing is not defined at module level") in rules(GOOD, "Missing")
    source = "class Store:\n    def __init__(self, a, b):\n        self.x = 1\n"
    found = rules(source)
    assert ("syntax", "__init__ must take at most one argument (init_config)") in found
    assert ("syntax", "class Store has no tools (public methods)") in found


def test_syntax_errors_are_reported_with_their_line() -> None:
    result = static_gate("class Store:\n    def t(self):\n        return (\n", "Store")
    assert [(p.rule, p.line) for p in result.problems] == [("syntax", 3)]
    assert "static gate: line 3: does not parse" in result.summary()


def test_check_functions() -> None:
    assert check_function_problems("def check_func(final_state):\n    return True\n") == []
    assert check_function_problems(
        "import json\ndef check_func(final_state, *, strict=True):\n    return True\n") == []
    assert [p.message for p in check_function_problems("def check(s):\n    return True\n")] == \
        ["does not define check_func(final_state)"]
    assert [p.message for p in check_function_problems(
        "def check_func(a, b):\n    return True\n")] == \
        ["check_func must take exactly one parameter (final_state)"]
    found = check_function_problems(
        "import os\ndef check_func(final_state):\n    return open('x').read() == ''\n")
    assert {p.rule for p in found} == {"import", "forbidden-name"}
    assert check_function_problems("def check_func(final_state):\n    return (\n")[0].rule == \
        "syntax"
