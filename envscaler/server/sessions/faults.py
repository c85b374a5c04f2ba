"""What a sandbox failure means for a session, and what the gateway answers for it.

The one place where the sandbox layer's errors (`envscaler.sandbox.errors`) become trajectory entries and
API errors: every operation that talks to a sandbox classifies what it caught with `fault_of`,
recovers as the `Fault` says (forget a lost sandbox, rebuild a stale one), records a tool's error
with `recorded_error`, and raises anything else as `api_error` answers it.

The runtime names each error by ``error.type`` on its wire; the sandbox client keeps that name as
`RuntimeFault.kind`, and `recorded_error` is where it becomes the trajectory's (and so the API's)
``error.type`` again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from typing import Any

from envscaler.sandbox.checkers import CheckBudget, ChecksKilledChecker, ChecksStarved, Exhaustion
from envscaler.sandbox.errors import (
    CallTimeout,
    CapacityExhausted,
    RuntimeFault,
    SandboxError,
    SandboxGone,
)
from envscaler.server import statesize
from envscaler.server.errors import (
    ApiError,
    backend_unavailable,
    capacity_exhausted,
    env_load_failed,
    internal_error,
    invalid_request,
    not_found,
    retry_after,
    timeout,
)
from envscaler.server.metrics import Metrics
from envscaler.server.settings import Settings

log = logging.getLogger("envscaler.server.sessions")

STARVED_RETRY_AFTER = 2.0
NAMED_EXHAUSTIONS = 3  # exhausted checks named in a CheckExhausted message; the rest counted
ITEM_CHARS = 80  # of a check's item, in that message


class Step(Enum):
    """What the sandbox (or the checker) was asked to do when it failed."""

    CLAIM = "claim"  # a fresh sandbox from the pool
    LOAD = "load"  # an epoch's start, into a fresh sandbox (create, reset, rebuild)
    RESET = "reset"  # a live sandbox, back to a start in place
    CALL = "call"  # a tool call
    REPLAY = "replay"  # a recorded call, executed again by a rebuild
    READ = "read"  # the environment's state, or its snapshot for the checks
    CHECK = "check"  # the check functions, in a checker


@dataclass(frozen=True)
class Fault:
    """One kind of failure, by what it means for the session."""

    type: str  # its name: the runtime's ``error.type``, or the gateway's (Timeout, SandboxCrashed)
    recorded: bool = False  # under a tool call: the call's answer, recorded as ``ok: false``
    replayed: bool = False  # the tool ran: a rebuild executes the recorded call again
    stale: bool = False  # the sandbox does not hold the recorded state: dropped, rebuilt by replay
    lost: bool = False  # the sandbox died or was destroyed: forgotten, the next request rebuilds
    metric: str | None = None  # reason counted in ``envscaler_sandbox_failures_total``


TIMEOUT = Fault("Timeout", recorded=True, lost=True, metric="timeout")
CRASHED = Fault("SandboxCrashed", recorded=True, lost=True, metric="crash")
# The runtime's error types (envscaler/sandbox/runtime/protocol.py). ``Diverged``: the sandbox ran a call
# the trajectory lacks (a gateway died between running a call and recording it while another
# gateway held the same sandbox). Any other type is a fault of the runtime or of the gateway.
RUNTIME_FAULTS = {
    fault.type: fault
    for fault in (
        Fault("ToolException", recorded=True, replayed=True),
        Fault("ResultTooLarge", recorded=True, replayed=True),
        Fault("ArgumentError", recorded=True),
        Fault("NotLoaded", stale=True, metric="stale"),
        Fault("Diverged", stale=True, metric="stale"),
    )
}


def fault_of(exc: SandboxError) -> Fault:
    """What ``exc`` means; a runtime's error by its ``error.type`` (`RuntimeFault.kind`)."""
    if isinstance(exc, RuntimeFault):
        return RUNTIME_FAULTS.get(exc.kind) or Fault(exc.kind)
    if isinstance(exc, CallTimeout):
        return TIMEOUT
    if isinstance(exc, SandboxGone):
        return CRASHED
    return Fault(type(exc).__name__)


def counted(exc: SandboxError, metrics: Metrics) -> Fault:
    """`fault_of`, counted in ``envscaler_sandbox_failures_total`` when it is a sandbox's."""
    fault = fault_of(exc)
    if fault.metric is not None:
        metrics.sandbox_failed(fault.metric)
    return fault


def recorded_error(exc: SandboxError, tool: str) -> dict[str, Any]:
    """The trajectory's ``error`` of a tool call that failed with ``exc`` (a ``recorded`` fault)."""
    fault = fault_of(exc)
    if isinstance(exc, RuntimeFault):
        message = exc.message
    elif isinstance(exc, CallTimeout):
        message = (f"tool {tool} exceeded its deadline of {exc.timeout:g} s; its effects were "
                   "discarded and the session goes on from its state before the call")
    else:
        message = str(exc)
    return {"type": fault.type, "message": message}


