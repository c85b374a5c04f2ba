"""Validation: a session's scenario checks judged on its state (reward = passed / total).

A check that ran out of its CPU time or memory was not judged: the validation then answers
``CheckExhausted`` and records no reward (a trainer must not take an unjudged check for a failed
one); the session goes on."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from envscaler.format.models import Scenario
from envscaler.sandbox.checkers import (
    CheckBudget,
    CheckerPool,
    ChecksKilledChecker,
    ChecksStarved,
    exhaustions,
)
from envscaler.sandbox.errors import CapacityExhausted, SandboxError
from envscaler.sandbox.sandbox import Snapshot
from envscaler.server import statesize
from envscaler.server.auth import Principal
from envscaler.server.catalogue import ServedCatalogue, ServedEnv
from envscaler.server.errors import ApiError
from envscaler.server.metrics import Metrics
from envscaler.server.sessions import faults
from envscaler.server.sessions.access import check_session_id, checked
from envscaler.server.sessions.faults import Step
from envscaler.server.sessions.locking import SessionLocks
from envscaler.server.sessions.sandboxes import SessionSandboxes
from envscaler.server.settings import Settings
from envscaler.server.store import Record, SessionStore

log = logging.getLogger("envscaler.server.sessions")


@dataclass
class Validator:
    """``POST /v1/sessions/{id}/validate``: changes nothing, on any session that has a record."""

    settings: Settings
    store: SessionStore
    catalogue: ServedCatalogue
    locks: SessionLocks
    sandboxes: SessionSandboxes
    checkers: CheckerPool
    metrics: Metrics

    async def validate(self, caller: Principal, session_id: str) -> dict[str, Any]:
        check_session_id(session_id)
        started = time.perf_counter()
        async with self.locks.locked(session_id) as held:
            record = checked(session_id, held.record, caller)
            env = self.catalogue.env(record.env)
            scenario = _scenario_with_checks(record, env)
            checklist = list(scenario.checklist)
            snapshot = await self.sandboxes.read(
                record, held.lock, env,
                lambda sandbox, timeout: sandbox.snapshot(timeout=timeout,
                                                          executed=record.executed))
        # Judged after the lock is released: the states are taken, the session may go on.
        budget = statesize.check_budget(self.settings, snapshot.initial, snapshot.final)
        results = await self._judge([item.check_func for item in checklist], snapshot, budget)
        exhausted = exhaustions(results)
        if exhausted:
            self.metrics.validations.labels("exhausted").inc()
            log.warning("validate session=%s env=%s scenario=%s: no reward, checks %s ran out "
                        "of their budget", session_id, env.id, scenario.id,
                        ", ".join(f"{e.index} ({e.resource})" for e in exhausted))
            raise faults.checks_exhausted(exhausted, [item.item for item in checklist], budget,
                                          self.settings)
        passed = sum(1 for r in results if r.get("passed") is True)
        total = len(checklist)
        reward = round(passed / total, 4)
        self.metrics.reward.labels(env.id).observe(reward)
        self.metrics.validations.labels("judged").inc()
        self.metrics.validate_seconds.observe(time.perf_counter() - started)
        log.info(
            "validate session=%s env=%s scenario=%s reward=%.4f passed=%d total=%d",
            session_id,
            env.id,
            scenario.id,
            reward,
            passed,
            total,
        )
        return {
            "session_id": session_id,
            "scenario": scenario.id,
            "reward": reward,
            "passed": passed,
            "total": total,
            "checks": [
                {"item": item.item, "passed": r.get("passed") is True, "error": r.get("error")}
                for item, r in zip(checklist, results, strict=True)
            ],
        }

    async def _judge(self, checks: list[str], snapshot: Snapshot,
                     budget: CheckBudget) -> list[dict[str, Any]]:
        """The checkers' verdicts. Checks that kill their checker were never judged: an error of
        the validation, as checks that run out of their budget."""
        try:
            return await self.checkers.check(checks, snapshot, budget)
        except ChecksKilledChecker as exc:
            self.metrics.validations.labels("exhausted").inc()
            raise faults.checker_killed(exc, self.settings) from exc
        except SandboxError as exc:
            if isinstance(exc, ChecksStarved):
                self.metrics.validations.labels("starved").inc()
            elif isinstance(exc, CapacityExhausted):
                self.metrics.validations.labels("busy").inc()
            raise faults.api_error(exc, Step.CHECK) from exc


def _scenario_with_checks(record: Record, env: ServedEnv) -> Scenario:
    if record.scenario is None:
        raise ApiError(
            409,
            "NoChecklist",
            "this session started from a custom init_config; "
            "there are no check functions to run",
        )
    scenario = env.scenario(record.scenario)
    if not scenario.checklist:
        raise ApiError(409, "NoChecklist", f"scenario {scenario.id} has no checklist")
    return scenario
