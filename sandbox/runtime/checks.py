"""Runs check functions, each in its own interpreter with its own deadline and bounded output.

A check is untrusted code: it may loop, print gigabytes, or mutate what it is given. Each one runs
``check_driver.py`` in a fresh ``python3 -I -S``, at most ``MAX_PARALLEL`` at a time, is killed at
its deadline, and has its stdout capped and only the tail of its stderr kept, so one bad check
costs its own verdict and nothing else.
"""

from __future__ import annotations

import json
import os
import select
import selectors
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.runtime.determinism import REAL_MONOTONIC

DRIVER = Path(__file__).with_name("check_driver.py")
MAX_PARALLEL = 4
MAX_VERDICT_BYTES = 64 * 1024
STDERR_TAIL_BYTES = 2000
_READ_CHUNK = 65536


@dataclass
class _Run:
    """What a bounded child process left behind."""

    returncode: int | None  # None: killed at the deadline
    stdout: bytes
    stderr_tail: bytes
    overflowed: bool


def run_checks(checks: list[str], initial_state: str, final_state: str,
               timeout: float) -> list[dict[str, Any]]:
    """Verdicts ``{"passed", "error"}`` in the order of ``checks``; states are JSON texts."""
    if not checks:
        return []
    try:
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(checks))) as pool:
            return list(pool.map(
                lambda source: run_check(source, initial_state, final_state, timeout), checks))
    except RuntimeError:  # no thread could start (the sandbox's process limit): one at a time
        return [run_check(source, initial_state, final_state, timeout) for source in checks]


def run_check(source: str, initial_state: str, final_state: str, timeout: float) -> dict[str, Any]:
    payload = (f'{{"source":{json.dumps(source)},"initial_state":{initial_state},'
               f'"final_state":{final_state}}}').encode()
    try:
        run = _run_bounded([sys.executable, "-I", "-S", str(DRIVER)], payload, timeout)
    except OSError as exc:  # e.g. the process limit, reached by what the environment runs
        return {"passed": False, "error": f"the check could not start: {exc.strerror or exc}"}
    if run.returncode is None:
        return {"passed": False, "error": f"check timed out after {timeout:g} s"}
    if run.overflowed:
        return {"passed": False,
                "error": f"check wrote more than {MAX_VERDICT_BYTES} bytes of verdict"}
    verdict = _parse_verdict(run.stdout)
    if verdict is None:
        tail = run.stderr_tail.decode("utf-8", "replace").strip()
        return {"passed": False,
                "error": f"check driver exited with status {run.returncode} and no verdict: {tail}"}
    return verdict


def _parse_verdict(stdout: bytes) -> dict[str, Any] | None:
    try:
        verdict = json.loads(stdout)
    except ValueError:
        return None
    if (not isinstance(verdict, dict) or type(verdict.get("passed")) is not bool
            or not isinstance(verdict.get("error"), (str, type(None)))):
        return None
    return {"passed": verdict["passed"], "error": verdict["error"]}


def _run_bounded(argv: list[str], payload: bytes, timeout: float) -> _Run:
    """Like ``Popen.communicate(payload, timeout)``, but stdout is capped at
    ``MAX_VERDICT_BYTES`` and only the last ``STDERR_TAIL_BYTES`` of stderr are kept, so a
    chatty check cannot exhaust the sandbox's memory. The child is killed at the deadline, and
    whatever it started is killed with it when it ends (its own process group), so a check that
    forks cannot leave processes behind to starve the next checks of the sandbox's process
    limit."""
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    assert process.stdin and process.stdout and process.stderr
    deadline = REAL_MONOTONIC() + timeout
    stdout, stderr = bytearray(), bytearray()
    pending = memoryview(payload)
    timed_out = overflowed = False
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdin, selectors.EVENT_WRITE)
        selector.register(process.stdout, selectors.EVENT_READ, stdout)
        selector.register(process.stderr, selectors.EVENT_READ, stderr)
        while selector.get_map() and not overflowed:
            remaining = deadline - REAL_MONOTONIC()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in selector.select(remaining):
                if key.fileobj is process.stdin:
                    pending = _write_some(key.fd, pending)
                    if not pending:
                        selector.unregister(process.stdin)
                        process.stdin.close()
                    continue
                chunk = os.read(key.fd, _READ_CHUNK)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
                overflowed = len(stdout) > MAX_VERDICT_BYTES
                del stderr[:-STDERR_TAIL_BYTES]
    if timed_out or overflowed:
        _kill_group(process.pid)
    returncode = process.wait()
    _kill_group(process.pid)  # what the check left running (the group id stays reserved)
    for stream in (process.stdin, process.stdout, process.stderr):
        stream.close()
    return _Run(None if timed_out else returncode, bytes(stdout), bytes(stderr), overflowed)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _write_some(fd: int, pending: memoryview) -> memoryview:
    """Write what the pipe takes now; a driver that died early simply gets no more input."""
    try:
        written = os.write(fd, pending[:select.PIPE_BUF])
    except BrokenPipeError:
        return pending[:0]
    return pending[written:]