def api_error(
    exc: SandboxError,
    step: Step,
    *,
    env: str = "",
    tool: str = "",
    index: int | None = None,
    custom: bool = False,
) -> ApiError:
    """The API error that ``exc`` answers when ``step`` failed with it. ``env``, ``tool`` and
    ``index`` (a replayed call's) name what failed; ``custom``: the caller gave the
    ``init_config``, so one the environment does not start from is the caller's error (else
    ``EnvLoadFailed``, the environment's). No sandbox to be had is 429 when every slot is
    taken, 503 when the engine is too slow to make one."""
    if step is Step.CHECK:
        return _checker_error(exc)
    if isinstance(exc, RuntimeFault):
        return _runtime_error(exc, step, env, tool, index, custom)
    if isinstance(exc, CapacityExhausted):
        return capacity_exhausted(str(exc), exc.retry_after, 429 if exc.full else 503)
    if step is Step.CLAIM:
        return backend_unavailable(f"no sandbox could be created: {exc}")
    if step is Step.REPLAY:
        if isinstance(exc, CallTimeout):
            return backend_unavailable(f"replaying call {index} exceeded its deadline; the "
                                       "session could not be rebuilt")
        return backend_unavailable(f"the sandbox died replaying call {index}: {exc}")
    if isinstance(exc, CallTimeout):
        if step is Step.LOAD:
            return timeout(f"loading environment {env} exceeded {exc.timeout:g} s")
        return timeout(str(exc))
    if step is Step.LOAD:
        return backend_unavailable(f"the sandbox died while loading the environment: {exc}")
    return backend_unavailable(f"the session's sandbox died twice: {exc}")


def _runtime_error(exc: RuntimeFault, step: Step, env: str, tool: str, index: int | None,
                   custom: bool) -> ApiError:
    if step is Step.REPLAY:
        return backend_unavailable(f"replaying call {index} failed: {exc}")
    if exc.kind == "ToolNotFound" and step is Step.CALL:
        return not_found("UnknownTool", f"environment {env!r} has no tool {tool!r}")
    if exc.kind == "LoadError" and step in (Step.LOAD, Step.RESET):
        if custom:
            return invalid_request(
                f"the environment does not start from this init_config: {exc.message}",
                field="init_config",
            )
        log.error("environment failed to load env=%s error=%s", env, exc)
        return env_load_failed(env, exc.message)
    if exc.kind == "StateNotData":
        return ApiError(409, "StateNotData", f"the state is not data: {exc.message}")
    if exc.kind == "ResultTooLarge" and step is Step.READ:
        return ApiError(409, "StateTooLarge", f"the session's state is too large to answer: "
                        f"{exc.message} (ENVSCALER_MAX_STATE_BYTES)")
    log.error("sandbox runtime fault step=%s env=%s tool=%s error=%s", step.value, env or "-",
              tool or "-", exc)
    if step is Step.LOAD:
        return internal_error(f"environment {env} failed to load in its sandbox")
    if step is Step.RESET:
        return internal_error("the sandbox runtime failed to reset")
    return internal_error("the sandbox runtime rejected the request")


def _checker_error(exc: SandboxError) -> ApiError:
    """A verdict the machine could not afford is a retryable 503, never a failed check."""
    if isinstance(exc, ChecksStarved):
        return ApiError(503, "ChecksStarved", f"{exc}; retry",
                        headers=retry_after(STARVED_RETRY_AFTER))
    if isinstance(exc, CapacityExhausted):
        return capacity_exhausted(str(exc), exc.retry_after)
    return backend_unavailable(f"no checker could judge the checks: {exc}")


def checks_exhausted(exhausted: list[Exhaustion], items: list[str], budget: CheckBudget,
                     settings: Settings) -> ApiError:
    """500 ``CheckExhausted``: checks ran out of their CPU time or memory, so they were never
    judged and no reward exists. Not retryable: a check's budget is CPU time and memory, the same
    on every attempt whatever the machine's load (unlike ``ChecksStarved``)."""
    named = "; ".join(_exhaustion(e, items) for e in exhausted[:NAMED_EXHAUSTIONS])
    if len(exhausted) > NAMED_EXHAUSTIONS:
        named += f"; and {len(exhausted) - NAMED_EXHAUSTIONS} more"
    budgets = "; ".join(f"{_budget(resource, budget)}, from "
                        f"{statesize.check_budget_origin(settings, resource)}"
                        for resource in sorted({e.resource for e in exhausted}))
    return ApiError(500, "CheckExhausted",
                    f"{len(exhausted)} of {len(items)} checks ran out of their budget, so no "
                    f"reward was computed: {named}. A check may spend {budgets}. Retrying cannot "
                    "help: the budget is the same on every attempt, however busy the machine "
                    "(unlike ChecksStarved); raise the setting or fix the check. The session "
                    "goes on.")


def checker_killed(exc: ChecksKilledChecker, settings: Settings) -> ApiError:
    """500 ``CheckExhausted`` too: the checks ended their checker sandbox twice (the container
    out of its memory, or no answer within the checks' deadline), so nothing was judged; the
    same checks on the same states end it again."""
    return ApiError(500, "CheckExhausted",
                    f"{exc}, so no reward was computed: the checks together ran their checker "
                    "sandbox out of its memory (ENVSCALER_SANDBOX_MEMORY="
                    f"{settings.sandbox_memory}) or past their deadline. Retrying cannot help "
                    "with the same checks and state; raise the setting or fix the checks. The "
                    "session goes on.")


def _exhaustion(exhausted: Exhaustion, items: list[str]) -> str:
    item = items[exhausted.index]
    short = item if len(item) <= ITEM_CHARS else item[:ITEM_CHARS - 3] + "..."
    return (f"checklist[{exhausted.index}] ({short!r}) ran out of {exhausted.resource}: "
            f"{exhausted.error}")


def _budget(resource: str, budget: CheckBudget) -> str:
    if resource == "time":
        return f"{budget.cpu_seconds:g} s of CPU time"
    return f"{budget.memory_bytes / (1 << 20):.0f} MiB of memory"


def unrestorable(session_id: str) -> ApiError:
    """Even a sandbox rebuilt from the trajectory does not match the record: the record changed
    or vanished while this request held it (e.g. it expired). Retrying re-reads it."""
    return backend_unavailable(
        f"session {session_id} could not be restored to its recorded state (its record "
        "changed or vanished meanwhile); retry"
    )
