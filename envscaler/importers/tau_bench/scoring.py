"""tau-bench's reward for given action sequences, through a gateway serving the imported
environments: each line's actions are sent to a session of its task's scenario as tau's
``Env.step`` would run them, the outputs first (order does not matter to the reward) and the
actions up to the first that ends tau's episode (``transfer_to_human_agents``: tau computes the
reward there; a ``respond`` records a message to the user; an unknown tool or
arguments its schema refuses are the agent's failed action, as tau's ``Error: ...`` observation
is), each of its outputs is sent as a ``respond``, and the scenario's check gives tau's reward.

A line: ``{"task_id": 0, "env": "retail", "actions": [{"name", "kwargs"}], "outputs": [...]}``,
``task_id`` the index in tau's test split, ``outputs`` the agent's messages to the user.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from envscaler_client import EnvClient
from pydantic import Field

from envscaler.format.loader import ENV_SOURCE
from envscaler.importers.replay_score import AnswerModel, AnswersFileError, Score, read_answers, score_calls
from envscaler.importers.tau_bench.checkout import DOMAINS, RESPOND
from envscaler.importers.tau_bench.envcode import TERMINATE
from envscaler.importers.tau_bench.importer import env_id, scenario_id


class ActionsFileError(AnswersFileError):
    """An actions file that cannot be read: ``file:line: field: reason``."""


class ActionRecord(AnswerModel):
    name: str = Field(min_length=1)
    kwargs: dict[str, Any] = Field(default_factory=dict)


class ActionsLine(AnswerModel):
    task_id: int = Field(ge=0)
    env: Literal[DOMAINS]  # type: ignore[valid-type]
    actions: list[ActionRecord]
    outputs: list[str] = Field(default_factory=list)

    @property
    def key(self) -> str:
        return scenario_id(self.env, self.task_id)


def read_actions(path: Path) -> list[ActionsLine]:
    """Every line of ``path``; one case twice is an error (its key would be ambiguous)."""
    return read_answers(path, ActionsLine, lambda line: line.key)


def terminate_tools(catalogue: Path, domain: str) -> tuple[str, ...]:
    """The tools at which tau ends an episode, as the import wrote them into the env.py of
    ``domain`` (read with ``ast``, never run)."""
    path = catalogue / env_id(domain) / ENV_SOURCE
    try:
        module = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise ActionsFileError(f"{path}: cannot read the imported environment: {exc}") from None
    for node in module.body:
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == TERMINATE and node.value is not None):
            return tuple(ast.literal_eval(node.value))
    raise ActionsFileError(f"{path}: no {TERMINATE}: not imported by envscaler import tau-bench")


def score(client: EnvClient, line: ActionsLine, terminate: tuple[str, ...]) -> Score:
    """tau's reward for one line; an error of the gateway (not of the agent's actions) leaves it
    unscored, with the error."""
    return score_calls(client, line.key, env_id(line.env), line.key,
                       ((step.name, step.kwargs) for step in _steps(line, terminate)))


def _steps(line: ActionsLine, terminate: tuple[str, ...]) -> Iterator[ActionRecord]:
    for output in line.outputs:
        yield ActionRecord(name=RESPOND, kwargs={"content": output})
    for action in line.actions:
        yield action
        if action.name in terminate:
            return


def score_all(client: EnvClient, lines: list[ActionsLine], ending: dict[str, tuple[str, ...]],
              progress: Callable[[int, int], None] | None = None) -> list[Score]:
    """Every line's score; ``ending``: each domain's ``terminate_tools``."""
    scores = []
    for done, line in enumerate(lines, start=1):
        scores.append(score(client, line, ending[line.env]))
        if progress is not None:
            progress(done, len(lines))
    return scores


__all__ = ["ActionsFileError", "ActionsLine", "Score", "read_actions", "score", "score_all",
           "terminate_tools"]
