"""Sandboxes for the gates: generated code runs only there, never in the synthesis process.

``SandboxHub`` wraps a backend and its warm pools (the same ``sandbox`` package the gateway uses:
one per image, an environment's requirements' included) and hands out one fresh sandbox per use,
destroyed afterwards; ``limit`` bounds how many are in use.
A sandbox that cannot be started is a ``TransientFailure``: the item is tried again by a next run.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Self

from envscaler.sandbox.backends import make_backend
from envscaler.sandbox.checkers import CheckBudget, CheckerPool
from envscaler.sandbox.config import SandboxConfig
from envscaler.sandbox.errors import SandboxError
from envscaler.sandbox.image_pools import ImagePools
from envscaler.sandbox.sandbox import Sandbox
from envscaler.synth.errors import TransientFailure

if TYPE_CHECKING:
    from envscaler.server.settings import Settings

CHECKER_QUEUE = 64
CHECKER_WAIT = 300.0  # gates judge one scenario after another: waiting is their normal pace
INFRASTRUCTURE = "infrastructure"  # the rule of gate problems of the sandbox, not of the code


def is_infrastructure_fault(kind: str) -> bool:
    """A runtime error type that means the runtime itself failed (not the environment's code)."""
    return kind == "RuntimeError"


@dataclass(frozen=True)
class Limits:
    """Deadlines and sizes for work in a sandbox: the gateway's settings of these names (one
    definition, with their defaults and ``ENVSCALER_*`` variables: `envscaler.server.settings.Settings`)."""

    call_timeout: float
    load_timeout: float
    check_budget: CheckBudget
    max_result_bytes: int

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(call_timeout=settings.call_timeout, load_timeout=settings.load_timeout,
                   check_budget=settings.check_budget(),
                   max_result_bytes=settings.max_result_bytes)


class SandboxHub:
    def __init__(self, config: SandboxConfig, limits: Limits, *, limit: int = 4,
                 instance: str | None = None) -> None:
        # A container per job: synthesis runs code no gate has passed yet, each job's removed
        # with it (slots are for serving many sessions of gated environments at once).
        self.config = replace(config, pool_size=min(config.pool_size, limit), sandbox_slots=1)
        self.limits = limits
        self.instance = instance or f"synth-{secrets.token_hex(4)}"
        self._limit = asyncio.Semaphore(limit)
        self._pools: ImagePools | None = None
        self._checkers: CheckerPool | None = None
        self._claims = 0

    @classmethod
    def from_environment(cls, *, limit: int, labels: dict[str, str] | None = None) -> SandboxHub:
        """Sandboxes as configured by ``ENVSCALER_SANDBOX_*``; the Docker image is built when the
        configuration names none (as ``envscaler serve`` does)."""
        from envscaler.server.settings import Settings

        from envscaler.sandbox.image import resolve_image

        settings = Settings()
        image = resolve_image(settings) if settings.sandbox_backend == "docker" else ""
        config = settings.sandbox_config(image=image, labels=labels)
        return cls(config, Limits.from_settings(settings), limit=limit,
                   instance=f"synth-{settings.instance}")

    async def start(self) -> Self:
        if self._pools is None:
            backend = make_backend(self.config, self.instance)
            self._pools = ImagePools(backend, self.config, name="synth")
            await self._pools.start()
            self._checkers = CheckerPool(backend, size=1, max_waiting=CHECKER_QUEUE,
                                         wait_timeout=CHECKER_WAIT)
            await self._checkers.start()
        return self

    async def close(self) -> None:
        if self._checkers is not None:
            await self._checkers.close()
            self._checkers = None
        if self._pools is not None:
            await self._pools.close()
            self._pools = None

    async def judge(self, box: Sandbox, checks: list[str]) -> list[dict[str, Any]]:
        """The verdicts of ``checks`` on ``box``'s initial and current state, from a checker
        sandbox (check functions never run where environment code ran)."""
        await self.start()
        assert self._checkers is not None
        snapshot = await box.snapshot(timeout=self.limits.call_timeout)
        return await self._checkers.check(checks, snapshot, self.limits.check_budget)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @asynccontextmanager
    async def sandbox(self, purpose: str, requirements: Sequence[str] = ()
                      ) -> AsyncIterator[Sandbox]:
        """A fresh sandbox for one job, with ``requirements`` (an env.json's) installed;
        destroyed when the job ends, whatever happened. ``RequirementsUnavailable`` when they
        have no image."""
        await self.start()
        assert self._pools is not None
        pool = await self._pools.of(requirements)
        async with self._limit:
            self._claims += 1
            try:
                box = await pool.claim(f"{purpose[:40]}-{self._claims}")
            except SandboxError as exc:  # engine down, capacity, start-up failure
                raise TransientFailure(f"no sandbox could be started: {exc}") from exc
            try:
                yield box
            finally:
                await box.destroy()
