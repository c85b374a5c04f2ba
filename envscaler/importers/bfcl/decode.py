"""A model's step in a BFCL result file, decoded into call texts as BFCL's evaluation decodes it
(``handler.decode_execute``, here the OpenAI handlers' two decoders), so that a step counts as
BFCL counts it: a function-calling model's step is a list of ``{function_name: arguments}``
(`decode_function_calling`, BFCL's ``convert_to_function_call``), a prompting model's step is
text such as ``[f(a=1), g(b='x')]`` (`decode_prompting`, BFCL's
``default_decode_execute_prompting``). A step that does not decode raises `DecodeError`; BFCL
then leaves the step out, as `decode_turn` does.

BFCL's quirks are kept, since they decide verdicts: positional arguments of a prompting model's
call are dropped, a unary operator is a negation, a call without keywords as an argument is its
text, ``{}`` as an argument makes the step undecodable. Nothing is evaluated: where BFCL
``eval``s an argument (a binary operation), only arithmetic on number and text literals is
computed here (within bounds); any other is undecodable (BFCL would run it).
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable
from typing import Any

FUNCTION_CALLING, PROMPTING = "fc", "prompting"
_ARITHMETIC: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow}
MAX_OPERAND = 10**12  # arithmetic on larger literals is not computed (undecodable)
MAX_EXPONENT = 64
MAX_TEXT = 10_000  # characters a text repetition may make


class DecodeError(ValueError):
    """A step that BFCL's decoder would fail on."""


def decode_function_calling(step: Any) -> list[str]:
    """BFCL's ``convert_to_function_call``: each ``{name: arguments}`` (arguments an object, or
    its JSON text) as ``name(k=repr(v),...)``."""
    calls = [step] if type(step) is dict else step
    if not isinstance(calls, list):
        raise DecodeError("not a list of {function_name: arguments}")
    texts = []
    for call in calls:
        if not isinstance(call, dict):
            raise DecodeError(f"{call!r} is not a {{function_name: arguments}} object")
        for name, arguments in call.items():
            if type(arguments) is str:
                try:
                    arguments = json.loads(arguments)
                except ValueError as exc:
                    raise DecodeError(f"the arguments of {name} are not JSON: {exc}") from None
            if not isinstance(arguments, dict):
                raise DecodeError(f"the arguments of {name} are not an object")
            written = ",".join(f"{key}={value!r}" for key, value in arguments.items())
            texts.append(f"{name}({written})")
    return texts


