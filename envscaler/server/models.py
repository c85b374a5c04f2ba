"""Request and response models of the gateway API (v1); they are what the OpenAPI document shows.

Timestamps are unix times in seconds (floats). Tool schemas are OpenAI function schemas
(``{"type": "function", "function": {"name", "description", "parameters"}}``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from envscaler.server import strictjson
from envscaler.server.auth import SESSION_ID_PATTERN

SessionStatus = Literal["active", "expired", "closed"]

TOOL_EXAMPLE = {
    "type": "function",
    "function": {
        "name": "borrow_book",
        "description": "Lend a copy of a book to a member.",
        "parameters": {
            "type": "object",
            "properties": {"member_id": {"type": "string"}, "book_id": {"type": "string"}},
            "required": ["member_id", "book_id"],
        },
    },
}


def _strict_init_config(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """NaN, Infinity and lone surrogates can be neither stored nor sent to a sandbox."""
    if value is not None and (found := strictjson.problem(value)) is not None:
        path, reason = found
        raise ValueError(f"{path}: {reason}" if path else reason)
    return value


# ---------------------------------------------------------------- errors


class ErrorDetail(BaseModel):
    type: str = Field(
        description="Stable error type, e.g. UnknownSession, InvalidArguments, Timeout",
        examples=["InvalidArguments"],
    )
    message: str = Field(
        description="What went wrong, for humans",
        examples=["member_id: 42 is not of type 'string'"],
    )
    field: str | None = Field(
        None, description="The input field to blame, as a dotted path", examples=["member_id"]
    )


class ErrorResponse(BaseModel):
    ok: Literal[False] = False
    error: ErrorDetail


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: each listed status answers an `ErrorResponse`."""
    descriptions = {
        401: "Unauthorized: no valid API key or agent token",
        403: "Forbidden: an agent token used outside its session's tools",
        404: "UnknownEnv, UnknownScenario, UnknownSession or UnknownTool",
        409: "SessionClosed, NoChecklist for validation, or StateTooLarge",
        410: "SessionExpired: idle longer than the session TTL",
        413: "RequestTooLarge, ArgumentsTooLarge, or QuotaExceeded (the session's calls, "
        "trajectory bytes or result bytes: open a new session)",
        415: "UnsupportedMediaType: a body that is not application/json",
        422: "InvalidRequest, InvalidArguments or JsonTooComplex, with the field to blame",
        429: "CapacityExhausted: every sandbox slot is taken (Retry-After)",
        500: "InternalError (details only in the server log); on validate, CheckExhausted: a "
        "check ran out of its CPU time or memory, so no reward was computed (not retryable)",
        503: "CapacityExhausted (sandbox creation rate, no free checker), BackendUnavailable, "
        "SessionBusy or ChecksStarved (Retry-After)",
        504: "Timeout: the tool exceeded its deadline; the session stays usable",
    }
    return {
        status: {"model": ErrorResponse, "description": descriptions[status]} for status in statuses
    }


# ---------------------------------------------------------------- health


class Health(BaseModel):
    ok: bool = True
    instance: str = Field(description="This gateway process's id")


class Component(BaseModel):
    ok: bool
    detail: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None


class PoolLevel(BaseModel):
    ready: int = Field(description="Warm sandboxes waiting to be claimed")
    target: int = Field(description="Warm pool target size")
    live: int = Field(description="Sandboxes of this gateway that exist")
    capacity: int = Field(description="Most sandboxes this gateway may run")


class Readiness(BaseModel):
    ready: bool
    instance: str
    isolation: str = Field(description="container, gvisor or process", examples=["container"])
    components: dict[str, Component] = Field(description="redis and sandbox_backend")
    pool: PoolLevel


# ---------------------------------------------------------------- environments


class EnvSummary(BaseModel):
    id: str = Field(examples=["library_loans"])
    summary: str
    tools: int = Field(description="Number of tools")
    scenarios: int = Field(description="Number of scenarios")


class EnvList(BaseModel):
    envs: list[EnvSummary]


class EnvDetail(BaseModel):
    id: str
    class_name: str
    summary: str
    introduction: str
    state_space: Any = Field(None, description="State entities and their attributes")
    constraint_rules: Any = Field(None, description="Rules the environment enforces")
    operations: Any = Field(None, description="Operations, each a query or a state change")
    tools: list[dict[str, Any]] = Field(
        description="OpenAI function schemas", examples=[[TOOL_EXAMPLE]]
    )
    provenance: Any = None
    clock_start: str | None = Field(
        None, description="ISO 8601 start of the virtual clock, unless a scenario sets its own "
        "(null: the default, 2025-01-01T09:00:00Z)")
    scenarios: int


