"""The benchmark machinery (`envscaler bench`) on a tiny configuration: every figure is produced
and written in its shape. Speed is measured by the benchmark, never asserted here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import report
from bench.config import preset
from bench.run import run

pytestmark = [pytest.mark.docker, pytest.mark.redis]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.timeout(600)
def test_tiny_benchmark_writes_every_figure(sandbox_image: str, tmp_path: Path) -> None:
    config = preset("tiny")
    results = run(config, tmp_path, say=lambda _line: None)

    written = json.loads((tmp_path / "results.json").read_text())
    assert written == results
    assert set(written) == {"meta", "config", "sessions", "calls", "baselines", "density",
                            "rollouts", "floors"}
    assert written["meta"]["containers_left"] == 0

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
    assert sessions["validate"]["n"] == config.validations

    assert written["baselines"]["in_process"]["n"] == config.baseline_calls
    assert written["baselines"]["in_process"]["result_ok"] is True
    assert written["baselines"]["runtime"]["n"] == config.runtime_calls

    density = written["density"]
    assert density["live_sessions"] == config.density_sessions
    assert density["containers"] >= config.density_sessions
    assert density["per_session_mib"] > 0 and density["calls"]["failed"] == 0

    rollouts = written["rollouts"]
    assert rollouts["completed"] == config.rollouts and rollouts["errors"] == 0
    assert rollouts["mean_reward"] == 1.0  # every reference solution solves its scenario

    assert [f["floor"] for f in written["floors"]] == [f["floor"] for f in report.floors(written)]
    assert all(set(f) == {"floor", "target", "measured", "met"} for f in written["floors"])

    table = (tmp_path / "results.md").read_text()
    for heading in ("## Tool calls through the gateway", "## The same call without the gateway",
                    "## Session life cycle", "## Density", "## The rollout pattern",
                    "## Floors"):
        assert heading in table
    rows = [line for line in table.splitlines() if line.startswith("| library_loans (`")]
    assert len(rows) == len(config.levels["library_loans"])

    for name in ("calls.png", "cpu.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000


def test_floors_from_a_full_results_shape() -> None:
    """`report.floors` reads every floor from results shaped as a run writes them."""
    results = {
        "config": {"envs": ["library_loans"]},
        "calls": {"library_loans": {"1": {"summary": {"p50_ms": 1.5}},
                                    "64": {"rps": 1600.0, "summary": {"p50_ms": 40.0}}}},
        "sessions": {"create_warm": {"p50_ms": 12.0}, "reset": {"p50_ms": 11.0}},
        "density": {"live_sessions": 1000, "calls": {"summary": {"p99_ms": 900.0}}},
    }
    met = {f["floor"]: f["met"] for f in report.floors(results)}
    assert list(met.values()) == [True, True, True, False, True]
    results["density"]["calls"]["summary"]["p99_ms"] = 1200.0
    assert report.floors(results)[-1]["met"] is False
    results["density"]["live_sessions"] = 100  # fewer than the floor's: not judged
    assert report.floors(results)[-1]["met"] is None
    assert "not judged: 100 live" in report.floors(results)[-1]["measured"]
    del results["calls"]["library_loans"]["64"]
    assert report.floors(results)[1]["met"] is None
