"""The batch phase: one training step's sessions from one client process, as a trainer opens them.

``lanes`` sessions are opened at once through `envscaler_client.AsyncEnvClient` (a connection per
lane), each running the trainer's pattern for ``window`` seconds (`bench.rollouts`, ``reset``:
reset per episode, the reference solution, validate), then all closed at once. Reported: how long
opening all took and which opens failed (a refused open is a figure, not a crash), the machine's
memory per live session (``MemAvailable`` before and after opening: containers, shims, kernel
objects, Redis and gateway, everything counted), episodes/s over the window, the client process's
CPU, and how long closing all took.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from bench import rollouts
from bench.workload import lanes as make_lanes

TIMEOUT = 1800.0


def measure(url: str, envs: dict[str, Any], lanes: int, window: float) -> dict[str, Any]:
    """The phase's figures (see the module's docstring), from a client process of its own."""
    spec = {"url": url, "pattern": "reset", "window": window,
            "lanes": [[asdict(episode) for episode in lane] for lane in make_lanes(envs, lanes)]}
    result = rollouts.spawn(spec, timeout=TIMEOUT)
    figures = {key: value for key, value in result.items() if key not in ("pattern", "memory")}
    memory = dict(result["memory"])
    opened = result["open_all"]["opened"]
    used = memory["available_before_mib"] - memory["available_after_mib"]
    memory["per_live_session_mib"] = round(used / opened, 1) if opened else None
    figures["memory"] = memory
    return figures


def line(figures: dict[str, Any]) -> str:
    """One line for the run's log."""
    opening, closing = figures["open_all"], figures["close_all"]
    return (f"  batch of {figures['concurrency']}: opened {opening['opened']} in "
            f"{opening['seconds']} s ({opening['failed']} failed), "
            f"{figures['memory']['per_live_session_mib']} MiB per live session, "
            f"{figures['episodes_per_second']} episodes/s, client "
            f"{figures['cpu_share']} cores ({figures['cpu_ms_per_request']} ms/request), "
            f"closed {closing['closed']} in {closing['seconds']} s ({closing['failed']} failed)")