class ScenarioSummary(BaseModel):
    id: str
    split: str
    task: str
    turns: list[str] | None = Field(
        None, description="A scripted user's messages in order, the first being the task "
        "(multi-turn scenarios only): each is sent once the agent has answered the one before")


class ScenarioList(BaseModel):
    env: str
    scenarios: list[ScenarioSummary] = Field(description="Never the checks or solutions")


class ChecklistEntry(BaseModel):
    item: str = Field(description='What the check asserts ("Has ...?")')
    check_func: str = Field(description="Source of `check_func(final_state) -> bool`")


class ScenarioDetail(ScenarioSummary):
    env: str
    verified: bool = Field(description="True when the reference solution reaches reward 1.0")
    clock_start: str = Field(description="ISO 8601 start of the virtual clock in this scenario")
    checklist: list[ChecklistEntry] = Field(description="The checks that make the reward")


# ---------------------------------------------------------------- sessions


class CreateSession(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"env": "library_loans", "scenario": "library_loans-rl-0001", "seed": 0}]
        },
    )

    snapshot: str | None = Field(
        None, description="Open the session at a snapshot's point (`POST "
        "/v1/sessions/{id}/snapshot`), instead of a scenario or `init_config`",
        min_length=64, max_length=64, pattern="^[0-9a-f]{64}$")
    env: str | None = Field(None, description="Environment id (may be omitted with a "
                            "`snapshot`, which names its own)", min_length=1, max_length=200,
                            validate_default=True)
    scenario: str | None = Field(
        None, description="Scenario id; omit to start from `init_config`", max_length=200
    )
    init_config: dict[str, Any] | None = Field(
        None,
        description="Initial state when no scenario is given (default `{}`); no checklist then",
    )

    @field_validator("env")
    @classmethod
    def _env_or_snapshot(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and info.data.get("snapshot") is None:
            raise ValueError("env is required (or a snapshot)")
        return value

    @field_validator("scenario", "init_config")
    @classmethod
    def _not_with_a_snapshot(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and info.data.get("snapshot") is not None:
            raise ValueError("a snapshot is its own start: give no scenario or init_config")
        return value

    @field_validator("init_config")
    @classmethod
    def _strict_json(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return _strict_init_config(value)

    seed: int = Field(0, description="Seed of the environment's randomness", ge=0, le=2**63 - 1)


class ForkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True,
                              json_schema_extra={"examples": [{"count": 8}]})

    count: int = Field(1, ge=1, le=64, description="How many sessions to open at the point")


class SnapshotTaken(BaseModel):
    snapshot_id: str = Field(description="Open sessions there with `POST /v1/sessions "
                             "{\"snapshot\": ID}`, on any gateway of the same Redis")
    session_id: str
    epoch: int
    step: int
    expires_in: float = Field(description="Seconds it is kept from now; opening it renews that")


class SessionCreated(BaseModel):
    session_id: str = Field(pattern=SESSION_ID_PATTERN)
    env: str
    scenario: str | None
    seed: int
    task: str | None = Field(description="The scenario's task; null for a custom init_config")
    tools: list[dict[str, Any]] = Field(
        description="OpenAI function schemas", examples=[[TOOL_EXAMPLE]]
    )
    agent_token: str = Field(
        description="Bearer token that may only list and call this session's tools"
    )
    status: SessionStatus
    created: float
    epoch: int = Field(0, description="0 for a new session; a fork's or a snapshot's is its "
                       "origin's")
    step: int = Field(0, description="Tool calls of the current epoch so far (a fork's: its "
                      "parent's)")


class ForkResult(BaseModel):
    parent: str = Field(description="The session forked, which goes on")
    sessions: list[SessionCreated] = Field(description="The new sessions, each at the parent's "
                                           "point, each with its own agent token")


class SessionInfo(BaseModel):
    session_id: str
    env: str
    scenario: str | None
    seed: int
    status: SessionStatus
    epoch: int = Field(description="0 at creation, +1 per reset")
    step: int = Field(description="Tool calls recorded in the current epoch")
    calls: int = Field(description="Trajectory entries, all epochs (resets included)")
    sandbox_id: str | None = Field(description="The live sandbox, if any")
    owner: str
    created: float
    updated: float = Field(description="Last activity")


class SessionTools(BaseModel):
    session_id: str
    env: str
    tools: list[dict[str, Any]] = Field(examples=[[TOOL_EXAMPLE]])
    next_seq: int = Field(0, description="The `seq` of the episode's next ordered call")


MAX_CALL_FIELD_CHARS = 200  # a tool name or a call id (also NeMo Gym's tool path)
MAX_SEQ = 2**31 - 1  # a call's ``seq``


class CallRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "borrow_book",
                    "arguments": {"member_id": "M001", "book_id": "B002"},
                    "call_id": "c-1",
                },
                {"name": "borrow_book", "arguments": '{"member_id": "M001", "book_id": "B002"}'},
            ]
        },
    )

    name: str = Field(description="Tool name", min_length=1, max_length=MAX_CALL_FIELD_CHARS)
    arguments: dict[str, Any] | str = Field(
        default_factory=dict, description="An object, or a JSON string of one (models emit both)"
    )
    call_id: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_CALL_FIELD_CHARS,
        description="Client id of the call: a repeated id returns the stored "
        "result and executes nothing",
    )
    seq: int | None = Field(
        None,
        strict=True,  # a position: never a string or a boolean taken for one
        ge=0,
        le=MAX_SEQ,
        description="The call's position in its episode (0, 1, 2... from each open or reset): "
        "call n takes effect after calls 0..n-1, whatever order they arrive in (a turn's calls "
        "sent at once keep the model's order). A call whose turn passed answers 409 "
        "CallOutOfOrder; one waiting for calls that never come runs after "
        "ENVSCALER_CALL_ORDER_WAIT seconds of idle session",
    )


