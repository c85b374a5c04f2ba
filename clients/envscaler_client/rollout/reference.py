"""The ``reference`` policy: a scenario's reference solution replayed, no model at all.

The gateway never exposes solutions, so they are read from the catalogue's files on disk
(``<catalogue>/<env>/scenarios.jsonl``, one scenario a line, its ``solution`` a list of
``{"name", "arguments"}``) with plain ``json``: the client does not depend on the service's
``envformat`` package.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envscaler_client.rollout.policy import Message

FINAL_MESSAGE = "Task Completed."


class CatalogueError(Exception):
    """The catalogue's files are missing or unreadable."""


def load_solutions(catalogue: str | Path, env: str) -> dict[str, list[dict[str, Any]] | None]:
    """Scenario id -> its reference solution (None when it has none, e.g. ``verified: false``)."""
    path = Path(catalogue) / env / "scenarios.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CatalogueError(f"cannot read {path}: {exc.strerror or exc}") from exc
    solutions: dict[str, list[dict[str, Any]] | None] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            scenario = json.loads(line)
            scenario_id = scenario["id"]
        except (ValueError, KeyError, TypeError) as exc:
            raise CatalogueError(f"{path}:{number}: not a scenario: {exc}") from exc
        solution = scenario.get("solution")
        if isinstance(solution, list) and all(isinstance(step, Mapping) and "name" in step
                                              for step in solution):
            solutions[scenario_id] = [{"name": step["name"],
                                       "arguments": step.get("arguments") or {}}
                                      for step in solution]
        else:
            solutions[scenario_id] = None
    return solutions


class ReferencePolicy:
    """Replays ``solution`` one tool call per turn, then answers ``final_message``.

    Stateless: the next call is chosen by counting the assistant turns in ``messages``.
    """

    model = "reference"

    def __init__(self, solution: Sequence[Mapping[str, Any]],
                 final_message: str = FINAL_MESSAGE) -> None:
        self.solution = [dict(step) for step in solution]
        self.final_message = final_message

    async def __call__(self, messages: Sequence[Mapping[str, Any]],
                       tools: Sequence[Mapping[str, Any]] | None = None) -> Message:
        done = sum(1 for message in messages if message.get("role") == "assistant")
        if done >= len(self.solution):
            return {"role": "assistant", "content": self.final_message}
        step = self.solution[done]
        call = {"id": f"ref_{done + 1}", "type": "function",
                "function": {"name": step["name"],
                             "arguments": json.dumps(step.get("arguments") or {},
                                                     ensure_ascii=False)}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
