"""A benchmark's answer scored through a gateway: its calls sent to a session of the imported
scenario in order, each failure of a call (a tool that raises, an unknown tool, arguments its
schema refuses) taken as the agent's failed action, as the benchmarks take them, and the
scenario's checks run; and the JSONL files such answers come in. Shared by the `envscaler eval`
commands."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from envscaler_client import EnvClient
from envscaler_client.errors import EnvScalerError, InvalidArgumentsError, NotFoundError
from pydantic import BaseModel, ConfigDict, ValidationError

AGENT_FAILURES = ("UnknownTool", "InvalidArguments")
Line = TypeVar("Line", bound=BaseModel)


class AnswerModel(BaseModel):
    """A line of an answers file, or a part of one: an unknown key is an error, not dropped."""

    model_config = ConfigDict(extra="forbid")


class AnswersFileError(ValueError):
    """An answers file that cannot be read: ``file:line: field: reason``."""


def read_answers(path: Path, model: type[Line], key: Callable[[Line], str]) -> list[Line]:
    """Every line of the JSONL file ``path`` as a ``model``; a case (``key``) twice is an error,
    as is a file without any."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AnswersFileError(f"{path}: cannot read: {exc}") from None
    lines: dict[str, Line] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = model.model_validate(json.loads(raw))
        except json.JSONDecodeError as exc:
            raise AnswersFileError(f"{path}:{number}: not JSON: {exc.msg}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "line"
            raise AnswersFileError(f"{path}:{number}: {where}: {first['msg']}") from None
        if key(line) in lines:
            raise AnswersFileError(f"{path}:{number}: {key(line)} is scored twice")
        lines[key(line)] = line
    if not lines:
        raise AnswersFileError(f"{path}: no answer in it")
    return list(lines.values())


@dataclass(frozen=True)
class Score:
    """One answer's outcome: 1.0 when every check passed, else 0.0; None with ``error`` when it
    could not be scored (an error of the gateway, not of the answer's calls)."""

    key: str
    reward: float | None
    error: str | None = None


def score_calls(client: EnvClient, key: str, env: str, scenario: str,
                calls: Iterable[tuple[str, dict[str, Any]]]) -> Score:
    try:
        with client.create_session(env, scenario=scenario) as session:
            for name, arguments in calls:
                try:
                    session.call(name, arguments)
                except (NotFoundError, InvalidArgumentsError) as exc:
                    if exc.type not in AGENT_FAILURES:
                        raise
            validation = session.validate()
    except EnvScalerError as exc:
        return Score(key, None, str(exc))
    return Score(key, 1.0 if validation.passed == validation.total else 0.0)


__all__ = ["AnswerModel", "AnswersFileError", "Score", "read_answers", "score_calls"]
