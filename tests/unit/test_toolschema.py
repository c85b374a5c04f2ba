"""Tool schemas derived from source: every tricky signature maps to an exact schema."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from envscaler.format.toolschema import (
    MAX_RECORD_DEPTH,
    ToolSchemaError,
    class_names,
    derive_tools,
    public_tool_names,
)


def tools_of(body: str, header: str = "") -> list[dict[str, Any]]:
    """Derive the tools of class ``Env`` whose method definitions are ``body``."""
    methods = textwrap.indent(textwrap.dedent(body), "    ")
    source = textwrap.dedent(header) + "\nclass Env:\n" + methods
    return derive_tools(source, "Env")


def function_of(body: str, header: str = "") -> dict[str, Any]:
    """The ``function`` part of the only tool defined by ``body``."""
    (tool,) = tools_of(body, header)
    assert tool["type"] == "function"
    return tool["function"]


def parameters_of(body: str, header: str = "") -> dict[str, Any]:
    return function_of(body, header)["parameters"]


TYPING = "from typing import Any, Dict, List, Literal, Mapping, Optional, Sequence, Union\n"


def test_defaults_are_not_required_and_literal_defaults_are_recorded() -> None:
    params = parameters_of("""
        def f(self, a: str, b: int = 3, c: float = -1.5, d: bool = False, e: tuple = (1, "x"),
              g: str = "hi", h: list = SENTINEL):
            pass
    """)
    assert params == {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "integer", "default": 3},
            "c": {"type": "number", "default": -1.5},
            "d": {"type": "boolean", "default": False},
            "e": {"type": "array", "default": [1, "x"]},
            "g": {"type": "string", "default": "hi"},
            "h": {"type": "array"},  # not a literal: no default, still optional
        },
        "required": ["a"],
        "additionalProperties": False,
    }


def test_non_json_literal_defaults_are_left_out() -> None:
    params = parameters_of("def f(self, a: set = {1}, b: bytes = b'x', c: float = 1e999): pass")
    assert params["properties"] == {"a": {"type": "array"}, "b": {}, "c": {"type": "number"}}
    assert params["required"] == []


def test_optional_adds_null_and_is_required_only_without_default() -> None:
    params = parameters_of("""
        def f(self, a: Optional[str], b: Optional[int] = None, c: "float | None" = 2.0,
              d: str = None):
            pass
    """, TYPING)
    assert params["properties"] == {
        "a": {"type": ["string", "null"]},
        "b": {"type": ["integer", "null"], "default": None},
        "c": {"type": ["number", "null"], "default": 2.0},
        "d": {"type": ["string", "null"], "default": None},  # implicit Optional
    }
    assert params["required"] == ["a"]


def test_literal_gives_an_enum_with_its_type() -> None:
    params = parameters_of("""
        def f(self, mode: Literal["fast", "slow"] = "fast", *, level: Literal[1, 2, 3],
              mixed: Literal["a", 1], maybe: Optional[Literal["x", "y"]] = None):
            pass
    """, TYPING)
    assert params["properties"] == {
        "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
        "level": {"type": "integer", "enum": [1, 2, 3]},
        "mixed": {"type": ["string", "integer"], "enum": ["a", 1]},
        "maybe": {"type": ["string", "null"], "enum": ["x", "y", None], "default": None},
    }
    assert params["required"] == ["level", "mixed"]


def test_containers_map_to_arrays_and_objects_with_item_schemas() -> None:
    params = parameters_of("""
        def f(self, a: List[str], b: list[dict[str, int]], c: Sequence[float], d: set[int],
              e: Dict[str, Any], f: Mapping[str, List[bool]], g: dict, h: tuple[int, ...],
              i: tuple[int, str], j: Optional[List[str]]):
            pass
    """, TYPING)
    assert params["properties"] == {
        "a": {"type": "array", "items": {"type": "string"}},
        "b": {"type": "array",
              "items": {"type": "object", "additionalProperties": {"type": "integer"}}},
        "c": {"type": "array", "items": {"type": "number"}},
        "d": {"type": "array", "items": {"type": "integer"}},
        "e": {"type": "object"},
        "f": {"type": "object",
              "additionalProperties": {"type": "array", "items": {"type": "boolean"}}},
        "g": {"type": "object"},
        "h": {"type": "array", "items": {"type": "integer"}},
        "i": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
              "minItems": 2, "maxItems": 2},
        "j": {"type": ["array", "null"], "items": {"type": "string"}},
    }


def test_unions_give_type_lists_or_any_of() -> None:
    params = parameters_of("""
        def f(self, a: Union[int, str], b: int | List[str], c: Union[int, Any],
              d: Union[str, int, None], e: "UnknownThing", f, g: Any):
            pass
    """, TYPING)
    assert params["properties"] == {
        "a": {"type": ["integer", "string"]},
        "b": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "string"}}]},
        "c": {},
        "d": {"type": ["string", "integer", "null"]},
        "e": {},
        "f": {},
        "g": {},
    }


def test_nullable_any_of_appends_null() -> None:
    params = parameters_of("def f(self, a: Optional[Union[int, List[int]]]): pass", TYPING)
    assert params["properties"]["a"] == {"anyOf": [
        {"type": "integer"}, {"type": "array", "items": {"type": "integer"}}, {"type": "null"}]}


def test_typed_dicts_become_objects_with_required_fields() -> None:
    header = """
        from typing import List, NotRequired, Optional, Required, TypedDict
        import typing

        class Address(TypedDict, total=False):
            street: str
            city: Required[str]

        class Person(typing.TypedDict):
            name: str
            nickname: NotRequired[Optional[str]]
            addresses: List[Address]
            friend: "Person"

        class Employee(Person):
            salary: float
    """
    params = parameters_of(
        "def hire(self, who: Person, boss: Employee, where: Address | None = None): pass", header)
    address = {"type": "object",
               "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
               "required": ["city"]}
    person = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "nickname": {"type": ["string", "null"]},
            "addresses": {"type": "array", "items": address},
            "friend": {"type": "object"},  # recursion stops at a plain object
        },
        "required": ["name", "addresses", "friend"],
    }
    assert params["properties"]["who"] == person
    boss = params["properties"]["boss"]
    assert list(boss["properties"]) == ["name", "nickname", "addresses", "friend", "salary"]
    assert boss["required"] == ["name", "addresses", "friend", "salary"]
    assert boss["properties"]["friend"] == person  # Person is not being expanded yet here
    assert params["properties"]["where"] == {**address, "type": ["object", "null"],
                                             "default": None}


def test_mutually_recursive_typed_dicts_terminate() -> None:
    header = """
        from typing import TypedDict
        class A(TypedDict):
            b: "B"
        class B(TypedDict):
            a: A
    """
    params = parameters_of("def f(self, a: A): pass", header)
    assert params["properties"]["a"] == {
        "type": "object",
        "properties": {"b": {"type": "object",
                             "properties": {"a": {"type": "object"}}, "required": ["a"]}},
        "required": ["b"],
    }


def test_deeply_nested_typed_dicts_stop_at_the_depth_limit() -> None:
    chain = "".join(f"class R{i}(TypedDict):\n    child: R{i + 1}\n" for i in range(9))
    header = "from typing import TypedDict\nclass R9(TypedDict):\n    leaf: int\n" + chain
    schema = parameters_of("def f(self, root: R0): pass", header)["properties"]["root"]
    depth = 0
    while "properties" in schema:
        schema = schema["properties"]["child"]
        depth += 1
    assert (depth, schema) == (MAX_RECORD_DEPTH, {"type": "object"})


def test_postponed_annotations_are_parsed() -> None:
    params = parameters_of("def f(self, a: list[int] | None, b: 'dict[str, str]' = {}): pass",
                           "from __future__ import annotations")
    assert params["properties"] == {
        "a": {"type": ["array", "null"], "items": {"type": "integer"}},
        "b": {"type": "object", "additionalProperties": {"type": "string"}, "default": {}},
    }


def test_google_args_give_parameter_descriptions_and_leave_the_rest() -> None:
    function = function_of('''
        def transfer(self, source_id: str, amount: float, note: str = "") -> dict:
            """Move money between accounts.

            The transfer is atomic.

            Args:
                source_id (str): Account to debit.
                amount (float): How much to move; must be positive
                    and at most the balance.

                note: Free text shown
                    on both statements.

            Returns:
                dict: {"success": True} or an error.

            Constraints:
                The account must be open.
            """
    ''')
    assert function["name"] == "transfer"
    assert function["description"] == (
        "Move money between accounts.\n\nThe transfer is atomic.\n\n"
        "Returns:\n    dict: {\"success\": True} or an error.\n\n"
        "Constraints:\n    The account must be open.")
    properties = function["parameters"]["properties"]
    assert properties["source_id"] == {"type": "string", "description": "Account to debit."}
    assert properties["amount"]["description"] == (
        "How much to move; must be positive and at most the balance.")
    assert properties["note"] == {
        "type": "string", "description": "Free text shown on both statements.", "default": ""}


def test_sphinx_params_give_descriptions_and_type_fields_are_dropped() -> None:
    function = function_of('''
        def f(self, a: int, b: str):
            """Do the thing.

            :param a: the first
               one, continued
            :type a: int
            :param str b: the second
            :returns: nothing useful
            """
    ''')
    assert function["description"] == "Do the thing.\n\n:returns: nothing useful"
    assert function["parameters"]["properties"] == {
        "a": {"type": "integer", "description": "the first one, continued"},
        "b": {"type": "string", "description": "the second"},
    }


def test_missing_docstring_gives_empty_description() -> None:
    assert function_of("def f(self): pass") == {
        "name": "f", "description": "",
        "parameters": {"type": "object", "properties": {}, "required": [],
                       "additionalProperties": False}}


def test_private_dunder_properties_and_async_are_not_tools() -> None:
    tools = tools_of("""
        def __init__(self, init_config: dict): pass
        def _helper(self): pass
        def __len__(self): return 0
        @property
        def size(self): return 1
        @size.setter
        def size(self, value): pass
        @functools.cached_property
        def cached(self): return 2
        async def later(self): pass
        def visible(self): pass
        @staticmethod
        def pure(x: int): return x
        @classmethod
        def build(cls, y: str): pass
    """)
    assert public_tool_names(tools) == ["visible", "pure", "build"]
    assert tools[1]["function"]["parameters"]["properties"] == {"x": {"type": "integer"}}
    assert tools[2]["function"]["parameters"]["properties"] == {"y": {"type": "string"}}


def test_redefined_method_keeps_first_position_and_last_definition() -> None:
    tools = tools_of("""
        def a(self, x: int): pass
        def b(self): pass
        def a(self, y: str): pass
    """)
    assert public_tool_names(tools) == ["a", "b"]
    assert tools[0]["function"]["parameters"]["properties"] == {"y": {"type": "string"}}


def test_star_args_are_hidden_and_kwargs_opens_the_schema() -> None:
    tools = tools_of("""
        def a(self, x: int, *args: str, flag: bool, limit: int = 5): pass
        def b(self, **kwargs): pass
    """)
    assert tools[0]["function"]["parameters"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "flag": {"type": "boolean"},
                       "limit": {"type": "integer", "default": 5}},
        "required": ["x", "flag"],
        "additionalProperties": False,
    }
    assert tools[1]["function"]["parameters"] == {"type": "object", "properties": {},
                                                  "required": []}


def test_positional_only_parameters_are_rejected() -> None:
    with pytest.raises(ToolSchemaError, match="'f' has positional-only parameters") as info:
        tools_of("def f(self, a, /, b): pass")
    assert info.value.line == 3
    assert public_tool_names(tools_of("def g(self, /, b): pass")) == ["g"]  # only self


def test_missing_class_and_syntax_error_raise_tool_schema_error() -> None:
    with pytest.raises(ToolSchemaError, match="does not define class 'Missing'"):
        derive_tools("class Env:\n    pass\n", "Missing")
    with pytest.raises(ToolSchemaError, match="does not parse") as info:
        derive_tools("class Env:\n    def f(self:\n", "Env")
    assert info.value.line == 2


def test_nested_class_is_not_a_top_level_class() -> None:
    source = "class Outer:\n    class Inner:\n        def f(self): pass\n"
    assert class_names(source) == ["Outer"]
    with pytest.raises(ToolSchemaError):
        derive_tools(source, "Inner")


def test_library_loans_tools_match_the_signatures() -> None:
    source = (Path(__file__).parents[2] / "generated_envs/library_loans/env.py").read_text()
    tools = {tool["function"]["name"]: tool["function"]
             for tool in derive_tools(source, "LibraryLoanSystem")}
    search = tools["search_books"]["parameters"]
    assert search["required"] == ["query"]
    assert search["properties"]["field"]["enum"] == ["title", "author", "any"]
    assert tools["pay_fines"]["parameters"]["properties"]["amount"]["type"] == ["number", "null"]
    assert "Args:" not in tools["checkout_book"]["description"]
