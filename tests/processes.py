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
from dataclasses import dataclass
from pathlib import Path

POLL = 0.1
# The Docker engine, which the reliability suite restarts as a child of the test run on purpose,
# and everything under it (containers are checked by their labels instead).
ENGINE_PREFIXES = ("dockerd", "containerd", "docker-proxy")


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    start: int  # clock ticks after boot
    comm: str

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


def subtree(roots: Iterable[int], procs: dict[int, Proc]) -> set[int]:
    """The roots that are alive and all their descendants."""
    children: dict[int, list[int]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found: set[int] = set()
    pending = [pid for pid in roots if pid in procs]
    while pending:
        pid = pending.pop()
        if pid not in found:
            found.add(pid)
            pending.extend(children.get(pid, []))
    return found


def engine(procs: dict[int, Proc]) -> set[int]:
    return subtree((p.pid for p in procs.values() if p.comm.startswith(ENGINE_PREFIXES)), procs)


def marked(procs: dict[int, Proc], environ: bytes, paths: Iterable[str]) -> set[int]:
    """Processes whose environment holds ``environ`` (``NAME=value``), or whose command line or
    working directory names one of ``paths`` (redis-server rewrites its command line over its
    environment, but works in its data directory)."""
    paths = tuple(paths)
    found = set()
    for proc in procs.values():
        cmdline, cwd = proc.cmdline, proc.cwd()
        if (environ in proc.read("environ").split(b"\0")
                or any(path in cmdline or cwd.startswith(path) for path in paths)):
            found.add(proc.pid)
    return found


def wait_gone(find: Callable[[], list[Proc]], timeout: float) -> list[Proc]:
    """What ``find`` still returns after ``timeout`` seconds (at once when it returns nothing)."""
    deadline = time.monotonic() + timeout
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
