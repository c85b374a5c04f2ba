"""Where the CPU and the memory go: processes from /proc, containers from their cgroups.

Read-only: nothing here signals or changes a process. Linux only (cgroup v1 with the cgroupfs
driver, as here, or cgroup v2).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

CLOCK_TICK = os.sysconf("SC_CLK_TCK")
CGROUP = Path("/sys/fs/cgroup")
DOCKER_DAEMONS = ("dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "runc")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name is in parentheses and may hold spaces: split after the last ')'
    return text[text.rfind(")") + 2:].split()


def process_cpu(pids: Iterable[int]) -> float:
    """User + system CPU seconds of ``pids`` (threads included; exited children not)."""
    total = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLOCK_TICK


def process_rss(pids: Iterable[int]) -> int:
    """Resident bytes of ``pids``."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
                    break
        except OSError:
            pass
    return total


def descendants(root: int) -> list[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def pids_named(*names: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in names:
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, over all cores."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values[:8])
    return (total - idle) / CLOCK_TICK, total / CLOCK_TICK


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def _cgroup_dir(controller: str, container_id: str) -> Path | None:
    for candidate in (CGROUP / controller / "docker" / container_id,            # v1, cgroupfs
                      CGROUP / controller / "system.slice" / f"docker-{container_id}.scope",
                      CGROUP / "system.slice" / f"docker-{container_id}.scope",  # v2, systemd
                      CGROUP / "docker" / container_id):                        # v2, cgroupfs
        if candidate.is_dir():
            return candidate
    return None


def container_cpu(container_ids: Iterable[str]) -> float:
    """CPU seconds used by the containers so far."""
    total = 0.0
    for cid in container_ids:
        directory = _cgroup_dir("cpuacct", cid)
        if directory is None:
            continue
        try:
            if (directory / "cpuacct.usage").exists():
                total += int((directory / "cpuacct.usage").read_text()) / 1e9
            else:
                for line in (directory / "cpu.stat").read_text().splitlines():
                    if line.startswith("usage_usec"):
                        total += int(line.split()[1]) / 1e6
        except OSError:
            pass
    return total


def container_memory(container_id: str) -> int | None:
    """Bytes charged to the container less its inactive page cache (as ``docker stats``)."""
    directory = _cgroup_dir("memory", container_id)
    if directory is None:
        return None
    try:
        if (directory / "memory.usage_in_bytes").exists():
            usage = int((directory / "memory.usage_in_bytes").read_text())
            key = "total_inactive_file"
        else:
            usage = int((directory / "memory.current").read_text())
            key = "inactive_file"
        for line in (directory / "memory.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return usage - int(value)
        return usage
    except OSError:
        return None


@dataclass
class CpuSnapshot:
    at: float
    groups: dict[str, float]
    machine_busy: float


@dataclass
class CpuMeter:
    """CPU seconds of named groups between two snapshots, as shares of one core."""

    processes: dict[str, list[int]] = field(default_factory=dict)
    containers: list[str] = field(default_factory=list)

    def snapshot(self) -> CpuSnapshot:
        groups = {name: process_cpu(pids) for name, pids in self.processes.items()}
        if self.containers:
            groups["sandboxes"] = container_cpu(self.containers)
        groups["docker daemons"] = process_cpu(pids_named(*DOCKER_DAEMONS))
        return CpuSnapshot(time.perf_counter(), groups, machine_cpu()[0])

    @staticmethod
    def shares(before: CpuSnapshot, after: CpuSnapshot) -> dict[str, float]:
        """Cores used by each group over the interval (2.0 = both cores of this machine)."""
        wall = max(after.at - before.at, 1e-9)
        shares = {name: round((after.groups[name] - before.groups.get(name, 0.0)) / wall, 3)
                  for name in after.groups}
        shares["machine"] = round((after.machine_busy - before.machine_busy) / wall, 3)
        return shares


def background_load(window: float = 1.0) -> float:
    """Cores busy over ``window`` seconds (whatever is running)."""
    busy, _ = machine_cpu()
    time.sleep(window)
    return round((machine_cpu()[0] - busy) / window, 3)


def wait_for_quiet(max_cores: float = 0.3, timeout: float = 60.0) -> float:
    """Wait (at most ``timeout`` s) until the machine is nearly idle; the last load seen. The
    benchmark shares the machine: starting a figure while something else runs skews it."""
    deadline = time.monotonic() + timeout
    load = background_load()
    while load > max_cores and time.monotonic() < deadline:
        load = background_load()
    return load


def process_pss(pids: Iterable[int]) -> int:
    """Proportional set size of ``pids``: shared pages split among their users."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
        except OSError:
            pass
    return total


def shim_pids(container_ids: Iterable[str]) -> list[int]:
    """The containerd shims of these containers (one process outside each container)."""
    wanted = set(container_ids)
    found = []
    for pid in pids_named("containerd-shim", "containerd-shim-runc-v2"):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"-id" in args and args.index(b"-id") + 1 < len(args) \
                and args[args.index(b"-id") + 1].decode() in wanted:
            found.append(pid)
    return found
