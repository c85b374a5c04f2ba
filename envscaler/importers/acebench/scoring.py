"""ACEBench's end-to-end verdict for given call sequences, through a gateway serving the
imported environments: each line's calls are sent to a session of its question's scenario in
order (a call that fails is the agent's failed action, as in ACEBench's execution) and the
scenario's check gives ACEBench's verdict (1.0 valid, 0.0 not).

A line: ``{"id": "agent_multi_step_0", "calls": [{"name": ..., "arguments": {...}}]}``. The
environment of a question is found from the catalogue's scenarios.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field

from envscaler.format.loader import FormatError, load_catalogue
from envscaler.importers.acebench.importer import PIPELINE_PREFIX
from envscaler.importers.replay_score import AnswerModel, AnswersFileError, Score, read_answers, score_calls


class CallsFileError(AnswersFileError):
    """A calls file that cannot be read, or a question no imported environment holds."""


class CallRecord(AnswerModel):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class CallsLine(AnswerModel):
    id: str = Field(min_length=1)
    calls: list[CallRecord]


def read_calls(path: Path) -> list[CallsLine]:
    """Every line of ``path``; one case twice is an error (its key would be ambiguous)."""
    return read_answers(path, CallsLine, lambda line: line.id)


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
