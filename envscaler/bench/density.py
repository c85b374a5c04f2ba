"""Many live sessions at once: what each costs in memory, and what the machine has left.

Memory per session: the sandbox containers' own cgroup memory (usage less inactive page cache, as
``docker stats``) plus Redis's ``used_memory`` (records and trajectories), over the live sessions;
and apart, what each container costs outside itself: its containerd shim (proportional set size,
so that the shim binary's shared pages are counted once)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from envscaler.bench.gateway import Gateway
from envscaler.bench.procstat import container_memory, process_pss, process_rss, shim_pids

MIB = 2**20


def host_limits() -> dict[str, Any]:
    """The limits that a thousand containers meet first."""
    def read(path: str) -> str:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return "?"
    import resource
    return {"cores": os.cpu_count(), "mem_total_gib": round(_meminfo("MemTotal") / 2**30, 1),
            "pid_max": read("/proc/sys/kernel/pid_max"),
            "threads_max": read("/proc/sys/kernel/threads-max"),
            "file_max": read("/proc/sys/fs/file-max"),
            "open_files_soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}


def tasks_on_host() -> int:
    """Threads of every process (what ``pid_max`` bounds)."""
    return int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])


def _meminfo(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    return 0


def measure(gateway: Gateway, sessions: int, redis_before: int) -> dict[str, Any]:
    containers = gateway.containers()
    memories = [m for m in (container_memory(cid) for cid in containers) if m is not None]
    redis_bytes = gateway.redis_memory()
    shims = process_pss(shim_pids(containers))
    total_containers = sum(memories)
    return {
        "live_sessions": sessions,
        "containers": len(containers),
        "container_mib_mean": round(total_containers / max(len(memories), 1) / MIB, 2),
        "container_mib_total": round(total_containers / MIB, 1),
        "redis_kib_per_session": round((redis_bytes - redis_before) / max(sessions, 1) / 1024, 1),
        "redis_mib_total": round(redis_bytes / MIB, 1),
        "per_session_mib": round((total_containers + redis_bytes - redis_before)
                                 / max(sessions, 1) / MIB, 2),
        "shim_mib_per_container": round(shims / max(len(containers), 1) / MIB, 2),
        "gateway_rss_mib": round(process_rss(gateway.pids()) / MIB, 1),
        "host_tasks": tasks_on_host(),
    }
