"""BFCL's two decoders of a model's step (function calling, prompting), with the quirks that
decide BFCL's verdicts, and BFCL's rule that an undecodable or empty step is left out."""

from __future__ import annotations

import pytest

from envscaler.importers.bfcl.decode import (
    DecodeError,
    decode_function_calling,
    decode_prompting,
    decode_turn,
)


def test_function_calling_steps_become_call_texts_with_python_literals() -> None:
    step = [{"cd": '{"folder": "docs"}'}, {"touch": {"file_name": "a.txt", "force": True}}]
    assert decode_function_calling(step) == ["cd(folder='docs')",
                                             "touch(file_name='a.txt',force=True)"]
    assert decode_function_calling({"pwd": "{}"}) == ["pwd()"]
    assert decode_function_calling({"mv": {"a": None, "b": [1, 2.5]}}) == ["mv(a=None,b=[1, 2.5])"]


@pytest.mark.parametrize("step", [
    "I moved the file.",  # a function-calling model's text answer
    [{"cd": "{not json"}],
    [{"cd": "[1, 2]"}],  # arguments that are not an object
    [{"cd": {}}, "text"],
    None,
])
def test_what_bfcl_cannot_decode_as_function_calls_is_a_decode_error(step: object) -> None:
    with pytest.raises(DecodeError):
        decode_function_calling(step)


def test_prompting_text_is_parsed_as_a_list_of_calls() -> None:
    assert decode_prompting("[cd(folder='docs'), ls(a=True)]") == ["cd(folder='docs')",
                                                                  "ls(a=True)"]
    assert decode_prompting("```\ncd(folder='docs')\n```") == ["cd(folder='docs')"]
    assert decode_prompting("[mean(numbers=[1, 2, -3])]\n") == ["mean(numbers=[1, 2, -3])"]
    assert decode_prompting("[]") == []


def test_prompting_keeps_bfcls_quirks() -> None:
    assert decode_prompting("[cd('docs')]") == ["cd()"]  # positional arguments are dropped
    assert decode_prompting("[f(x=+2)]") == ["f(x=-2)"]  # a unary operator negates
    assert decode_prompting("[f(x=2*3+1, y='a'+'b', z='ab'*2, w=2**3)]") == [
        "f(x=7, y='ab', z='abab', w=8)"]
    assert decode_prompting("[f(x=g(1))]") == ["f(x='g(1)')"]  # a call without keywords: text
    assert decode_prompting("[f(x=g(y=1))]") == ["f(x=g(y=1))"]  # with keywords: a nested call
    assert decode_prompting("[f(x={'a': 1}, y=(1, 2), z=name)]") == [
        "f(x={'a': 1}, y=(1, 2), z='name')"]
    assert decode_prompting("[a.b.f(x=1)]") == ["a.b.f(x=1)"]


@pytest.mark.parametrize("text", [
    "I cannot do that.",
    "[f(x=1), 2]",  # an element that is not a call
    "[f(x={})]",  # BFCL takes {} for a nested call and fails on it
    "[f(x=lambda: 1)]",
    "[f(x=len('a') + 1)]",  # BFCL would eval it; not here
    "[f(x='a' * 10**6)]",  # computed by BFCL; too large here
    "'[f(x=1)]'",  # quoted text: BFCL wraps it in [...] before it strips the quotes
    "[f(x=[i for i in y])]",
])
def test_what_bfcl_cannot_decode_as_python_calls_is_a_decode_error(text: str) -> None:
    with pytest.raises(DecodeError):
        decode_prompting(text)


def test_a_turn_keeps_only_steps_that_decode_to_calls() -> None:
    steps = [[{"cd": '{"folder": "a"}'}], "Done.", [], [{"ls": "{}"}, {"pwd": "{}"}]]
    assert decode_turn(steps, decode_function_calling) == [["cd(folder='a')"],
                                                           ["ls()", "pwd()"]]
    assert decode_turn(["no calls here", "[]"], decode_prompting) == []
