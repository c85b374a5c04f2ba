"""Session life-cycle figures, one request at a time over one keep-alive connection: creation
(from the warm pool, or cold), reset, validation (of a session the reference solution solved).
One connection means one gateway worker, so a warm-creation run takes at most that worker's
pool."""

from __future__ import annotations

from typing import Any

from envscaler.bench.http import HttpConnection
from envscaler.bench.stats import summary
from envscaler.bench.workload import Episode, Probe


def create_sessions(port: int, probe: Probe, count: int) -> tuple[dict[str, Any], list[str]]:
    samples, ids = [], []
    with HttpConnection("127.0.0.1", port) as conn:
        for _ in range(count):
            seconds, body = conn.timed("POST", "/v1/sessions",
                                       {"env": probe.env, "scenario": probe.scenario}, expect=201)
            samples.append(seconds)
            ids.append(body["session_id"])
    return summary(samples), ids


def resets(port: int, session_id: str, count: int) -> dict[str, Any]:
    samples, reused = [], 0
    with HttpConnection("127.0.0.1", port) as conn:
        for _ in range(count):
            seconds, body = conn.timed("POST", f"/v1/sessions/{session_id}/reset", {})
            samples.append(seconds)
            reused += bool(body.get("sandbox_reused"))
    return {**summary(samples), "sandbox_reused": reused}


def validations(port: int, session_id: str, count: int) -> dict[str, Any]:
    samples, checks, reward = [], 0, None
    with HttpConnection("127.0.0.1", port) as conn:
        for _ in range(count):
            seconds, body = conn.timed("POST", f"/v1/sessions/{session_id}/validate")
            samples.append(seconds)
            checks, reward = body["total"], body["reward"]
    return {**summary(samples), "checks_per_validation": checks, "reward": reward}


def solve(port: int, session_ids: list[str], episode: Episode) -> None:
    """Each session reset to the episode's scenario and taken through its reference solution
    (unmeasured), so that validating it checks a solved episode, as a trainer's validation does."""
    with HttpConnection("127.0.0.1", port) as conn:
        for session_id in session_ids:
            conn.timed("POST", f"/v1/sessions/{session_id}/reset", {"scenario": episode.scenario})
            for call in episode.solution:
                _, body = conn.timed("POST", f"/v1/sessions/{session_id}/calls", call)
                if not body.get("ok"):
                    raise RuntimeError(f"the reference call {call['name']} failed: {body}")


def delete_sessions(port: int, ids: list[str]) -> None:
    with HttpConnection("127.0.0.1", port) as conn:
        for session_id in ids:
            conn.timed("DELETE", f"/v1/sessions/{session_id}")
