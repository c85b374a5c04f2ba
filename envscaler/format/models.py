"""Pydantic models of the files of an environment folder: ``env.json`` and ``scenarios.jsonl``.

They check shape only; rules across files (hash, tools, check functions, solutions) are the
loader's.
Every model forbids unknown keys so a typo in a hand-edited file is an error, not silently dropped.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from envscaler.format.requirements import pins_problem

ENV_ID_PATTERN = r"^[a-z0-9][a-z0-9_\-]{0,63}$"
SCENARIO_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"
CONTENT_HASH_PATTERN = r"^sha256:[0-9a-f]{64}$"
CLASS_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
DATA_FILE_PATTERN = r"^[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,127}\.json$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Optional(_Strict):
    """A model whose optional extensions of the format (``_OPTIONAL``) are written only when set,
    so files that do not use them keep their bytes (and env.json its content as synced)."""

    _OPTIONAL: tuple[str, ...] = ()

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in self._omitted(data):
            data.pop(name, None)
        return data

    def _omitted(self, data: dict[str, Any]) -> list[str]:
        return [name for name in self._OPTIONAL if data.get(name) is None]


def _instant(value: str | None) -> str | None:
    """An ISO 8601 date-time (naive means UTC), checked here so that a sandbox never refuses it."""
    if value is not None:
        datetime.fromisoformat(value)
    return value


class StateEntity(_Strict):
    """One entity of the state space, e.g. ``Loan`` with its attributes in prose."""

    entity: str
    attributes: str
    description: str


class Operation(_Strict):
    """One operation of the environment; each is implemented by the public method of that name."""

    name: str
    description: str
    type: Literal["query", "state_change"]


class Provenance(_Strict):
    """Where an environment came from; ``content_hash`` pins the manifest to the env.py bytes."""

    model: str
    created: str
    pipeline_version: str
    content_hash: str = Field(pattern=CONTENT_HASH_PATTERN)

    @field_validator("created")
    @classmethod
    def _iso_date(cls, value: str) -> str:
        date.fromisoformat(value)  # ValueError becomes a validation error naming the field
        return value


class EnvManifest(_Optional):
    """``env.json``: what an environment is, its rules and its tools (derived from env.py).

    ``clock_start``: where the virtual clock starts for this environment's sessions (ISO 8601
    date-time; default 2025-01-01T09:00:00Z), unless the scenario sets its own.
    ``requirements``: the third-party packages its code imports, exact pins only; the sandbox
    image for the set is built once with them installed (envscaler/sandbox/requirements_image.py).
    """

    _OPTIONAL = ("clock_start", "requirements")

    id: str = Field(pattern=ENV_ID_PATTERN)
    class_name: str = Field(pattern=CLASS_NAME_PATTERN)
    summary: str
    introduction: str
    state_space: list[StateEntity]
    constraint_rules: list[str]
    operations: list[Operation]
    tools: list[dict[str, Any]]
    provenance: Provenance
    clock_start: str | None = None
    requirements: list[str] = Field(default_factory=list)

    _clock_start = field_validator("clock_start")(_instant)

    @field_validator("requirements")
    @classmethod
    def _exact_pins(cls, requirements: list[str]) -> list[str]:
        problem = pins_problem(requirements)
        if problem is not None:
            raise ValueError(problem)
        return requirements

    def _omitted(self, data: dict[str, Any]) -> list[str]:
        """The unset extensions, and ``requirements`` when there are none."""
        return [name for name in self._OPTIONAL if not data.get(name)]


class ChecklistItem(_Strict):
    """One independent "Has ..." item and the source of its ``check_func(final_state)``."""

    item: str
    check_func: str


class ToolCall(_Strict):
    """One call of a reference solution."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class UserTurn(_Strict):
    """One message of a scripted user and the reference calls that answer it."""

    user: str
    solution: list[ToolCall] | None = None


class Scenario(_Optional):
    """One line of ``scenarios.jsonl``: an initial state, a task, its checks and a solution.

    ``verified`` says the reference solution was replayed and made every check pass; only a
    scenario without a solution (e.g. imported from the EnvScaler release) may be unverified.
    ``clock_start`` (ISO 8601 date-time) overrides the environment's.

    ``init_data``: a file of the environment's ``data/`` folder (a JSON object, e.g. a shop's
    whole database) that many scenarios share; ``init_config`` is then a JSON merge patch (RFC
    7386) of this scenario's changes on top of it, and the database is read, held and sent once
    rather than once per scenario line.

    ``turns``: a user who speaks several times (as in BFCL multi-turn): the user's messages in
    order, the first being ``task``, each with the reference calls that answer it. The file then
    has no ``solution`` of its own: it is the turns' calls in order, derived here, so whatever
    replays a solution replays a multi-turn one too (and it is not written back).
    """

    _OPTIONAL = ("clock_start", "turns", "init_data")

    id: str = Field(pattern=SCENARIO_ID_PATTERN)
    split: Literal["train", "rl", "eval"]
    task: str
    init_config: dict[str, Any]
    checklist: list[ChecklistItem] = Field(min_length=1)
    solution: list[ToolCall] | None = None
    verified: bool = True
    clock_start: str | None = None
    turns: list[UserTurn] | None = Field(None, min_length=1)
    init_data: str | None = Field(None, pattern=DATA_FILE_PATTERN)

    _clock_start = field_validator("clock_start")(_instant)

    @field_validator("task")
    @classmethod
    def _not_blank(cls, task: str) -> str:
        if not task.strip():
            raise ValueError("must not be blank")
        return task

    @field_validator("verified")
    @classmethod
    def _unverified_only_without_solution(cls, verified: bool, info: ValidationInfo) -> bool:
        if not verified and info.data.get("solution") is not None:
            raise ValueError("may be false only when there is no solution")
        return verified

    @model_validator(mode="after")
    def _solution_of_the_turns(self) -> Scenario:
        if self.turns is None:
            return self
        if self.solution is not None:
            raise ValueError("a scenario with turns has its solutions in its turns, not in "
                             "solution")
        if self.turns[0].user != self.task:
            raise ValueError("the first turn's user message must be the task")
        solved = [turn.solution is not None for turn in self.turns]
        if any(solved) and not all(solved):
            raise ValueError("either every turn has a solution or none has")
        if all(solved):
            if not self.verified:
                raise ValueError("verified may be false only when there is no solution")
            self.solution = [call for turn in self.turns for call in turn.solution or ()]
        return self

    def _omitted(self, data: dict[str, Any]) -> list[str]:
        derived = ["solution"] if self.turns is not None else []
        return super()._omitted(data) + derived
