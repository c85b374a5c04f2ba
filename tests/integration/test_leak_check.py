"""The suite's own process check (tests/conftest.py) fails a test that leaves a child running, and
the run when one of its processes was orphaned (re-parented away from pytest), names them and
kills them: proved on an inner pytest run of two leaking tests."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

from tests import processes
from tests.conftest import REPO_ROOT, RUN_ENV
from tests.deadlines import scaled

LEAKING_TESTS = """
import subprocess

def test_leaves_a_child():
    subprocess.Popen(["sleep", "61"])

def test_leaves_an_orphan():
    subprocess.run(["sh", "-c", "sleep 62 >/dev/null 2>&1 &"], check=True)
"""


def test_a_leaking_test_and_a_leaking_run_fail_and_their_processes_are_killed(
        tmp_path: Path) -> None:
    (tmp_path / "test_leaks.py").write_text(textwrap.dedent(LEAKING_TESTS))
    inner_run = f"inner-{secrets.token_hex(4)}"
    marker = f"{RUN_ENV}={inner_run}".encode()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
             "-c", str(REPO_ROOT / "pyproject.toml"), f"--basetemp={tmp_path / 'inner'}",
             str(tmp_path / "test_leaks.py")],
            cwd=REPO_ROOT, env={**os.environ, RUN_ENV: inner_run}, capture_output=True, text=True,
            timeout=scaled(120))
        output = result.stdout + result.stderr
        assert result.returncode == 1, output
        assert re.search(r"the test left 1 processes running \(now killed\):\n"
                         r"pid \d+ \(parent \d+\): sleep 61\n", output), output
        assert re.search(r"the test run left 1 processes running \(now killed\):\n"
                         r"pid \d+ \(parent \d+\): sleep 62\n", output), output
        assert not processes.marked(processes.running(), marker, [])
    finally:
        procs = processes.running()
        processes.kill(procs[pid] for pid in processes.marked(procs, marker, []))
