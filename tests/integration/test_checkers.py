"""Checker sandboxes on the Docker backend (runc and gVisor): verdicts on CPU time, so a check
that the machine starves is never judged failed; a check the OOM killer ends ran out of memory;
and checks that attack their checker cannot change another validation's verdicts."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from envscaler.sandbox.backends.docker import DockerBackend
from envscaler.sandbox.checkers import CheckBudget, CheckerPool, ChecksStarved
from envscaler.sandbox.config import SandboxConfig
from envscaler.sandbox.sandbox import Snapshot
from tests.conftest import new_instance

pytestmark = pytest.mark.docker

NEEDS_SECONDS_OF_CPU = "def check_func(final_state):\n    return sum(range(10**8)) > 0\n"
PASSES = "def check_func(final_state):\n    return final_state['n'] == initial_state['n'] + 1\n"
ATTACKS = ("import os, signal\n"
           "def check_func(final_state):\n"
           "    for pid in set(range(1, 300)) - {os.getpid()}:\n"
           "        try:\n"
           "            os.kill(pid, signal.SIGKILL)\n"
           "        except OSError:\n"
           "            pass\n"
           "    if os.fork() == 0:\n"
           "        os.setsid()\n"
           "        import time\n"
           "        while True:\n"
           "            time.sleep(0.01)\n"
           "    return True\n")
HOARDS = ("def check_func(final_state):\n    hoard = []\n    while True:\n"
          "        hoard.append(bytearray(8 << 20))\n")
EMPTY = Snapshot("{}", "{}")


def states(initial: int, final: int) -> Snapshot:
    return Snapshot(f'{{"n": {initial}}}', f'{{"n": {final}}}')


RUNTIMES = pytest.mark.parametrize("runtime", [None, "runsc"], ids=["runc", "gvisor"])


@asynccontextmanager
async def checker_pool(config: SandboxConfig, runtime: str | None,
                       cpus: float = 1.0) -> AsyncIterator[CheckerPool]:
    config = dataclasses.replace(config, sandbox_runtime=runtime, sandbox_pids=128,
                                 sandbox_cpus=cpus)
    pool = CheckerPool(DockerBackend(config, new_instance()), size=1, max_waiting=4,
                       wait_timeout=30)
    await pool.start()
    try:
        yield pool
    finally:
        await pool.close()


async def test_a_check_starved_of_cpu_is_not_judged(docker_config: SandboxConfig) -> None:
    """2% of a CPU until the wall deadline (10 s for a 1 s budget) is 0.2 s: a check that needs
    seconds is starved, not failed; with its CPU, the same check passes. Under runc only: gVisor
    counts the time the host throttled its threads as the check's CPU time (README)."""
    runtime = None
    async with checker_pool(docker_config, runtime, cpus=0.02) as checkers:
        with pytest.raises(ChecksStarved):
            await checkers.check([NEEDS_SECONDS_OF_CPU], EMPTY,
                                 CheckBudget(cpu_seconds=1.0, memory_bytes=64 << 20))
    async with checker_pool(docker_config, runtime) as checkers:
        verdicts = await checkers.check([NEEDS_SECONDS_OF_CPU], EMPTY,
                                        CheckBudget(cpu_seconds=30.0, memory_bytes=64 << 20))
    assert verdicts == [{"passed": True, "error": None, "exhausted": None}]


async def test_a_check_the_oom_killer_ends_ran_out_of_memory(docker_config: SandboxConfig) -> None:
    """A check allowed more memory than its sandbox has is ended by the kernel's OOM killer, not
    by its address-space limit: it ran out of memory, it was not judged; the check beside it
    was. Under runc only: gVisor keeps no OOM count in the sandbox (a check killed there is
    judged by its exit, as any other)."""
    config = dataclasses.replace(docker_config, sandbox_memory="96m")
    async with checker_pool(config, None) as checkers:
        verdicts = await checkers.check([HOARDS, PASSES], states(1, 2),
                                        CheckBudget(cpu_seconds=5.0, memory_bytes=1 << 30))
    assert verdicts[0]["exhausted"] == "memory", verdicts
    assert "its checker sandbox ran out of memory" in verdicts[0]["error"]
    assert verdicts[1] == {"passed": True, "error": None, "exhausted": None}


@RUNTIMES
async def test_checks_that_attack_their_checker_change_no_later_verdict(
        docker_config: SandboxConfig, runtime: str | None) -> None:
    budget = CheckBudget(cpu_seconds=1.0, memory_bytes=64 << 20)
    async with checker_pool(docker_config, runtime) as checkers:
        first = await checkers.check([ATTACKS, PASSES], states(1, 2), budget)
        # its checker answered
        assert first[0] == {"passed": True, "error": None, "exhausted": None}
        # (its sibling, a check of the same validation and user, it may have killed)
        for _ in range(3):  # nothing it started outlives its validation
            assert await checkers.check([PASSES], states(1, 2), budget) == \
                [{"passed": True, "error": None, "exhausted": None}]
            assert await checkers.check([PASSES], states(1, 3), budget) == \
                [{"passed": False, "error": None, "exhausted": None}]
