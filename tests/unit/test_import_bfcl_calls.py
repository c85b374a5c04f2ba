"""BFCL's ground-truth call texts read as tool calls, without evaluating anything."""

from __future__ import annotations

import pytest

from envscaler.importers.bfcl.calls import CallError, parse_call

TOOLS = {"mv": ["source", "destination"], "mean": ["numbers"], "ls": ["a"]}


@pytest.mark.parametrize(("text", "name", "arguments"), [
    ("mv(source='a', destination='b')", "mv", {"source": "a", "destination": "b"}),
    ("mv('a',destination='b')", "mv", {"source": "a", "destination": "b"}),
    ("mean([3, 16, 62])", "mean", {"numbers": [3, 16, 62]}),
    ("mean(numbers=(1.5, -2))", "mean", {"numbers": [1.5, -2]}),
    ("ls()", "ls", {}),
    ("ls(a=True)", "ls", {"a": True}),
])
def test_calls_with_literal_arguments(text: str, name: str, arguments: dict) -> None:
    call = parse_call(text, TOOLS)
    assert (call.name, call.arguments) == (name, arguments)


@pytest.mark.parametrize(("text", "reason"), [
    ("mv(source='a', destination=)", "does not parse"),
    ("rm(file_name='x')", "not a tool"),
    ("mv(source=__import__('os').getcwd())", "not a literal"),
    ("mv('a', 'b', 'c')", "positional arguments"),
    ("mv('a', source='b')", "repeats"),
    ("os.system('x')", "by name"),
])
def test_what_is_not_a_tool_call_with_literals_is_refused(text: str, reason: str) -> None:
    with pytest.raises(CallError, match=reason):
        parse_call(text, TOOLS)