class ToolError(BaseModel):
    type: str = Field(
        description="ToolException, ArgumentError, ResultTooLarge, SandboxCrashed or Timeout"
    )
    message: str


class CallResult(BaseModel):
    ok: bool
    result: Any = Field(None, description="The tool's JSON result (when ok)")
    error: ToolError | None = Field(None, description="Why the tool failed (when not ok)")
    index: int = Field(description="Index of this call in the trajectory")
    call_id: str | None = None
    duplicate: bool = Field(
        False, description="True when `call_id` was seen before: nothing was executed"
    )
    duration_ms: float


class SessionState(BaseModel):
    session_id: str
    epoch: int
    step: int
    state: dict[str, Any] = Field(description="The environment's public attributes")


class TrajectoryEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    index: int
    epoch: int
    kind: Literal["call", "reset"] = "call"
    call_id: str | None = None
    name: str | None = None
    arguments: dict[str, Any] | None = None
    ok: bool | None = None
    result: Any = None
    error: ToolError | None = None
    replay: bool | None = Field(None, description="Re-executed when the session is rebuilt; "
                                "false for a call found to end its runtime, which then carries "
                                "`ended_runtime: true` (its effects died with its runtime)")
    scenario: str | None = Field(None, description="Reset markers: the new epoch's scenario")
    seed: int | None = Field(None, description="Reset markers: the new epoch's seed")
    time: float
    duration_ms: float | None = None


class Trajectory(BaseModel):
    session_id: str
    env: str
    epoch: int
    entries: list[TrajectoryEntry]


class ResetRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{}, {"seed": 7}, {"scenario": "library_loans-rl-0002"}]},
    )

    scenario: str | None = Field(
        None,
        description="Another scenario of the same env (default: the current one)",
        max_length=200,
    )
    init_config: dict[str, Any] | None = Field(
        None, description="A custom initial state instead of a scenario"
    )

    @field_validator("init_config")
    @classmethod
    def _strict_json(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return _strict_init_config(value)

    seed: int | None = Field(
        None, description="New seed (default: the current one)", ge=0, le=2**63 - 1
    )


class ResetResult(BaseModel):
    session_id: str
    epoch: int
    scenario: str | None
    seed: int
    task: str | None
    sandbox_reused: bool = Field(description="True when the live sandbox was reset in place")


class CheckResult(BaseModel):
    item: str
    passed: bool
    error: str | None = None


class Validation(BaseModel):
    session_id: str
    scenario: str
    reward: float = Field(description="passed / total, rounded to 4 places", ge=0, le=1)
    passed: int
    total: int
    checks: list[CheckResult]


class SessionClosed(BaseModel):
    session_id: str
    status: SessionStatus
