"""Typed results: the client's own copies of the gateway's response models (``envscaler/server/models.py``).

They are copies, not imports, so the client installs without the server. Every model keeps fields
it does not know (``extra="allow"``) and enumerations are plain strings, so a newer gateway that
adds a field or a status does not break an older client.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


# ---------------------------------------------------------------- health

class Health(_Model):
    ok: bool = True
    instance: str


class Component(_Model):
    ok: bool
    detail: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None


class PoolLevel(_Model):
    ready: int
    target: int
    live: int
    capacity: int


class Readiness(_Model):
    ready: bool
    instance: str
    isolation: str
    components: dict[str, Component]
    pool: PoolLevel | None = None


# ---------------------------------------------------------------- environments

class EnvSummary(_Model):
    id: str
    summary: str
    tools: int
    scenarios: int


class EnvList(_Model):
    envs: list[EnvSummary]


class EnvDetail(_Model):
    id: str
    class_name: str
    summary: str
    introduction: str
    state_space: Any = None
    constraint_rules: Any = None
    operations: Any = None
    tools: list[dict[str, Any]]
    provenance: Any = None
    clock_start: str | None = None
    scenarios: int


class ScenarioSummary(_Model):
    id: str
    split: str
    task: str
    turns: list[str] | None = None
    """A scripted user's messages in order, the first being the task (multi-turn only)."""


class ScenarioList(_Model):
    env: str
    scenarios: list[ScenarioSummary]


# ---------------------------------------------------------------- sessions

class SessionCreated(_Model):
    session_id: str
    env: str
    scenario: str | None = None
    seed: int = 0
    task: str | None = None
    tools: list[dict[str, Any]]
    agent_token: str
    status: str = "active"
    created: float | None = None
    epoch: int = 0
    step: int = 0


class ForkResult(_Model):
    parent: str
    sessions: list[SessionCreated]


class SnapshotTaken(_Model):
    snapshot_id: str
    session_id: str
    epoch: int
    step: int
    expires_in: float


class SessionInfo(_Model):
    session_id: str
    env: str
    scenario: str | None = None
    seed: int
    status: str
    epoch: int
    step: int
    calls: int
    sandbox_id: str | None = None
    owner: str | None = None
    created: float
    updated: float


class SessionTools(_Model):
    session_id: str
    env: str
    tools: list[dict[str, Any]]
    next_seq: int = 0  # absent from gateways that predate ordered calls


class ToolError(_Model):
    type: str
    message: str


class CallResult(_Model):
    """A tool's answer; ``ok=False`` is the tool failing, for the agent to see (no exception)."""

    ok: bool
    result: Any = None
    error: ToolError | None = None
    index: int
    call_id: str | None = None
    duplicate: bool = Field(False, description="True when the gateway had already run this call_id")
    duration_ms: float = 0.0


class SessionState(_Model):
    session_id: str
    epoch: int
    step: int
    state: dict[str, Any]


class TrajectoryEntry(_Model):
    index: int
    epoch: int
    kind: str = "call"
    call_id: str | None = None
    name: str | None = None
    arguments: dict[str, Any] | None = None
    ok: bool | None = None
    result: Any = None
    error: ToolError | None = None
    replay: bool | None = None
    scenario: str | None = None
    seed: int | None = None
    time: float
    duration_ms: float | None = None


class Trajectory(_Model):
    session_id: str
    env: str
    epoch: int
    entries: list[TrajectoryEntry]

    @property
    def calls(self) -> list[TrajectoryEntry]:
        """The tool calls, without reset markers."""
        return [entry for entry in self.entries if entry.kind == "call"]


class ResetResult(_Model):
    session_id: str
    epoch: int
    scenario: str | None = None
    seed: int
    task: str | None = None
    sandbox_reused: bool = False


class CheckResult(_Model):
    item: str
    passed: bool
    error: str | None = None


class Validation(_Model):
    session_id: str
    scenario: str
    reward: float
    passed: int
    total: int
    checks: list[CheckResult]


class SessionClosed(_Model):
    session_id: str
    status: str
