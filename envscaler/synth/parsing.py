"""Reading model replies: fenced JSON validated by a pydantic model, fenced Python code.

Every failure raises ``ParseError`` with a message meant for the model (it is sent back on the next
attempt) and for the run report.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from envscaler.synth.llm import ParseError

M = TypeVar("M", bound=BaseModel)
_FENCE = re.compile(r"```[ \t]*(?P<lang>[A-Za-z0-9_+-]*)[ \t]*\n(?P<body>.*?)(?:\n[ \t]*```|\Z)",
                    re.DOTALL)


def fenced_blocks(text: str, languages: tuple[str, ...]) -> list[str]:
    """Bodies of the fenced blocks whose language is one of ``languages`` ("" = unlabelled)."""
    return [match.group("body") for match in _FENCE.finditer(text)
            if match.group("lang").lower() in languages]


def json_value(text: str) -> Any:
    """The JSON value of the last ```json block, of the whole reply, or of its outermost braces."""
    candidates = fenced_blocks(text, ("json", ""))[::-1]
    stripped = text.strip()
    candidates.append(stripped)
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        candidates.append(stripped[start:end + 1])
    error = "the reply contains no JSON"
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError as exc:
            if candidate.lstrip().startswith(("{", "[")) and error.endswith("no JSON"):
                error = f"the JSON does not parse: {exc}"
    raise ParseError(f"{error}; put the JSON object in a ```json block")


def json_reply(text: str, model: type[M]) -> M:
    """The reply's JSON validated by ``model``."""
    data = json_value(text)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ParseError(describe_validation_error(exc)) from None


def describe_validation_error(exc: ValidationError, limit: int = 4) -> str:
    parts = []
    for error in exc.errors(include_url=False)[:limit]:
        where = ".".join(str(part) for part in error["loc"]) or "the object"
        parts.append(f"{where}: {error['msg']}")
    more = len(exc.errors()) - limit
    return "invalid reply: " + "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def python_reply(text: str) -> str:
    """The code of the last ```python block (dedented), which must parse."""
    blocks = fenced_blocks(text, ("python", "py", "python3"))
    if not blocks:
        raise ParseError("the reply has no ```python block")
    code = textwrap.dedent(blocks[-1]).strip("\n") + "\n"
    try:
        ast.parse(code)
    except SyntaxError as exc:
        raise ParseError(f"the code does not parse: {exc.msg} (line {exc.lineno})") from None
    return code
