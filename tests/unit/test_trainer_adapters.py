"""The trainer adapters without a gateway: tool schemas as Python signatures that transformers'
own ``get_json_schema`` (what TRL runs on an environment class's methods) reads back, the split
of a description around its ``Returns:`` block, and the rows that name episodes."""

from __future__ import annotations

import copy
import inspect
from typing import Any

import pytest
from envscaler_client.adapters.rows import Episode, verl_episode, verl_rows
from envscaler_client.adapters.signatures import OMITTED, split_description, tool_method
from envscaler_client.adapters.trl import EnvScalerEnvironment, environment_class
from transformers.utils import get_json_schema


def as_transformers_sees(tool: dict[str, Any]) -> dict[str, Any]:
    """A session's tool schema less what ``get_json_schema`` cannot express: defaults,
    ``additionalProperties: false``, an empty ``required``, and the description past its first
    section marker (that part is the return value's description)."""
    function = copy.deepcopy(tool["function"])
    parameters = function["parameters"]
    parameters.pop("additionalProperties", None)
    if not parameters.get("required"):
        parameters.pop("required", None)
    for schema in parameters["properties"].values():
        schema.pop("default", None)
    function["description"] = split_description(function["description"])[0]
    return normalized({"type": "function", "function": function})


def normalized(schema: Any) -> Any:
    """``nullable: true`` (transformers' spelling) as a ``"null"`` type, type lists sorted."""
    if isinstance(schema, list):
        return [normalized(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: normalized(value) for key, value in schema.items() if key != "nullable"}
    if schema.get("nullable"):
        types = out["type"] if isinstance(out["type"], list) else [out["type"]]
        out["type"] = [*types, "null"]
    if isinstance(out.get("type"), list):
        out["type"] = sorted(out["type"])
    return out


def method_schema(tool: dict[str, Any]) -> dict[str, Any]:
    """What TRL gets for the tool: ``get_json_schema`` on the bound method of a class."""
    name = tool["function"]["name"]
    cls = type("Probe", (), {name: tool_method(tool, lambda self, tool_name, arguments: "")})
    return get_json_schema(getattr(cls(), name))


def tool(properties: dict[str, Any], required: list[str], description: str = "Do it.") -> dict:
    return {"type": "function", "function": {
        "name": "do_it", "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required,
                       "additionalProperties": False}}}


def test_every_json_type_the_catalogue_format_derives_reads_back_the_same() -> None:
    schema = tool({
        "name": {"type": "string", "description": "A name."},
        "count": {"type": "integer", "description": "How many.", "default": 1},
        "ratio": {"type": ["number", "null"], "description": "A ratio.", "default": None},
        "flag": {"type": "boolean", "description": "A flag."},
        "side": {"type": "string", "enum": ["buy", "sell"], "description": "The side."},
        "interval": {"type": ["string", "null"], "enum": ["month", "year", None],
                     "description": "The interval.", "default": None},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags."},
        "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}},
                 "description": "A grid."},
        "weights": {"type": "object", "additionalProperties": {"type": "number"},
                    "description": "Weights by name."},
        "anything": {"description": "Any value."},
        "either": {"anyOf": [{"type": "array", "items": {"type": "integer"}},
                             {"type": "string"}], "description": "A list or a text."},
    }, ["name", "flag", "side", "tags", "grid", "weights", "anything", "either"])
    got = method_schema(schema)
    assert got["function"].pop("return")["type"] == "string"
    assert normalized(got) == as_transformers_sees(schema)


def test_what_a_hint_cannot_say_is_in_the_description() -> None:
    record = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
    pair = {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
            "minItems": 2, "maxItems": 2}
    schema = tool({"member": {**record, "description": "The member."},
                   "pair": {**pair, "description": "A pair."}}, ["member", "pair"])
    properties = method_schema(schema)["function"]["parameters"]["properties"]
    assert properties["member"]["type"] == "object"
    assert properties["member"]["description"].startswith("The member. JSON schema: ")
    assert '"properties": {"id": {"type": "string"}}' in properties["member"]["description"]
    assert properties["pair"]["prefixItems"] == [{"type": "string"}, {"type": "integer"}]
    assert '"maxItems": 2' in properties["pair"]["description"]


