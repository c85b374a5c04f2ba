"""The checker's first pass: every check of a validation in one child, each on its own parse of
the states, with the builtins restored and under its own CPU budget; only the checks that did not
answer a bool are judged again alone. Run in a subprocess of its own (the checker forks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.deadlines import scaled

REPO_ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys
from envscaler.sandbox.runtime import checker
checks = json.loads(sys.argv[1])
budget = checker.Budget(cpu_seconds=0.5, wall_seconds=10, memory_bytes=64 << 20)
c = checker.Checker(contained=False)
try:
    codes = [checker.compiled(source) for source in checks]
    first = c._first_pass(codes, '{"n": 1}', '{"n": 2}', budget)
except SyntaxError:
    first = None  # only the whole check compiles what compiles
print(json.dumps({"first": first, "final": c.check(checks, '{"n": 1}', '{"n": 2}', budget)}))
"""


def check(*lines: str) -> str:
    return "def check_func(final_state):\n" + "".join(f"    {line}\n" for line in lines)


def judge(checks: list[str]) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(checks)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=scaled(60), check=True)
    return json.loads(done.stdout)


def test_bool_answers_are_kept_and_errors_are_judged_again_alone() -> None:
    passes = check("return final_state['n'] == initial_state['n'] + 1")
    fails = check("return final_state['n'] == 5")
    mutates = check("final_state.clear()", "initial_state.clear()", "return True")
    patches = check("import builtins", "builtins.len = lambda x: 0", "return True")
    spins = check("while True:", "    pass")
    raises = check("raise ValueError('no')")
    uses_len = check("return len(final_state) == 1 and final_state['n'] == 2")
    result = judge([passes, fails, mutates, patches, spins, raises, uses_len])
    ok = {"passed": True, "error": None, "exhausted": None}
    no = {"passed": False, "error": None, "exhausted": None}
    assert result["first"] == [ok, no, ok, ok, None, None, ok]  # states and builtins were fresh
    assert result["final"][:4] + result["final"][6:] == [ok, no, ok, ok, ok]
    assert result["final"][4] == {"passed": False,
                                  "error": "check exceeded its CPU time budget of 0.5 s",
                                  "exhausted": "time"}
    assert result["final"][5] == {"passed": False, "error": "ValueError: no", "exhausted": None}


def test_a_check_that_ends_the_first_pass_costs_only_the_checks_after_it_a_second_run() -> None:
    passes = check("return True")
    result = judge([passes, check("import os", "os._exit(0)"), passes])
    assert result["first"] == [{"passed": True, "error": None, "exhausted": None}, None, None]
    assert [verdict["passed"] for verdict in result["final"]] == [True, False, True]


def test_a_state_that_is_not_a_json_object_fails_every_check_with_the_reason() -> None:
    """The runtime sends the states as texts; a runtime that sends something else (one an
    environment took over) earns failed checks that say why, never a pass."""
    done = subprocess.run([sys.executable, "-c", """
import json
from envscaler.sandbox.runtime import checker
budget = checker.Budget(cpu_seconds=0.5, wall_seconds=10, memory_bytes=64 << 20)
c = checker.Checker(contained=False)
checks = ["def check_func(final_state):\\n    return True\\n"] * 2
print(json.dumps([c.check(checks, '{}', '[1]', budget), c.check(checks, '{', '{}', budget)]))
"""], cwd=REPO_ROOT, capture_output=True, text=True, timeout=scaled(60), check=True)
    not_an_object, not_json = json.loads(done.stdout)
    assert not_an_object == [{"passed": False, "error": "the state is a JSON list, not an object",
                              "exhausted": None}] * 2
    assert all(v["passed"] is False and v["error"].startswith("the state is not JSON")
               for v in not_json), not_json


def test_a_source_that_does_not_compile_fails_alone_and_checks_compile_as_fresh_modules() -> None:
    """Checks are compiled by the checker (never run there): one that does not compile fails
    with the compiler's reason while the others are judged; none inherits the checker's
    ``from __future__ import annotations`` (its annotations are evaluated, as in a module)."""
    broken = "def check_func(final_state):\n    return (\n"
    annotated = check("def f(x: int): pass", "return f.__annotations__['x'] is int")
    result = judge([broken, annotated, broken])
    assert result["final"][1] == {"passed": True, "error": None, "exhausted": None}
    for verdict in (result["final"][0], result["final"][2]):
        assert verdict["passed"] is False and verdict["error"].startswith("SyntaxError: '('")
