"""How a benchmark run stops: SIGTERM and SIGINT turned into `Stopped` (once), so that the run
removes what it started before it exits, and the processes it leaves ended, bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path


class Stopped(BaseException):
    """SIGTERM or SIGINT reached the run (a BaseException: no handler of an error swallows it)."""


class StopSignals:
    """SIGTERM and SIGINT, the first of them only: outside an event loop `Stopped` is raised
    wherever the run is; inside one (uvloop would swallow what a handler raises) the loop's tasks
    are cancelled and `envscaler.bench.run._run_async` raises `Stopped` (`raise_if_stopped`) once the loop has unwound. Either way every
    ``finally`` of the run runs. Later signals are ignored while the run removes what it started
    (each step of that is bounded)."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.say: Callable[[str], None] = print

    @contextlib.contextmanager
    def installed(self, say: Callable[[str], None]) -> Iterator[None]:
        self.reason, self.say = None, say
        previous = {signum: signal.signal(signum, self.handle)
                    for signum in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def handle(self, signum: int, _frame: object) -> None:
        if self.reason is not None:
            return
        self.reason = signal.Signals(signum).name
        self.say(f"{self.reason}: stopping; removing what the run started")
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise Stopped(self.reason) from None
        for task in asyncio.all_tasks(loop):
            task.cancel()

    def raise_if_stopped(self) -> None:
        if self.reason is not None:
            raise Stopped(self.reason)


STOP = StopSignals()  # the process's: signal handlers are the process's too


def end_processes(pids: list[int], timeout: float) -> None:
    """SIGTERM, then SIGKILL to those still there after ``timeout`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while (pids := [pid for pid in pids if _running(pid)]) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not pids:
            return


def _running(pid: int) -> bool:
    """Not gone, nor a zombie (reaped by its parent, this process, by the wait here)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
