"""The suite's deadlines follow the machine (tests/deadlines.py): one factor per test from the
load per CPU, applied to the tests' waits, to the work deadlines of the gateways they start and to
pytest-timeout's limit."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import pytest

from tests import deadlines
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures


def busy(monkeypatch: pytest.MonkeyPatch, load: float, cpus: int) -> float:
    monkeypatch.setattr(deadlines.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(deadlines.os, "sched_getaffinity", lambda _pid: set(range(cpus)))
    return deadlines.follow_the_machine()


def test_the_factor_is_the_load_per_cpu_at_least_one_and_capped(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    assert busy(monkeypatch, 0.5, 2) == 1.0  # a quiet machine: the deadlines as written
    assert busy(monkeypatch, 10.0, 2) == 5.0
    assert deadlines.scaled(30) == 150.0  # a gateway ready in 30 s when quiet
    assert busy(monkeypatch, 400.0, 2) == deadlines.MAX_FACTOR  # a hang still fails


def test_gateways_started_by_tests_get_deadlines_for_this_machine(
    monkeypatch: pytest.MonkeyPatch, make_settings: Callable[..., Any]
) -> None:
    busy(monkeypatch, 6.0, 2)
    settings = make_settings(load_timeout=3.0)
    assert settings.call_timeout == 15.0  # the default 5 s tool deadline, three times
    assert settings.load_timeout == 9.0  # a test's own choice, in proportion
    assert settings.session_ttl == make_settings().session_ttl  # TTLs are the tests' to scale


@pytest.mark.timeout(2)
def test_pytest_timeout_limits_follow_the_machine() -> None:
    """The limit was set before this test ran, from the factor measured for it."""
    remaining, _ = signal.getitimer(signal.ITIMER_REAL)
    assert deadlines.scaled(2) - 1 < remaining <= deadlines.scaled(2)
