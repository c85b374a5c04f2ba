"""A check that runs out of its CPU time or memory is told apart from one that was judged: the
checker marks its verdict ``exhausted`` ("time" or "memory"), and the gateway answers such a
validation with ``CheckExhausted`` (no reward), naming the check, the budget and the settings."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from envscaler.sandbox.checkers import CheckBudget, ChecksKilledChecker, Exhaustion, exhaustions
from envscaler.sandbox.runtime import checker
from envscaler.sandbox.sandbox import Snapshot
from envscaler.server import statesize
from envscaler.server.errors import ApiError
from envscaler.server.metrics import Metrics
from envscaler.server.sessions import faults
from envscaler.server.sessions.validation import Validator
from envscaler.server.settings import Settings
from tests.deadlines import scaled

REPO_ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys
from envscaler.sandbox.runtime import checker
checks, initial, final, wall = json.load(sys.stdin)
budget = checker.Budget(cpu_seconds=0.5, wall_seconds=wall, memory_bytes=64 << 20)
print(json.dumps(checker.Checker(contained=False).check(checks, initial, final, budget)))
"""


def check(*lines: str) -> str:
    return "def check_func(final_state):\n" + "".join(f"    {line}\n" for line in lines)


def judge(checks: list[str], initial: str = "{}", final: str = "{}",
          wall_seconds: float = 10) -> list[dict]:
    """The checker's verdicts, from a subprocess of its own (the checker forks)."""
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO_ROOT,
                          input=json.dumps([checks, initial, final, wall_seconds]),
                          capture_output=True, text=True, timeout=scaled(60), check=True)
    return json.loads(done.stdout)


def test_running_out_of_cpu_or_memory_is_exhaustion_and_earned_errors_are_verdicts() -> None:
    spins = check("while True:", "    pass")
    hoards = check("hoard = []", "while True:", "    hoard.append(bytearray(1 << 20))")
    hoards_small = check("hoard = []", "while True:", "    hoard.append([0] * 64)")
    raises = check("raise ValueError('no')")
    exits = check("import os", "os._exit(0)")
    kills_itself = check("import os, signal", "os.kill(os.getpid(), signal.SIGKILL)")
    verdicts = judge([check("return True"), spins, hoards, hoards_small, raises, exits,
                      kills_itself])
    assert [v["exhausted"] for v in verdicts] == [None, "time", "memory", "memory", None, None,
                                                  None]
    assert verdicts[0] == {"passed": True, "error": None, "exhausted": None}
    assert verdicts[1]["error"] == "check exceeded its CPU time budget of 0.5 s"
    assert "ran out of memory" in verdicts[2]["error"]
    assert verdicts[4] == {"passed": False, "error": "ValueError: no", "exhausted": None}
    assert "without a verdict" in verdicts[5]["error"]
    # No OOM killer ended it: a check that kills itself earns its error.
    assert verdicts[6]["error"] == "check ended (killed by SIGKILL) without a verdict"
    assert all(v["passed"] is False for v in verdicts[1:])


def test_a_state_too_large_to_parse_within_the_memory_budget_exhausts_memory() -> None:
    large = json.dumps({"rows": [[n] for n in range(2_000_000)]})
    [verdict] = judge([check("return True")], final=large)
    assert verdict["exhausted"] == "memory", verdict


def test_a_check_that_waits_past_its_wall_deadline_runs_out_of_time() -> None:
    [verdict] = judge([check("import time", "time.sleep(60)")], wall_seconds=1)
    assert verdict == {"passed": False, "exhausted": "time",
                       "error": "check blocked for 1 s without finishing (it waited, not computed)"}


def test_a_check_killed_while_the_oom_killer_ran_is_out_of_memory() -> None:
    budget = checker.Budget(cpu_seconds=1, wall_seconds=10, memory_bytes=1 << 20)
    killed = checker._Child(pid=0, fd=-1, status=signal.SIGKILL)  # a wait status: the signal
    assert checker._verdict(killed, budget, oom_killed=True)["exhausted"] == "memory"
    assert checker._verdict(killed, budget, oom_killed=False)["exhausted"] is None


