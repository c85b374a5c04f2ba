"""The catalogue in generated_envs/: what issue 6 asks of it, and that it is what the kept
synthesis runs (synth_runs/*) regenerate, byte for byte, from their recorded model replies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envscaler.format.loader import EnvPackage, load_catalogue
from envscaler.sandbox.config import SandboxConfig
from envscaler.server.settings import Settings
from envscaler.synth.record import replay_run
from envscaler.synth.sandboxes import Limits, SandboxHub
from tests.conftest import REPO_ROOT, TEST_LABELS, new_instance

CATALOGUE = REPO_ROOT / "generated_envs"
RUNS = sorted(path for path in (REPO_ROOT / "synth_runs").glob("*") if (path / "transcript.jsonl").is_file())
HAND_WRITTEN = "hand-written"


def files(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def synthesized() -> list[EnvPackage]:
    catalogue = load_catalogue(CATALOGUE, strict=True)
    return [env for env in catalogue.envs.values() if env.manifest.provenance.model != HAND_WRITTEN]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("run", RUNS, ids=[run.name for run in RUNS])
async def test_a_kept_run_regenerates_its_environments_byte_for_byte(
        run: Path, tmp_path: Path, socket_root: Path) -> None:
    hub = SandboxHub(SandboxConfig(sandbox_backend="process", socket_root=socket_root, pool_size=0,
                                   labels=TEST_LABELS, sandbox_memory="1g"),
                     # a check past its deadline drops a scenario: give a loaded machine room
                     Limits.from_settings(Settings()), limit=2, instance=new_instance())
    try:
        result = await replay_run(run, tmp_path, hub=hub)
    finally:
        await hub.close()
    assert result.complete, result.report.outcome
    produced = sorted(path.name for path in tmp_path.iterdir() if not path.name.startswith("."))
    assert produced, f"{run.name} produced no environment"
    for name in produced:
        assert files(tmp_path / name) == files(CATALOGUE / name), f"{name} differs from generated_envs/"


def test_the_catalogue_meets_its_bar() -> None:
    envs = synthesized()
    assert len(envs) >= 12
    for env in envs:
        kinds = [operation.type for operation in env.manifest.operations]
        assert 12 <= len(env.tool_names) <= 25, env.manifest.id
        assert kinds.count("query") >= 5 and kinds.count("state_change") >= 5, env.manifest.id
        assert len(env.scenarios) >= 10, env.manifest.id
        for scenario in env.scenarios:
            assert scenario.split in {"train", "rl", "eval"}
            assert scenario.checklist and scenario.solution and scenario.verified, scenario.id
            assert len(scenario.task.split()) >= 30, scenario.id


@pytest.mark.timeout(900)  # every scenario of the catalogue, twice, through Docker sandboxes
def test_every_scenario_is_solved_by_its_solution_through_a_gateway(
        sandbox_image: str, socket_root: Path) -> None:
    """`envscaler check` with an embedded gateway: reward 1.0 after the reference solution and
    below 1.0 untouched, for every scenario of the catalogue."""
    from envscaler.cli.main import app

    result = CliRunner().invoke(app, ["check", "--catalogue", str(CATALOGUE), "--json"], env={
        "ENVSCALER_URL": None, "ENVSCALER_SANDBOX_IMAGE": sandbox_image,
        "ENVSCALER_SOCKET_ROOT": str(socket_root), "ENVSCALER_POOL_SIZE": "4",
        # what is tested is the scenarios, not check deadlines on a loaded 2-core machine
        "ENVSCALER_CHECK_CPU_SECONDS": "10"})
    assert result.exit_code == 0, result.output[-3000:]
    report = json.loads(result.stdout)
    total = sum(len(env.scenarios) for env in load_catalogue(CATALOGUE, strict=True).envs.values())
    assert report["summary"]["passed"] == total
    assert all(row["reward"] == 1.0 and row["initial_reward"] < 1.0 for row in report["results"])


@pytest.mark.timeout(900)  # static, executable and scenario gates of every environment, in sandboxes
def test_every_environment_passes_the_gates(sandbox_image: str, socket_root: Path) -> None:
    from envscaler.cli.main import app

    result = CliRunner().invoke(app, ["gate", str(CATALOGUE), "--json"], env={
        "ENVSCALER_SANDBOX_IMAGE": sandbox_image, "ENVSCALER_SOCKET_ROOT": str(socket_root),
        "ENVSCALER_CHECK_CPU_SECONDS": "10"})
    assert result.exit_code == 0, result.output[-3000:]
    report = json.loads(result.stdout)
    assert report["passed"] is True
    assert all(env["passed"] for env in report["envs"])
    assert sorted(env["env"] for env in report["envs"]) == sorted(load_catalogue(CATALOGUE).envs)
