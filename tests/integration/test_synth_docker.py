"""The whole pipeline with Docker sandboxes, on recorded responses (through the replay server and
the real ``openai`` SDK): every gate runs generated code in locked-down containers, and the
catalogue it writes is byte for byte the one the `process` backend writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from envscaler.sandbox.config import SandboxConfig
from envscaler.server.settings import Settings
from envscaler.synth.pipeline import run_all
from envscaler.synth.replay_server import ReplayServer
from envscaler.synth.sandboxes import Limits, SandboxHub
from envscaler.synth.transcript import Transcript
from tests.conftest import new_instance
from tests.integration.test_synth_pipeline import (
    ENV_ID,
    TASKS,
    TRANSCRIPT,
    fixture_settings,
    sandbox_config,
    tree,
)

pytestmark = pytest.mark.docker


async def test_the_pipeline_on_docker_sandboxes(docker_config: SandboxConfig, socket_root: Path,
                                                tmp_path: Path, docker_client) -> None:  # type: ignore[no-untyped-def]
    with ReplayServer(Transcript(TRANSCRIPT)) as server:
        settings = fixture_settings(base_url=server.base_url)
        async with SandboxHub(docker_config, Limits.from_settings(Settings()), limit=2,
                              instance=new_instance()) as hub:
            docker = await run_all(settings, tasks=TASKS, out=tmp_path / "docker",
                                   workdir=tmp_path / "work-docker", hub=hub)
            # every environment sandbox was removed after its use (the hub's checker remains)
            assert docker_client.containers.list(all=True, filters={"label": [
                f"envscaler.instance={hub.instance}", "envscaler.role=runtime"]}) == []
        async with SandboxHub(sandbox_config(socket_root), Limits.from_settings(Settings()),
                              limit=2, instance=new_instance()) as hub:
            process = await run_all(settings, tasks=TASKS, out=tmp_path / "process",
                                    workdir=tmp_path / "work-process", hub=hub)
    assert docker.complete and process.complete
    gates = {stage["stage"]: stage for stage in docker.report.to_dict()["stages"]}
    assert [drop["item"] for drop in gates["quality.static"]["dropped"]] == \
        ["warehouse_inventory_management"]
    assert [drop["item"] for drop in gates["quality.executable"]["dropped"]] == \
        ["residential_property_lease_management"]
    assert [drop["item"] for drop in gates["scen.gate"]["dropped"]] == \
        [f"{ENV_ID}/003", f"{ENV_ID}/004"]
    assert tree(tmp_path / "docker") == tree(tmp_path / "process")
    assert sorted(path.name for path in (tmp_path / "docker").iterdir()) == [ENV_ID]
