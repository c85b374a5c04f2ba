"""Deadlines that follow the machine: every wall-clock deadline of the suite goes through
`scaled`.

A deadline in a test is how long something may take here, never a claim about speed (speed is
the benchmark's business). Each is written for a quiet machine, and on a shared 2-core machine
at a load of 10 the same work takes five times as long: a gateway ready in 6 s when quiet is not
ready in 30. So at the start of each test (``tests/conftest.py``) `follow_the_machine` measures
one factor, the runnable tasks per CPU this process may run on (the 1-minute load average, at
least 1), and every deadline of that test, the settings of the gateways it starts and its
pytest-timeout limit are multiplied by it. One factor per test keeps the deadlines of a test in
the proportions they were written in. It is capped at `MAX_FACTOR` so that a hang still fails.
"""

from __future__ import annotations

import os

MAX_FACTOR = 8.0

_factor = 1.0


def machine_factor() -> float:
    """How many times longer than on a quiet machine work takes here now."""
    load = os.getloadavg()[0]
    cpus = len(os.sched_getaffinity(0))
    return min(MAX_FACTOR, max(1.0, load / cpus))


def follow_the_machine() -> float:
    """Measure the factor for the test about to run (and its fixtures)."""
    global _factor
    _factor = machine_factor()
    return _factor


def factor() -> float:
    return _factor


def scaled(seconds: float) -> float:
    """A deadline written for a quiet machine, for this one now."""
    return seconds * _factor
