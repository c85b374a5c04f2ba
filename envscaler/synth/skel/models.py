"""Pydantic models of the SkelBuilder's model replies (unknown keys are ignored: models add some)."""

from __future__ import annotations

import keyword
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class TaskJudgement(_Reply):
    reason: str = ""
    needs_environment: bool


class Topic(_Reply):
    summary: str = Field(min_length=3, max_length=160)
    introduction: str = Field(min_length=10)
    usefulness: int = Field(ge=1, le=10)
    modelability: int = Field(ge=1, le=10)


class Entity(_Reply):
    entity: str = Field(min_length=1)
    attributes: str
    description: str = ""

    @field_validator("attributes", mode="before")
    @classmethod
    def _join(cls, value: Any) -> Any:
        if isinstance(value, list):
            return ", ".join(str(item) for item in value)
        return value


class StateDesign(_Reply):
    entities: list[Entity] = Field(min_length=1, max_length=12)
    rules: list[str] = Field(default_factory=list)


class OperationSpec(_Reply):
    name: str
    description: str = Field(min_length=1)
    type: Literal["query", "state_change"]

    @field_validator("type", mode="before")
    @classmethod
    def _normalise_type(cls, value: Any) -> Any:
        return value.strip().lower().replace("-", "_").replace(" ", "_") \
            if isinstance(value, str) else value

    @field_validator("name")
    @classmethod
    def _snake_case(cls, name: str) -> str:
        if not _SNAKE.match(name) or keyword.iskeyword(name):
            raise ValueError(f"{name!r} is not a snake_case method name")
        return name


class OperationList(_Reply):
    operations: list[OperationSpec]

    @model_validator(mode="after")
    def _distinct_and_mixed(self) -> OperationList:
        names = [operation.name for operation in self.operations]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"duplicate operation names: {', '.join(duplicates)}")
        kinds = {operation.type for operation in self.operations}
        if kinds != {"query", "state_change"}:
            raise ValueError("the list needs both query and state_change operations")
        return self


class CallChoice(_Reply):
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    case: Literal["positive", "negative"] = "positive"
    purpose: str = ""

    @field_validator("case", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class CheckerVerdict(_Reply):
    verdict: Literal["pass", "warning", "fail"]
    reason: str = ""

    @field_validator("verdict", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value
