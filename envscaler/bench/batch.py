"""The batch phase: one training step's sessions from one client process, as a trainer opens them.

``lanes`` sessions are opened at once through `envscaler_client.AsyncEnvClient` (a connection per
lane), each running the trainer's pattern for ``window`` seconds (`envscaler.bench.rollouts`, ``reset``:
reset per episode, the reference solution, validate), then all closed at once. Reported: how long
opening all took and which opens failed (a refused open is a figure, not a crash), the machine's
memory per live session (``MemAvailable`` before and after opening: containers, shims, kernel
objects, Redis and gateway, everything counted), episodes/s over the window, the client process's
CPU, and how long closing all took. `measure_against` compares the batch's episodes/s with the
same pattern at fewer lanes, in turn on one gateway.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from envscaler.bench import rollouts
from envscaler.bench.gateway import Gateway, GatewayOptions
from envscaler.bench.workload import lanes as make_lanes
from envscaler.bench.workload import load_envs
from envscaler.sandbox.image import resolve_image
from envscaler.server.settings import Settings

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


def measure_against(url: str, envs: dict[str, Any], lanes: int, baseline: int, window: float,
                    rounds: int, say: Callable[[str], None] = print) -> dict[str, Any]:
    """The batch of ``lanes`` against the same pattern at ``baseline`` lanes, measured in turn
    ``rounds`` times (the baseline first): on this machine one window's episodes/s drifts by up
    to a fifth from one run to the next, and windows taken in turn share that drift. The first
    batch's figures (its open is the coldest), with ``episodes_per_second`` the mean of the
    batch's windows, ``baseline`` the mean of the baseline's, and ``windows`` every window in
    order."""
    windows, first = [], None
    for _ in range(rounds):
        for count in (baseline, lanes):
            figures = measure(url, envs, count, window)
            say(line(figures))
            windows.append({"lanes": count, "episodes_per_second": figures["episodes_per_second"],
                            "open_seconds": figures["open_all"]["seconds"]})
            if count == lanes and first is None:
                first = figures
    assert first is not None
    return first | {"episodes_per_second": _mean(windows, lanes),
                    "baseline": {"lanes": baseline,
                                 "episodes_per_second": _mean(windows, baseline)},
                    "windows": windows}


def _mean(windows: list[dict[str, Any]], lanes: int) -> float:
    rates = [w["episodes_per_second"] for w in windows if w["lanes"] == lanes]
    return round(sum(rates) / len(rates), 2)


def line(figures: dict[str, Any]) -> str:
    """One line for the run's log."""
    opening, closing = figures["open_all"], figures["close_all"]
    return (f"  batch of {figures['concurrency']}: opened {opening['opened']} in "
            f"{opening['seconds']} s ({opening['failed']} failed), "
            f"{figures['memory']['per_live_session_mib']} MiB per live session, "
            f"{figures['episodes_per_second']} episodes/s, client "
            f"{figures['cpu_share']} cores ({figures['cpu_ms_per_request']} ms/request), "
            f"closed {closing['closed']} in {closing['seconds']} s ({closing['failed']} failed)")


def main(argv: list[str] | None = None) -> None:
    """``python -m envscaler.bench.batch [LANES ...] [--window S]``: the batch phase alone, at each number
    of lanes in turn, on a gateway of its own at `envscaler serve`'s defaults."""
    parser = argparse.ArgumentParser(prog="python -m envscaler.bench.batch", description=main.__doc__)
    parser.add_argument("lanes", type=int, nargs="*", default=[64, 512])
    parser.add_argument("--window", type=float, default=30.0, help="seconds of episodes")
    args = parser.parse_args(argv)
    settings = Settings()
    image = resolve_image(settings)
    envs = load_envs(settings.catalogue, ())
    with Gateway(GatewayOptions(), image, Path(tempfile.mkdtemp(prefix="batch-"))) as gateway:
        gateway.wait_ready()
        for lanes in args.lanes:
            print(line(measure(gateway.url, envs, lanes, args.window)), flush=True)


if __name__ == "__main__":
    main()
