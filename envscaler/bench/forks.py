"""Fork against open: a group of sessions at step k of an episode, as GRPO's groups start.

Per round, a parent session is taken through the first ``k`` calls of a reference solution;
then the same group of ``count`` sessions at that point is had three ways, one request at a time
over one keep-alive connection: one fork request; ``count`` opens (at step 0 only); ``count``
opens each given the same ``k`` calls (what a trainer does without fork). The sessions of each
way are deleted before the next, so every way draws on the same warm pool."""

from __future__ import annotations

import time
from typing import Any

from envscaler.bench.http import HttpConnection
from envscaler.bench.stats import summary
from envscaler.bench.workload import Episode


def fork_vs_open(port: int, episode: Episode, rounds: int, count: int) -> dict[str, Any]:
    prefix = episode.solution[:-1] or episode.solution
    samples: dict[str, list[float]] = {"fork": [], "open": [], "open_and_replay": []}
    with HttpConnection("127.0.0.1", port) as conn:
        for _ in range(rounds):
            parent = _open(conn, episode)
            _calls(conn, parent, prefix)
            started = time.perf_counter()
            _, forked = conn.timed("POST", f"/v1/sessions/{parent}/fork", {"count": count},
                                   expect=201)
            samples["fork"].append(time.perf_counter() - started)
            _delete(conn, [parent, *(s["session_id"] for s in forked["sessions"])])
            for way, given in (("open", []), ("open_and_replay", prefix)):
                started = time.perf_counter()
                opened = [_open(conn, episode) for _ in range(count)]
                for session_id in opened:
                    _calls(conn, session_id, given)
                samples[way].append(time.perf_counter() - started)
                _delete(conn, opened)
    return {"count": count, "step": len(prefix), "rounds": rounds, "env": episode.env,
            "scenario": episode.scenario, **{way: summary(s) for way, s in samples.items()}}


def _open(conn: HttpConnection, episode: Episode) -> str:
    _, body = conn.timed("POST", "/v1/sessions", {"env": episode.env,
                                                  "scenario": episode.scenario}, expect=201)
    return body["session_id"]


def _calls(conn: HttpConnection, session_id: str, calls: list[dict[str, Any]]) -> None:
    for call in calls:
        _, body = conn.timed("POST", f"/v1/sessions/{session_id}/calls", call)
        if not body.get("ok"):
            raise RuntimeError(f"the reference call {call['name']} failed: {body}")


def _delete(conn: HttpConnection, ids: list[str]) -> None:
    for session_id in ids:
        conn.timed("DELETE", f"/v1/sessions/{session_id}")
