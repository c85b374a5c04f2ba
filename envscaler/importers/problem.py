"""What the benchmark importers (BFCL, tau-bench, ACEBench) share of their reports: a record that
could not be imported, and why. (Their folders are written by ``envscaler.format.publish_env``.)"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    record: str  # a question or task id, or an environment's id
    reason: str


__all__ = ["Problem"]
