"""Processes found in ``/proc``: the suite's check that no test leaves one running
(``tests/conftest.py``) and the tests that `envscaler serve` leaves nothing behind.

A process is told apart from a later one with a recycled pid by its start time. Zombies count as
gone: they run nothing and only wait for their parent to read their status.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tests.deadlines import scaled

POLL = 0.1
# The Docker engine, which the reliability suite restarts as a child of the test run on purpose,
# and everything under it (containers are checked by their labels instead).
ENGINE_PREFIXES = ("dockerd", "containerd", "docker-proxy")


@dataclass(frozen=True, order=True)
class Proc:
    """One process, equal to another only if both pid and start time are (not its parent,
    which changes when it is orphaned)."""

    pid: int
    ppid: int = field(compare=False)
    start: int  # clock ticks after boot
    comm: str = field(compare=False)

    def read(self, name: str) -> bytes:
        """A ``/proc/<pid>/`` file, or nothing if the process is gone or hides it."""
        try:
            return Path(f"/proc/{self.pid}/{name}").read_bytes()
        except OSError:
            return b""

    @property
    def cmdline(self) -> str:
        return self.read("cmdline").replace(b"\0", b" ").decode(errors="replace").strip()

    def cwd(self) -> str:
        try:
            return os.readlink(f"/proc/{self.pid}/cwd")
        except OSError:
            return ""

    def __str__(self) -> str:
        return f"pid {self.pid} (parent {self.ppid}): {self.cmdline or self.comm}"


def _read(pid: str) -> Proc | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] in "ZX":
        return None
    return Proc(int(pid), int(fields[1]), int(fields[19]), comm)


def running() -> dict[int, Proc]:
    """Every process that is alive (not a zombie), by pid."""
    found = (_read(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit())
    return {proc.pid: proc for proc in found if proc is not None}


def _children(pid: int) -> list[int]:
    """Children of every thread of ``pid`` (each thread lists those it forked)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found = []
    for task in tasks:
        try:
            found += [int(child) for child in
                      Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            pass
    return found


def _engine(proc: Proc) -> bool:
    return proc.comm.startswith(ENGINE_PREFIXES)


def descendants(root: int) -> list[Proc]:
    """The live descendants of ``root``, walked down from it (cheaper than a scan of /proc),
    not under the Docker engine."""
    found: list[Proc] = []
    pending = _children(root)
    while pending:
        proc = _read(str(pending.pop()))
        if proc is not None and not _engine(proc):
            found.append(proc)
            pending += _children(proc.pid)
    return found


def marked(procs: dict[int, Proc], environ: bytes, paths: Iterable[str]) -> set[int]:
    """Processes whose environment holds ``environ`` (``NAME=value``), or whose command line or
    working directory names one of ``paths`` (redis-server rewrites its command line over its
    environment, but works in its data directory); not the Docker engine's."""
    paths = tuple(paths)
    found = set()
    for proc in procs.values():
        if _engine(proc):
            continue
        cmdline, cwd = proc.cmdline, proc.cwd()
        if (environ in proc.read("environ").split(b"\0")
                or any(path in cmdline or cwd.startswith(path) for path in paths)):
            found.add(proc.pid)
    return found


def wait_gone(find: Callable[[], list[Proc]], timeout: float) -> list[Proc]:
    """What ``find`` still returns after ``timeout`` seconds (at once when it returns nothing)."""
    deadline = time.monotonic() + scaled(timeout)
    while (left := find()) and time.monotonic() < deadline:
        time.sleep(POLL)
    return left


def kill(procs: Iterable[Proc]) -> None:
    """SIGKILL each process, unless its pid now belongs to another one."""
    for proc in procs:
        if _read(str(proc.pid)) == proc:
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
