"""Pydantic models of the ScenGenerator's model replies."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

MIN_TASK_WORDS = 20
MAX_CHECKLIST_ITEMS = 12


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class TaskReply(_Reply):
    task: str

    @field_validator("task")
    @classmethod
    def _long_enough(cls, task: str) -> str:
        words = len(task.split())
        if words < MIN_TASK_WORDS:
            raise ValueError(f"the task has {words} words; write at least {MIN_TASK_WORDS}")
        return task


class ChecklistReply(_Reply):
    items: list[str] = Field(min_length=1, max_length=MAX_CHECKLIST_ITEMS)

    @field_validator("items")
    @classmethod
    def _has_items(cls, items: list[str]) -> list[str]:
        for item in items:
            if not item.startswith("Has "):
                raise ValueError(f"every item must start with 'Has ': {item[:60]!r}")
        if len(set(items)) != len(items):
            raise ValueError("items must be distinct")
        return items


class SolutionCall(_Reply):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class SolutionReply(_Reply):
    calls: list[SolutionCall] = Field(min_length=1)
