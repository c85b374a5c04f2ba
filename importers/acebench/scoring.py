"""ACEBench's end-to-end verdict for given call sequences, through a gateway serving the
imported environments: each line's calls are sent to a session of its question's scenario in
order (a call that fails is the agent's failed action, as in ACEBench's execution) and the
scenario's check gives ACEBench's verdict (1.0 valid, 0.0 not).

A line: ``{"id": "agent_multi_step_0", "calls": [{"name": ..., "arguments": {...}}]}``. The
environment of a question is found from the catalogue's scenarios.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envformat.loader import FormatError, load_catalogue
from importers.acebench.importer import PIPELINE_PREFIX
from importers.replay_score import Score, score_calls


class CallsFileError(ValueError):
    """A calls file that cannot be read, or a question no imported environment holds."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CallRecord(_Strict):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class CallsLine(_Strict):
    id: str = Field(min_length=1)
    calls: list[CallRecord]


def read_calls(path: Path) -> list[CallsLine]:
    """Every line of ``path``; one question twice is an error."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CallsFileError(f"{path}: cannot read: {exc}") from None
    lines: dict[str, CallsLine] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = CallsLine.model_validate(json.loads(raw))
        except json.JSONDecodeError as exc:
            raise CallsFileError(f"{path}:{number}: not JSON: {exc.msg}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "line"
            raise CallsFileError(f"{path}:{number}: {where}: {first['msg']}") from None
        if line.id in lines:
            raise CallsFileError(f"{path}:{number}: {line.id} is scored twice")
        lines[line.id] = line
    if not lines:
        raise CallsFileError(f"{path}: no call sequence in it")
    return list(lines.values())


def question_envs(catalogue: Path) -> dict[str, str]:
    """Each imported ACEBench question's environment, from the catalogue."""
    try:
        envs = load_catalogue(catalogue).envs
    except FormatError as exc:
        raise CallsFileError(str(exc)) from None
    return {scenario.id: env_id for env_id, env in envs.items()
            if env.manifest.provenance.pipeline_version.startswith(PIPELINE_PREFIX)
            for scenario in env.scenarios}


def score_all(client: Any, lines: list[CallsLine], envs: dict[str, str],
              progress: Callable[[int, int], None] | None = None) -> list[Score]:
    scores = []
    for done, line in enumerate(lines, start=1):
        if line.id not in envs:
            scores.append(Score(line.id, None, "no imported ACEBench question has this id"))
        else:
            scores.append(score_calls(client, line.id, envs[line.id], line.id,
                                      ((call.name, call.arguments) for call in line.calls)))
        if progress is not None:
            progress(done, len(lines))
    return scores


__all__ = ["CallsFileError", "CallsLine", "question_envs", "read_calls", "score_all"]