def test_parameters_without_a_description_still_get_one() -> None:
    # get_json_schema refuses a parameter the docstring does not describe
    got = method_schema(tool({"member_id": {"type": "string"}}, ["member_id"], description=""))
    assert got["function"]["description"] == "do_it"
    member_id = got["function"]["parameters"]["properties"]["member_id"]
    assert member_id["description"] == "The member_id."


def test_the_description_keeps_its_returns_block_as_the_return_description() -> None:
    description = ('Look up a member.\n\nReturns:\n    dict: {"success": True, "data": ...}, or\n'
                   '    {"success": False, "error": str}.\n\nRaises:\n    Nothing.')
    main, returns = split_description(description)
    assert main == "Look up a member."
    # the Raises block stays, without the colon get_json_schema would cut it at
    assert returns is not None and returns.split() == (
        'dict: {"success": True, "data": ...}, or {"success": False, "error": str}. '
        "Raises Nothing.").split()
    got = method_schema(tool({}, [], description=description))["function"]
    assert got["description"] == main
    assert got["return"]["description"].split() == returns.split()
    assert split_description("No sections here.") == ("No sections here.", None)
    assert split_description("Either Args: inline") == ("Either", "Args inline")


def test_signatures_are_keyword_only_with_the_schema_defaults() -> None:
    method = tool_method(tool({"a": {"type": "string", "description": "A."},
                               "b": {"type": "integer", "description": "B.", "default": 3},
                               "c": {"type": "string", "description": "C."}}, ["a"]),
                         lambda self, name, arguments: f"{name} {sorted(arguments)}")
    signature = inspect.signature(method)
    assert list(signature.parameters) == ["self", "a", "b", "c"]
    assert signature.parameters["a"].default is inspect.Parameter.empty
    assert signature.parameters["b"].default == 3
    assert signature.parameters["c"].default is OMITTED
    # only what the caller gave is passed on: the gateway applies the tool's own defaults
    assert method(None, a="x") == "do_it ['a']"


def test_the_base_class_exposes_no_tool_to_trl() -> None:
    # TRL lists the class's functions; every public one but reset and get_reward is a tool
    public = [name for name, _ in inspect.getmembers(EnvScalerEnvironment, inspect.isfunction)
              if not name.startswith("_")]
    assert public == ["get_reward", "reset"]


def named(name: str) -> dict[str, Any]:
    schema = tool({"a": {"type": "string", "description": "A."}}, [])
    schema["function"]["name"] = name
    return schema


def test_a_tool_named_like_the_class_s_own_attributes_is_refused_or_harmless() -> None:
    # a tool named `env` is an ordinary tool: it no longer replaces what the class serves
    cls = environment_class("shop", [named("env"), named("lookup")], ("http://127.0.0.1:9", None))
    tools = [name for name, _ in inspect.getmembers(cls, inspect.isfunction)
             if not name.startswith("_") and name not in ("reset", "get_reward")]
    assert tools == ["env", "lookup"]
    with cls() as instance, pytest.raises(ValueError, match="serves 'shop'"):
        instance.reset(env="other", scenario="s")  # the row check still knows its environment
    # the names TRL calls itself, and every attribute of the base class, are refused by name
    for reserved in ("reset", "get_reward", "_call", "__init__", "_session"):
        with pytest.raises(ValueError, match=rf"tools named \['{reserved}'\].*reset"):
            environment_class("shop", [named("lookup"), named(reserved)], ("http://x", None))


def test_rows_name_their_episode_or_say_what_is_missing() -> None:
    assert Episode.from_row({"env": "e", "scenario": "s"}) == Episode("e", "s", 0)
    with pytest.raises(ValueError, match="no environment"):
        Episode.from_row({"scenario": "s"})
    with pytest.raises(ValueError, match="no scenario"):
        Episode.from_row({"env": "e", "scenario": ""})
    with pytest.raises(ValueError, match="must be an integer"):
        Episode.from_row({"env": "e", "scenario": "s", "seed": "1"})
    rows = verl_rows([{"prompt": [], "env": "e", "scenario": "s", "seed": 2}])
    assert rows[0]["agent_name"] == "envscaler_agent"
    assert verl_episode(rows[0]) == Episode("e", "s", 2)
    with pytest.raises(ValueError, match="build rows with verl_rows"):
        verl_episode({"extra_info": {"index": 0}})
