"""The ``reference`` policy: a scenario's reference solution replayed, no model at all.

The gateway never exposes solutions, so they are read from the catalogue's files on disk
(``<catalogue>/<env>/scenarios.jsonl``, one scenario a line, its ``solution`` a list of
``{"name", "arguments"}``, or a multi-turn scenario's ``turns`` each with its own ``solution``)
with plain ``json``: the client does not depend on the service's
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


Call = dict[str, Any]


def load_references(catalogue: str | Path, env: str) -> dict[str, list[list[Call]] | None]:
    """Scenario id -> its reference calls per user turn (one turn unless the scenario has
    ``turns``), None when it has none (e.g. ``verified: false``)."""
    path = Path(catalogue) / env / "scenarios.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CatalogueError(f"cannot read {path}: {exc.strerror or exc}") from exc
    references: dict[str, list[list[Call]] | None] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            scenario = json.loads(line)
            scenario_id = scenario["id"]
            turns = scenario.get("turns")
            solutions = ([scenario.get("solution")] if turns is None
                         else [turn.get("solution") for turn in turns])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CatalogueError(f"{path}:{number}: not a scenario: {exc}") from exc
        per_turn = [_calls(solution) for solution in solutions]
        references[scenario_id] = None if None in per_turn else per_turn  # type: ignore[assignment]
    return references


def load_solutions(catalogue: str | Path, env: str) -> dict[str, list[Call] | None]:
    """Scenario id -> its reference solution, every turn's calls in order (None when it has
    none, e.g. ``verified: false``)."""
    return {scenario_id: None if turns is None else [call for turn in turns for call in turn]
            for scenario_id, turns in load_references(catalogue, env).items()}


def _calls(solution: Any) -> list[Call] | None:
    if isinstance(solution, list) and all(isinstance(step, Mapping) and "name" in step
                                          for step in solution):
        return [{"name": step["name"], "arguments": step.get("arguments") or {}}
                for step in solution]
    return None


class ReferencePolicy:
    """Replays the reference calls of the user's current turn one per answer, then answers
    ``final_message``; the next user turn gets its own calls.

    Stateless: the turn is the number of user messages in ``messages`` (past the last turn, the
    last), the next call the number of assistant messages since that turn's user message.
    """

    model = "reference"

    def __init__(self, solution: Sequence[Mapping[str, Any]],
                 final_message: str = FINAL_MESSAGE) -> None:
        self.turns = [[dict(step) for step in solution]]
        self.final_message = final_message

    @classmethod
    def per_turn(cls, turns: Sequence[Sequence[Mapping[str, Any]]],
                 final_message: str = FINAL_MESSAGE) -> ReferencePolicy:
        """The policy of a multi-turn scenario: ``turns[i]`` answers the i-th user message."""
        policy = cls([], final_message)
        policy.turns = [[dict(step) for step in turn] for turn in turns] or [[]]
        return policy

    @property
    def solution(self) -> list[Call]:
        """Every turn's calls in order."""
        return [step for turn in self.turns for step in turn]

    async def __call__(self, messages: Sequence[Mapping[str, Any]],
                       tools: Sequence[Mapping[str, Any]] | None = None) -> Message:
        users = [index for index, message in enumerate(messages)
                 if message.get("role") == "user"]
        turn = min(max(len(users) - 1, 0), len(self.turns) - 1)
        since = users[turn] if users else 0
        done = sum(1 for message in messages[since:] if message.get("role") == "assistant")
        calls = self.turns[turn]
        if done >= len(calls):
            return {"role": "assistant", "content": self.final_message}
        step = calls[done]
        call = {"id": f"ref_{turn + 1}_{done + 1}" if len(self.turns) > 1 else f"ref_{done + 1}",
                "type": "function",
                "function": {"name": step["name"],
                             "arguments": json.dumps(step.get("arguments") or {},
                                                     ensure_ascii=False)}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
