"""A few checker sandboxes per gateway process, each judging one validation at a time.

Check functions never run where environment code ran (``runtime/checker.py``): a validation takes
a snapshot of the session's states from its sandbox and sends it, with the check sources, to a
checker. Admission is bounded twice: at most ``max_waiting`` validations wait for a checker, each
for at most ``wait_timeout`` seconds; beyond either, ``CapacityExhausted`` (a retryable answer),
never an unbounded queue. A checker that dies or misses its deadline is replaced, and the
validation tried once more on a fresh one.

A verdict either judges its check (``passed``, and the ``error`` the check earned) or says that
the check ran out of its budget (``exhausted``: ``"time"`` or ``"memory"``; see `exhaustions`):
such a check was never judged, and what to make of it is the caller's (the gateway answers an
error, never a reward; a synthesis gate reports the check).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from envscaler.sandbox.backends.base import CHECKER, SandboxBackend
from envscaler.sandbox.errors import (
    CallTimeout,
    CapacityExhausted,
    RuntimeFault,
    SandboxError,
    SandboxGone,
    SandboxUnavailable,
)
from envscaler.sandbox.sandbox import Sandbox, Snapshot

log = logging.getLogger("envscaler.sandbox.checkers")

SWEEP_INTERVAL = 10.0  # seconds between liveness probes of the idle checkers
PING_TIMEOUT = 2.0
DEADLINE_MARGIN = 5.0  # beyond the checks' own wall deadlines: transfer, fork, reap


@dataclass(frozen=True)
class CheckBudget:
    """What each check may spend: CPU seconds (the verdict's limit), a wall deadline far above it
    (only to catch checks that block), and memory beyond the checker's own."""

    cpu_seconds: float
    memory_bytes: int

    @property
    def wall_seconds(self) -> float:
        return 5 * self.cpu_seconds + 5.0

    @property
    def deadline(self) -> float:
        """How long a checker may take: a first pass and a second run may each reach the wall
        deadline (``runtime/checker.py``)."""
        return 2 * self.wall_seconds + DEADLINE_MARGIN


@dataclass(frozen=True)
class Exhaustion:
    """A check that ran out of ``resource`` (``"time"`` or ``"memory"``) before it answered."""

    index: int  # in the checklist, from 0
    resource: str
    error: str  # the checker's account of it


def exhaustions(verdicts: list[dict[str, Any]]) -> list[Exhaustion]:
    """The checks among ``verdicts`` that ran out of time or memory, in order."""
    return [Exhaustion(index, verdict["exhausted"], verdict["error"])
            for index, verdict in enumerate(verdicts) if verdict.get("exhausted") is not None]


class ChecksStarved(SandboxError):
    """The machine gave the checks too little CPU to judge them; retry later."""


class ChecksKilledChecker(SandboxError):
    """The checks killed their checker twice: they are broken, not the service."""


class CheckerPool:
    def __init__(self, backend: SandboxBackend, size: int, max_waiting: int,
                 wait_timeout: float) -> None:
        self.backend = backend
        self.size = size
        self.max_waiting = max_waiting
        self.wait_timeout = wait_timeout
        self._idle: asyncio.Queue[Sandbox | None] = asyncio.Queue()
        self._waiting = 0
        self._all: set[Sandbox] = set()
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the checkers, and the sweep that replaces dead ones. A checker that fails to
        start is retried by the sweep or when first needed."""
        for _ in range(self.size):
            self._idle.put_nowait(await self._start_one())
        self._sweeper = asyncio.create_task(self._sweep_forever(), name="envscaler-checkers")

    async def _sweep_forever(self) -> None:
        """Replace checkers that died while idle (an engine restart, an operator's kill), so a
        validation does not have to find out and the dead container is removed."""
        while True:
            await asyncio.sleep(SWEEP_INTERVAL)
            for _ in range(self._idle.qsize()):
                checker = self._idle.get_nowait()
                self._idle.put_nowait(await self._alive_or_replaced(checker))

    async def _alive_or_replaced(self, checker: Sandbox | None) -> Sandbox | None:
        if checker is not None:
            try:
                await checker.ping(timeout=PING_TIMEOUT)
                return checker
            except SandboxError as exc:  # a ping that fails destroys its sandbox
                log.warning("checker %s is dead (%s); replacing it", checker.id[:12], exc)
        return await self._start_one()

    async def _start_one(self) -> Sandbox | None:
        try:
            handle = await self.backend.create({"envscaler.pool": "checkers"}, CHECKER)
        except SandboxError as exc:
            log.error("a checker sandbox did not start: %s", exc)
            return None
        checker = Sandbox(handle, self.backend, on_destroy=self._all.discard)
        self._all.add(checker)
        return checker

    async def check(self, checks: list[str], snapshot: Snapshot,
                    budget: CheckBudget) -> list[dict[str, Any]]:
        """Verdicts ``{"passed", "error", "exhausted"}`` in the order of ``checks``."""
        checker = await self._acquire()
        try:
            for attempt in (1, 2):
                checker = checker or await self._start_one()
                if checker is None:
                    raise SandboxGone("no checker sandbox could be started")
                try:
                    return await _judge(checker, checks, snapshot, budget)
                except (SandboxGone, CallTimeout) as exc:
                    log.warning("checker %s failed (%s); replacing it", checker.id[:12], exc)
                    await checker.destroy()
                    checker = None
                    if attempt == 2:
                        raise ChecksKilledChecker(f"the checks ended their checker twice: {exc}")
            raise AssertionError("unreachable")
        finally:
            self._idle.put_nowait(checker)

    async def _acquire(self) -> Sandbox | None:
        """An idle checker (None: a slot whose checker must be started again)."""
        if self._idle.empty() and self._waiting >= self.max_waiting:
            raise CapacityExhausted(f"{self._waiting} validations are already waiting for a "
                                    "checker", retry_after=1.0)
        self._waiting += 1
        try:
            async with asyncio.timeout(self.wait_timeout):
                return await self._idle.get()
        except TimeoutError:
            raise CapacityExhausted(f"no checker was free within {self.wait_timeout:g} s",
                                    retry_after=1.0) from None
        finally:
            self._waiting -= 1

    def health(self) -> dict[str, int]:
        """Raise when no checker runs (validations cannot be judged); otherwise describe them."""
        if not self._all:
            raise SandboxUnavailable("no checker sandbox is running; the next validation starts "
                                     "one")
        return {"checkers": len(self._all), "idle": self._idle.qsize(), "waiting": self._waiting}

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for checker in list(self._all):
            await checker.destroy()


async def _judge(checker: Sandbox, checks: list[str], snapshot: Snapshot,
                 budget: CheckBudget) -> list[dict[str, Any]]:
    try:
        verdicts = await checker.check(
            checks, snapshot, cpu_seconds=budget.cpu_seconds,
            wall_seconds=budget.wall_seconds, memory_bytes=budget.memory_bytes,
            timeout=budget.deadline)
    except RuntimeFault as exc:
        if exc.kind == "Starved":
            raise ChecksStarved(exc.message) from None
        raise
    if not (isinstance(verdicts, list) and len(verdicts) == len(checks)):
        raise SandboxGone(f"the checker answered {type(verdicts).__name__} instead of "
                          f"{len(checks)} verdicts")
    return verdicts