def test_the_verdict_line_carries_exhausted_and_nothing_else_is_accepted() -> None:
    line = b'{"passed": false, "error": "x", "exhausted": "memory"}'
    assert checker._parse(line) == {"passed": False, "error": "x", "exhausted": "memory"}
    assert checker._parse(b'{"passed": true, "error": null}')["exhausted"] is None
    assert checker._parse(b'{"passed": false, "error": "x", "exhausted": "disk"}') is None


def test_checks_exhausted_names_the_check_the_budget_the_setting_and_says_do_not_retry() -> None:
    verdicts = [{"passed": True, "error": None, "exhausted": None},
                {"passed": False, "error": "check exceeded its CPU time budget of 2.1 s",
                 "exhausted": "time"},
                {"passed": False, "error": "ValueError: no", "exhausted": None},
                {"passed": False, "error": "check ran out of memory", "exhausted": "memory"}]
    exhausted = exhaustions(verdicts)
    assert exhausted == [Exhaustion(1, "time", verdicts[1]["error"]),
                         Exhaustion(3, "memory", verdicts[3]["error"])]
    settings = Settings(api_keys=[], check_cpu_seconds=2, check_memory="128m")
    budget = statesize.check_budget(settings, "{}" * 1000, "{}" * 1000)
    items = ["Is it done?", "Does it hang? " + "x" * 200, "Does it raise?", "Does it hoard?"]
    error = faults.checks_exhausted(exhausted, items, budget, settings)
    assert (error.status, error.type) == (500, "CheckExhausted")
    message = error.message
    assert "2 of 4 checks ran out of their budget, so no reward was computed" in message
    assert "checklist[1] ('Does it hang? xxx" in message and "...') ran out of time" in message
    assert "checklist[3] ('Does it hoard?') ran out of memory" in message
    assert "checklist[2]" not in message  # an earned error is not an exhaustion
    assert f"{budget.cpu_seconds:g} s of CPU time" in message
    assert "ENVSCALER_CHECK_CPU_SECONDS=2" in message and "ENVSCALER_CHECK_MEMORY=128m" in message
    assert "ENVSCALER_SANDBOX_MEMORY=256m" in message
    assert "Retrying cannot help" in message and "ChecksStarved" in message


def test_a_long_list_of_exhausted_checks_names_the_first_and_counts_the_rest() -> None:
    exhausted = [Exhaustion(index, "time", "slow") for index in range(5)]
    error = faults.checks_exhausted(exhausted, [f"check {n}" for n in range(5)],
                                    CheckBudget(2.0, 1 << 27), Settings(api_keys=[]))
    assert "checklist[2]" in error.message and "checklist[3]" not in error.message
    assert "and 2 more" in error.message
    assert "ENVSCALER_CHECK_MEMORY" not in error.message  # only what ran out is named


class KillingCheckers:
    """A checker pool whose checks end their checker every time (the pool gives up after two)."""

    async def check(self, checks: list[str], snapshot: Snapshot, budget: CheckBudget) -> None:
        raise ChecksKilledChecker("the checks ended their checker twice: SandboxGone: died")


async def test_checks_that_end_their_checker_are_an_error_of_the_validation_not_a_reward() -> None:
    metrics = Metrics()
    validation = Validator(settings=Settings(), store=None, catalogue=None, locks=None,
                            sandboxes=None, checkers=KillingCheckers(), metrics=metrics)
    with pytest.raises(ApiError) as raised:
        await validation._judge(["def check_func(final_state):\n    return True\n"],
                                Snapshot("{}", "{}"), CheckBudget(1.0, 1 << 26))
    error = raised.value
    assert (error.status, error.type) == (500, "CheckExhausted")
    assert "ended their checker twice" in error.message and "no reward" in error.message
    assert "ENVSCALER_SANDBOX_MEMORY" in error.message and "Retrying cannot help" in error.message
    assert metrics.registry.get_sample_value(
        "envscaler_validations_total", {"outcome": "exhausted"}) == 1