def decode_prompting(step: Any) -> list[str]:
    """BFCL's ``default_decode_execute_prompting``: the text, wrapped in ``[...]`` when it is not,
    parsed as a list of Python calls, each written back as ``name(k=v, ...)``."""
    if not isinstance(step, str):
        raise DecodeError("not text")
    text = step.strip("`\n ")
    text = ("" if text.startswith("[") else "[") + text + ("" if text.endswith("]") else "]")
    try:
        body = ast.parse(text.strip().strip("'"), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise DecodeError(f"not Python: {exc}") from None
    elements = [body] if isinstance(body, ast.Call) else getattr(body, "elts", None)
    if elements is None:
        raise DecodeError("not a list of calls")
    texts = []
    for element in elements:
        if not isinstance(element, ast.Call):
            raise DecodeError(f"{ast.unparse(element)} is not a call")
        texts.extend(_call_text(name, arguments) for name, arguments in _call(element).items())
    return texts


DECODERS: dict[str, Callable[[Any], list[str]]] = {FUNCTION_CALLING: decode_function_calling,
                                                   PROMPTING: decode_prompting}


def decode_turn(steps: list[Any], decoder: Callable[[Any], list[str]]) -> list[list[str]]:
    """A turn's decoded steps, as BFCL's evaluation keeps them: a step that does not decode, or
    decodes to no call, is left out."""
    decoded = []
    for step in steps:
        try:
            calls = decoder(step)
        except DecodeError:
            continue
        if calls:
            decoded.append(calls)
    return decoded


def _call(node: ast.Call) -> dict[str, dict[Any, Any]]:
    """BFCL's ``resolve_ast_call``: ``{dotted name: {keyword: value}}`` (positional arguments
    are dropped)."""
    parts = []
    func: ast.expr = node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return {".".join(reversed(parts)): {keyword.arg: _value(keyword.value)
                                        for keyword in node.keywords}}


def _value(node: ast.expr) -> Any:
    """BFCL's ``resolve_ast_by_type``, without its ``eval``."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        if not isinstance(node.operand, ast.Constant):
            raise DecodeError(f"{ast.unparse(node)}: BFCL negates the operand's value")
        try:
            return -node.operand.value
        except TypeError:
            raise DecodeError(f"{ast.unparse(node)} cannot be negated") from None
    if isinstance(node, ast.List):
        return [_value(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise DecodeError("a ** in a dict")
        return {_value(key): _value(item)  # type: ignore[arg-type]
                for key, item in zip(node.keys, node.values, strict=True)}
    if isinstance(node, ast.BinOp):
        return _arithmetic(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return ast.unparse(node) if not node.keywords else _call(node)
    if isinstance(node, ast.Tuple):
        return tuple(_value(item) for item in node.elts)
    if isinstance(node, ast.Subscript):
        return f"{ast.unparse(node.value)}[{ast.unparse(node.slice)}]"
    raise DecodeError(f"unsupported argument {ast.unparse(node)}")


def _arithmetic(node: ast.expr) -> Any:
    """What ``eval`` gives for a binary operation on number or text literals; anything else is
    undecodable here."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, str):
        if not isinstance(node.value, str) and abs(node.value) > MAX_OPERAND:
            raise DecodeError(f"{node.value} is too large to compute here")
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _arithmetic(node.operand)
        if isinstance(value, str):
            raise DecodeError(f"{ast.unparse(node)} is not arithmetic")
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        if not _bounded(node.op, left, right):
            raise DecodeError(f"{ast.unparse(node)} is not computed here")
        try:
            return _ARITHMETIC[type(node.op)](left, right)
        except (TypeError, ZeroDivisionError) as exc:
            raise DecodeError(f"{ast.unparse(node)}: {exc}") from None
    raise DecodeError(f"{ast.unparse(node)} is computed by BFCL with eval, which is not run here")


def _bounded(op: ast.operator, left: Any, right: Any) -> bool:
    """Whether computing ``left op right`` stays small: a text only added to, or repeated up to
    `MAX_TEXT` characters; a power only up to `MAX_EXPONENT`."""
    texts = [value for value in (left, right) if isinstance(value, str)]
    if isinstance(op, ast.Mult) and len(texts) == 1:
        times = right if texts[0] is left else left
        return isinstance(times, int) and len(texts[0]) * times <= MAX_TEXT
    if texts:
        return isinstance(op, ast.Add)
    return not isinstance(op, ast.Pow) or abs(right) <= MAX_EXPONENT


def _call_text(name: str, arguments: dict[Any, Any]) -> str:
    """BFCL's ``decoded_output_to_execution_list`` for one call."""
    return f"{name}({', '.join(f'{key}={_nested(value)}' for key, value in arguments.items())})"


def _nested(value: Any) -> str:
    """BFCL's ``parse_nested_value``: a dict of dicts is a nested call (``{}`` too, which BFCL
    fails on), another dict is written out, anything else is its ``repr``."""
    if isinstance(value, dict):
        if all(isinstance(item, dict) for item in value.values()):
            if not value:
                raise DecodeError("{} as an argument")
            name, arguments = next(iter(value.items()))
            return _call_text(str(name), arguments)
        return "{" + ", ".join(f"'{key}': {_nested(item)}" for key, item in value.items()) + "}"
    return repr(value)
