"""The size of a session's state as a limit of its own: the largest state a session may start
from, and what reading, loading or judging a state of a given size may take.

Both follow from the settings and from what a state costs in a sandbox, measured on the
benchmark's large-state environment (``envscaler/bench/largestate.py``): its JSON parses into Python
objects of about 4.5 times its size, and a runtime at its peak (a load: the message, the text it
keeps for resets, the objects, the initial state's text and its converted copy) holds about 12
times it; parsing or encoding takes 15 ms per MB on the benchmark machine, budgeted here at 50
(slower machines, gVisor). A session whose initial state cannot fit is refused at open, before any
sandbox is claimed; deadlines and check budgets grow with the state, so a correct episode on a
large database is never judged on a deadline made for a small one.
"""

from __future__ import annotations

from dataclasses import dataclass

from envscaler.sandbox.checkers import CheckBudget
from envscaler.sandbox.config import parse_size
from envscaler.sandbox.runtime.protocol import MAX_MESSAGE_BYTES
from envscaler.server.catalogue import ServedEnv
from envscaler.server.errors import ApiError
from envscaler.server.settings import Settings

SECONDS_PER_MB = 0.05  # CPU to parse or encode a MB of state JSON in a sandbox, with margin
SANDBOX_BYTES_PER_STATE_BYTE = 12  # a runtime's peak memory per byte of its state's JSON
CHECK_BYTES_PER_STATE_BYTE = 5  # each state a check parses (it gets the initial and the final)
# A snapshot's reply carries two states, each escaped inside it up to twice its length.
MESSAGE_STATES = 4


@dataclass(frozen=True)
class StateLimit:
    """The largest state a session may start from, and what sets it (named to the caller)."""

    max_bytes: int
    because: str


def state_limit(settings: Settings) -> StateLimit:
    """The tightest of the gateway's reply cap, the sandbox protocol's frame and the sandbox's
    memory."""
    memory = parse_size(settings.sandbox_memory)
    return min(
        StateLimit(settings.max_state_bytes, "ENVSCALER_MAX_STATE_BYTES"),
        StateLimit(MAX_MESSAGE_BYTES // MESSAGE_STATES,
                   f"the sandbox protocol's {MAX_MESSAGE_BYTES >> 20} MiB messages (a snapshot "
                   "carries two states)"),
        StateLimit(memory // SANDBOX_BYTES_PER_STATE_BYTE,
                   f"ENVSCALER_SANDBOX_MEMORY={settings.sandbox_memory} (a state takes about "
                   f"{SANDBOX_BYTES_PER_STATE_BYTE} times its JSON in a sandbox)"),
        key=lambda limit: limit.max_bytes,
    )


def refuse_too_large(size: int, limit: StateLimit) -> None:
    """413 ``StateTooLarge`` for an initial state of ``size`` characters past ``limit``."""
    if size > limit.max_bytes:
        raise ApiError(413, "StateTooLarge", f"this session would start from {size:,} bytes of "
                       f"state; this gateway serves states up to {limit.max_bytes:,} bytes, set by "
                       f"{limit.because}", field="init_config")


def start_size(settings: Settings, env: ServedEnv, scenario_id: str | None) -> int:
    """About how large a session's state is, for its deadlines: its scenario's start, or at
    most the largest start there may be (a caller's own ``init_config``)."""
    return env.initial(scenario_id).size if scenario_id else state_limit(settings).max_bytes


def _seconds(size: int) -> float:
    return SECONDS_PER_MB * size / 1_000_000


def load_timeout(settings: Settings, size: int) -> float:
    """To load or reset an environment from ``size`` characters of initial state: parse it,
    build, and encode the initial state."""
    return settings.load_timeout + 3 * _seconds(size)


def read_timeout(settings: Settings, size: int) -> float:
    """To read a state of about ``size`` characters (convert, encode, send), or a snapshot."""
    return settings.call_timeout + 3 * _seconds(size)


def check_budget(settings: Settings, initial: str, final: str) -> CheckBudget:
    """What each check may spend on these states: the settings' budget for its own work, plus
    parsing both states and holding them."""
    size = len(initial) + len(final)
    base = settings.check_budget()
    return CheckBudget(base.cpu_seconds + _seconds(size),
                       base.memory_bytes + CHECK_BYTES_PER_STATE_BYTE * size)


def check_budget_origin(settings: Settings, resource: str) -> str:
    """The settings that a check's budget of ``resource`` (``"time"`` or ``"memory"``) follows
    from in `check_budget`, for whoever must raise it."""
    if resource == "time":
        return (f"ENVSCALER_CHECK_CPU_SECONDS={settings.check_cpu_seconds:g} plus "
                f"{SECONDS_PER_MB:g} s per MB of the two states; the wall deadline of a check "
                "that waits grows with it")
    return (f"ENVSCALER_CHECK_MEMORY={settings.check_memory} plus {CHECK_BYTES_PER_STATE_BYTE} "
            "bytes per byte of the two states, in a checker sandbox of "
            f"ENVSCALER_SANDBOX_MEMORY={settings.sandbox_memory}")
