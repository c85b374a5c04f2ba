"""What a benchmark run measures and how much: the ``quick``, ``full`` and ``tiny`` presets."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

CALL_ENVS = ("library_loans", "subscription_billing")  # hand-written, and one synthesized


@dataclass
class BenchConfig:
    mode: str
    envs: tuple[str, ...] = CALL_ENVS
    # concurrency levels per environment (one session per concurrent caller)
    levels: dict[str, tuple[int, ...]] = field(default_factory=dict)
    warmup: float = 0.5             # seconds of load before each measuring window
    duration: float = 3.0           # seconds of each measuring window
    workers: int | None = None      # gateway workers; None: `envscaler serve`'s default
    pool_size: int = 24             # warm sandboxes per worker
    warm_creations: int = 20        # sessions created one at a time from the warm pool
    cold_creations: int = 10        # sessions created one at a time with no warm pool
    resets: int = 50
    validations: int = 20           # one at a time, on a scenario with 4 checks
    validate_concurrency: int = 64  # validations at once, one session each (of the call sessions)
    fork_rounds: int = 10           # groups had by one fork, by opens, by opens given the prefix
    fork_count: int = 8             # sessions of a group (the paper's GRPO group)
    baseline_calls: int = 20000     # direct method calls in the throwaway container
    runtime_calls: int = 2000       # round trips to a sandbox runtime, no gateway
    host_calls: int = 2000          # the same round trips through a sandbox host (TCP)
    host_lanes: int = 64            # sandboxes called at once over 1, 2, 3 sandbox hosts
    host_seconds: float = 5.0       # how long each number of hosts is measured
    host_counts: tuple[int, ...] = (1, 2, 3)
    density_sessions: int = 0       # 0: measure the sessions already live after the call figures
    density_concurrency: int = 64
    # concurrent reference episodes (lanes) per pattern: a session opened per episode, or reset
    episode_levels: dict[str, tuple[int, ...]] = field(
        default_factory=lambda: {"open": (64, 256), "reset": (64, 256)})
    episode_window: float = 5.0     # lanes start episodes for this long (each runs one at least)
    inprocess_seconds: float = 2.0  # in-process episodes, timed for at least this long
    batch_lanes: int = 512          # the batch phase: sessions opened at once by one client,
    batch_window: float = 30.0      # running episodes for this long (envscaler/bench/batch.py),
    batch_baseline: int = 64        # against the same pattern at this many lanes,
    batch_rounds: int = 0           # the two measured in turn this many times (0: not compared)
    # the large-state environment (envscaler/bench/largestate.py): database sizes (MB), and per size the
    # sessions opened, calls, state reads and validations, one at a time
    large_state_sizes: tuple[float, ...] = (1, 3, 30)
    large_state_opens: int = 10
    large_state_calls: int = 200
    large_state_reads: int = 5
    large_state_validations: int = 3
    quiet_cores: float = 0.3        # wait for the machine to be this idle before each figure,
    quiet_timeout: float = 10.0     # at most this long per figure,
    quiet_budget: float = 30.0      # and this long in all

    def to_dict(self) -> dict[str, Any]:
        """As written to results.json (tuples as lists)."""
        return json.loads(json.dumps(asdict(self)))


def preset(mode: str) -> BenchConfig:
    if mode == "quick":  # neither calls nor a session per episode at 256: the engine's time
        return BenchConfig(mode="quick", levels={"library_loans": (1, 16, 64),
                                                 "subscription_billing": (1, 64)},
                           pool_size=12, warm_creations=10, cold_creations=8,
                           episode_levels={"open": (64,), "reset": (64, 256)},
                           batch_lanes=64, batch_window=10.0)
    if mode == "full":
        return BenchConfig(mode="full", levels={env: (1, 16, 64, 256) for env in CALL_ENVS},
                           warmup=2.0, duration=10.0, pool_size=64, warm_creations=60,
                           cold_creations=30, resets=300, validations=100, baseline_calls=100000,
                           runtime_calls=10000, density_sessions=1000, episode_window=20.0,
                           inprocess_seconds=10.0, quiet_timeout=60.0, quiet_budget=600.0,
                           host_calls=10000, host_seconds=10.0, batch_rounds=2)
    if mode == "tiny":  # the test suite's: every figure, a few samples each
        return BenchConfig(mode="tiny", envs=("library_loans",), levels={"library_loans": (1, 4)},
                           warmup=0.1, duration=0.5, pool_size=3, warm_creations=2,
                           cold_creations=2, resets=3, validations=2, validate_concurrency=3,
                           fork_rounds=1, fork_count=2,
                           baseline_calls=200, runtime_calls=50, density_sessions=6,
                           density_concurrency=4, episode_levels={"open": (3,), "reset": (3, 6)},
                           episode_window=0.0, inprocess_seconds=0.0, batch_lanes=4,
                           batch_window=0.0, batch_baseline=2, batch_rounds=1, quiet_timeout=0.0,
                           quiet_budget=0.0, large_state_sizes=(0.05, 0.2), large_state_opens=2,
                           large_state_calls=10, large_state_reads=1, large_state_validations=1,
                           host_calls=50, host_lanes=4, host_seconds=0.5, host_counts=(1, 2))
    raise ValueError(f"unknown mode {mode!r}; expected quick, full or tiny")
