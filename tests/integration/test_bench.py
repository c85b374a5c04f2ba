"""The benchmark machinery (`envscaler bench`) on a tiny configuration: every figure is produced
and written in its shape. Speed is measured by the benchmark, never asserted here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envscaler.bench import report
from envscaler.bench.config import preset
from envscaler.bench.rollouts import PATTERNS
from envscaler.bench.run import VALIDATE_CHECKS, run

pytestmark = [pytest.mark.docker, pytest.mark.redis]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.timeout(600)
def test_tiny_benchmark_writes_every_figure(sandbox_image: str, tmp_path: Path) -> None:
    config = preset("tiny")
    results = run(config, tmp_path, say=lambda _line: None)

    written = json.loads((tmp_path / "results.json").read_text())
    assert written == results
    assert set(written) == {"meta", "config", "sessions", "calls", "baselines", "hosts",
                            "density", "validate", "forks", "episodes", "batch", "lease_expiries",
                            "large_state", "floors"}
    assert written["meta"]["containers_left"] == 0
    assert written["meta"]["gateway"].startswith("envscaler serve (its default: ")
    assert isinstance(written["lease_expiries"], int)

    for env_id, levels in written["calls"].items():
        assert list(levels) == [str(level) for level in config.levels[env_id]]
        for level, result in levels.items():
            assert result["connections"] == int(level)
            assert result["failed"] == 0
            assert result["summary"]["n"] > 0 and result["ok_bodies"] == result["summary"]["n"]
            assert {"p50_ms", "p99_ms"} <= set(result["summary"])
            assert {"gateway", "sandboxes", "redis", "load generator", "other",
                    "machine"} <= set(result["cpu_cores"])

    sessions = written["sessions"]
    assert sessions["create_warm"]["n"] == config.warm_creations
    assert sessions["create_cold"]["n"] == config.cold_creations
    assert sessions["reset"]["n"] == config.resets
    assert sessions["reset"]["sandbox_reused"] == config.resets

    assert written["baselines"]["in_process"]["n"] == config.baseline_calls
    assert written["baselines"]["in_process"]["result_ok"] is True
    assert written["baselines"]["runtime"]["n"] == config.runtime_calls
    assert written["hosts"]["hop"]["n"] == config.host_calls
    assert list(written["hosts"]["scaling"]) == [str(count) for count in config.host_counts]
    for count, spread in written["hosts"]["scaling"].items():
        assert spread["hosts_used"] == int(count) and spread["rps"] > 0

    density = written["density"]
    assert density["live_sessions"] == config.density_sessions
    assert density["containers"] >= config.density_sessions
    assert density["per_session_mib"] > 0 and density["calls"]["failed"] == 0

    validate = written["validate"]
    assert validate["checks"] == VALIDATE_CHECKS and validate["reward"] == 1.0
    assert list(validate["concurrency"]) == ["1", str(config.validate_concurrency)]
    assert validate["concurrency"]["1"]["n"] == config.validations
    many = validate["concurrency"][str(config.validate_concurrency)]
    assert many["connections"] == config.validate_concurrency and many["failed"] == 0
    assert many["summary"]["n"] > 0 and {"p50_ms", "p99_ms"} <= set(many["summary"])

    forked = written["forks"]
    assert (forked["count"], forked["rounds"]) == (config.fork_count, config.fork_rounds)
    assert forked["step"] >= 1
    for way in ("fork", "open", "open_and_replay"):
        assert forked[way]["n"] == config.fork_rounds and forked[way]["p50_ms"] > 0

    large = written["large_state"]
    assert large["small_call"]["n"] == config.large_state_calls
    assert large["shared_custom_start"]["sessions"] == config.large_state_opens
    assert large["shared_custom_start"]["init_bytes"] > 0
    for megabytes in config.large_state_sizes:
        size = large[f"order_desk-{megabytes:g}mb"]
        assert size["state_bytes"] > megabytes * 1_000_000 and size["reward"] == 1.0
        assert size["open"]["n"] == config.large_state_opens
        assert size["call"]["n"] == config.large_state_calls
        assert size["validate"]["n"] == config.large_state_validations
        assert size["redis_bytes_per_closed_session"] < size["state_bytes"]  # not the database

    inproc = written["episodes"]["in_process"]
    assert inproc["scenarios"] > 0 and inproc["episodes"] >= inproc["scenarios"]
    assert inproc["rewards"] == {"1.0": inproc["scenarios"], "below_1": 0}
    assert inproc["episodes_per_second"] > 0
    runs = written["episodes"]["runs"]
    assert list(runs) == list(PATTERNS)
    for pattern, by_level in runs.items():
        assert list(by_level) == [str(level) for level in config.episode_levels[pattern]]
        for level, result in ((int(k), r) for k, r in by_level.items()):
            # a window of 0 s: each lane (one environment each) runs exactly one episode
            assert result["episodes"] == result["scenarios"] == level
            assert result["errors"] == {} and result["tool_errors"] == {}
            assert result["rewards"] == {"1.0": level, "below_1": 0}  # the solutions solve
            assert result["open"]["n"] == result["close"]["n"] == result["validate"]["n"] == level
            assert result["reset"]["n"] == (level if pattern == "reset" else 0)
            assert result["call"]["n"] > 0 and result["episodes_per_second"] > 0
            assert result["gateway_to_in_process"] > 0
            assert isinstance(result["lease_expiries"], int)

    batch = written["batch"]  # envscaler/bench/batch.py's own test covers its figures
    assert batch["concurrency"] == config.batch_lanes
    assert batch["open_all"]["opened"] == batch["close_all"]["closed"] == config.batch_lanes
    assert batch["rewards"] == {"1.0": config.batch_lanes, "below_1": 0}
    assert batch["memory"]["per_live_session_mib"] is not None
    # measured in turn with the same pattern at fewer lanes (tiny: 2 lanes, then 4, once)
    assert [w["lanes"] for w in batch["windows"]] == [config.batch_baseline, config.batch_lanes]
    assert batch["baseline"] == {"lanes": config.batch_baseline,
                                 "episodes_per_second": batch["windows"][0]["episodes_per_second"]}
    assert batch["episodes_per_second"] == batch["windows"][1]["episodes_per_second"]

    assert [f["floor"] for f in written["floors"]] == [f["floor"] for f in report.floors(written)]
    assert all(set(f) == {"floor", "target", "measured", "met"} for f in written["floors"])

    table = (tmp_path / "results.md").read_text()
    for heading in ("## Tool calls through the gateway", "## The same call without the gateway",
                    "## Session life cycle", "## Density", "## Validation", "## Episodes",
                    "## Batch", "## Floors"):
        assert heading in table
    assert "Measured in turn on the same gateway" in table
    rows = [line for line in table.splitlines() if line.startswith("| library_loans (`")]
    assert len(rows) == len(config.levels["library_loans"])
    rows = [line for line in table.splitlines() if line.startswith(("| open per", "| reset per"))]
    assert len(rows) == sum(map(len, config.episode_levels.values()))

    for name in ("calls.png", "cpu.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000


def test_floors_from_a_full_results_shape() -> None:
    """`report.floors` reads every floor from results shaped as a run writes them."""
    def episodes(done: int, perfect: int) -> dict[str, object]:
        return {"episodes": done, "rewards": {"1.0": perfect, "below_1": done - perfect},
                "errors": {}}

    results = {
        "config": {"envs": ["library_loans"]},
        "calls": {"library_loans": {"1": {"summary": {"p50_ms": 1.5}},
                                    "64": {"rps": 2100.0, "summary": {"p50_ms": 30.0}}}},
        "sessions": {"create_warm": {"p50_ms": 8.0}, "reset": {"p50_ms": 11.0}},
        "validate": {"concurrency": {"1": {"p50_ms": 12.0}, "64": {"summary": {"p99_ms": 300.0}}}},
        "episodes": {"runs": {"open": {"64": {"episodes_per_second": 20.0},
                                       "256": episodes(256, 256)},
                              "reset": {"64": {"episodes_per_second": 60.0},
                                        "256": episodes(300, 299)}}},
        "lease_expiries": 0,
        "density": {"live_sessions": 1000, "calls": {"summary": {"p99_ms": 900.0}}},
        "large_state": {"small_call": {"p50_ms": 2.0},
                        "order_desk-3mb": {"call": {"p50_ms": 2.5}, "open": {"p50_ms": 140.0},
                                           "redis_bytes_per_closed_session": 30_000},
                        "order_desk-30mb": {"refused": "... set by ENVSCALER_MAX_STATE_BYTES"}},
        "forks": {"count": 8, "fork": {"p50_ms": 90.0}, "open": {"p50_ms": 100.0}},
        "batch": {"concurrency": 512, "open_all": {"seconds": 4.5, "failed": 0},
                  "memory": {"per_live_session_mib": 12.5}, "episodes_per_second": 57.0,
                  "baseline": {"lanes": 64, "episodes_per_second": 60.0}},
    }
    met = [f["met"] for f in report.floors(results)]
    assert met == [True, True, True, False, True, False, None, True, False, True, True,
                   True, False, True, True, False, True, True, True]
    batch = report.floors(results)[-8:-5]
    assert [f["measured"] for f in batch] == ["4.5 s, 0 failed", "12.5 MiB", "0.95 x"]
    # the ratio is the batch phase's own, against its windows at 64 lanes; none without them
    results["batch"]["baseline"] = {"lanes": 32, "episodes_per_second": 60.0}
    assert report.floors(results)[-6]["met"] is None
    results["batch"]["baseline"] = {"lanes": 64, "episodes_per_second": 60.0}
    results["batch"]["open_all"]["failed"] = 3
    assert report.floors(results)[-8]["met"] is False
    results["batch"]["concurrency"] = 64  # --quick's batch: shown, not judged
    assert [f["met"] for f in report.floors(results)[-8:-5]] == [None, None, None]
    rewards = report.floors(results)[-11]
    assert rewards["measured"] == "555 of 556 at 1.0, 0 failed"
    results["episodes"]["runs"]["reset"]["256"] = episodes(300, 300)
    assert report.floors(results)[-11]["met"] is True
    results["episodes"]["runs"]["open"]["256"]["errors"] = {"ReadTimeout": 1}
    assert report.floors(results)[-11]["met"] is False
    results["large_state"]["order_desk-30mb"] = {"reward": 0.75}
    assert report.floors(results)[-2]["met"] is False
    results["forks"]["fork"]["p50_ms"] = 130.0  # dearer than opening as many
    assert report.floors(results)[-1] == {
        "floor": "fork of 8 at step k / opening as many, p50", "target": "<= 1",
        "measured": "1.3 x", "met": False}
    results["large_state"]["order_desk-30mb"] = {"reward": None,
                                                 "no_reward": "CheckExhausted: 1 of 4 checks"}
    unjudged = report.floors(results)[-2]
    assert unjudged["met"] is False
    assert unjudged["measured"] == "no reward: CheckExhausted: 1 of 4 checks"
    results["lease_expiries"] = 2
    assert report.floors(results)[-10]["met"] is False
    results["density"]["calls"]["summary"]["p99_ms"] = 1200.0
    assert report.floors(results)[-9]["met"] is False
    results["density"]["live_sessions"] = 100  # fewer than the floor's: not judged
    assert report.floors(results)[-9]["met"] is None
    assert "not judged: 100 live" in report.floors(results)[-9]["measured"]
    del results["calls"]["library_loans"]["64"], results["episodes"]
    unjudged = [f["floor"] for f in report.floors(results) if f["met"] is None]
    # and the batch's three: a batch of 64 is not judged
    assert len(unjudged) == 8 and unjudged[0].startswith("tool calls/s at concurrency 64")
