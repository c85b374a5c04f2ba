"""Environments with pinned requirements (env.json's ``requirements``), through a real gateway:
their image is built once (wheels from the configured package index, installed offline), their
sessions get sandboxes of it, and one whose requirements cannot be met fails to load, alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from envscaler.sandbox.requirements_image import image_tag
from tests.conftest import REPO_ROOT
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.gateway_fixtures import running_gateway, sandbox_handle

MPMATH = "mpmath==1.3.0"
SOURCE = '''import mpmath


class Calculator:
    def __init__(self, init_config: dict):
        self.digits = init_config.get("digits", 15)
        self.results: list = []

    def square_root(self, value: str) -> dict:
        """The square root of a number, to the configured precision; kept in the results.

        Args:
            value (str): The number, in decimal.
        """
        mpmath.mp.dps = self.digits
        try:
            root = str(mpmath.sqrt(mpmath.mpf(value)))
        except ValueError:
            return {"success": False, "error": "not a number"}
        self.results.append(root)
        return {"success": True, "data": root}
'''
ROOT_OF_2 = "1.41421356237309504880168872421"
CHECK = f"def check_func(final_state):\n    return final_state['results'] == ['{ROOT_OF_2}']\n"
ENVS = {"calc": [MPMATH], "calc_bare": [], "calc_unmet": ["mpmath==0.0.1"]}


def requirements_catalogue(root: Path) -> Path:
    """``calc`` pins mpmath; ``calc_bare`` is the same code without the pin; ``calc_unmet`` pins a
    version that no index has."""
    from envscaler.format import sync_manifest

    for env_id, requirements in ENVS.items():
        folder = root / env_id
        folder.mkdir(parents=True)
        (folder / "env.py").write_text(SOURCE)
        manifest = {"id": env_id, "class_name": "Calculator", "summary": "s",
                    "introduction": "i", "state_space": [], "constraint_rules": [],
                    "operations": [], "tools": [], "requirements": requirements,
                    "provenance": {"model": "m", "created": "2026-01-01",
                                   "pipeline_version": "t", "content_hash": "sha256:" + "0" * 64}}
        (folder / "env.json").write_text(json.dumps(manifest))
        (folder / "scenarios.jsonl").write_text(json.dumps(
            {"id": f"{env_id}-1", "split": "eval", "task": "Take a root.",
             "init_config": {"digits": 30}, "checklist": [{"item": "Has", "check_func": CHECK}],
             "solution": [{"name": "square_root", "arguments": {"value": "2"}}]})
            + "\n")
        sync_manifest(folder)
    return root


async def open_session(client, env_id: str):  # type: ignore[no-untyped-def]
    return await client.post("/v1/sessions", json={"env": env_id, "scenario": f"{env_id}-1"})


def assert_load_failed(response, *fragments: str) -> str:  # type: ignore[no-untyped-def]
    assert response.status_code == 500, response.text
    error = response.json()["error"]
    assert error["type"] == "EnvLoadFailed", error
    for fragment in fragments:
        assert fragment in error["message"], error
    return str(error["message"])


async def test_an_environment_imports_its_pinned_requirement_and_one_without_it_fails_alone(
        make_settings, redis_client, tmp_path, request) -> None:  # type: ignore[no-untyped-def]
    root = requirements_catalogue(tmp_path / "envs")
    settings = make_settings(catalogue=root)
    async with running_gateway(settings) as (app, client):
        response = await open_session(client, "calc")
        if settings.sandbox_backend == "process":
            assert_load_failed(response, "environment calc failed to load",
                               "the process backend cannot install requirements (mpmath==1.3.0)")
            return
        docker_client = request.getfixturevalue("docker_client")
        assert response.status_code == 201, response.text
        session_id = response.json()["session_id"]
        container = docker_client.containers.get(sandbox_handle(redis_client, session_id)["id"])
        assert container.attrs["Config"]["Image"] == image_tag(
            docker_client.images.get(settings.sandbox_image).id, [MPMATH])
        answer = await client.post(f"/v1/sessions/{session_id}/calls",
                                   json={"name": "square_root", "arguments": {"value": "2"}})
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"] == {"success": True, "data": ROOT_OF_2}
        assert (await client.post(f"/v1/sessions/{session_id}/validate")).json()["reward"] == 1.0
        assert (await client.delete(f"/v1/sessions/{session_id}")).status_code == 200

        bare = await open_session(client, "calc_bare")
        assert_load_failed(bare, "environment calc_bare failed to load in its sandbox: "
                                 "ModuleNotFoundError: No module named 'mpmath'")
        unmet = await open_session(client, "calc_unmet")
        message = assert_load_failed(unmet, "its requirements have no sandbox image",
                                     "mpmath==0.0.1")
        assert "Traceback" not in message
        assert app.state.pool.image is None  # environments without requirements: unchanged


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "clients")])
    return subprocess.run([sys.executable, "-m", "envscaler.cli", *args], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=scaled(600),
                          env={**os.environ, **(env or {}), "PYTHONPATH": path, "COLUMNS": "200"})


def test_sandbox_build_builds_the_catalogue_s_images_once(
        sandbox_image: str, docker_client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from docker.errors import ImageNotFound

    root = requirements_catalogue(tmp_path / "envs")
    for env_id in ("calc_bare", "calc_unmet"):
        (root / f"_{env_id}").mkdir()
        (root / env_id).rename(root / f"_{env_id}" / env_id)  # a catalogue of ``calc`` alone
    tag = image_tag(docker_client.images.get(sandbox_image).id, [MPMATH])
    try:
        docker_client.images.remove(tag)
    except ImageNotFound:
        pass

    first = cli("sandbox", "build", "--catalogue", str(root))
    assert first.returncode == 0, first.stderr
    assert f"requirements image ready: {tag} ({MPMATH})" in first.stderr
    built = docker_client.images.get(tag)
    assert built.labels["envscaler.requirements"] == MPMATH
    # Up to date: the second run fetches nothing (pip has no index to fetch from) and builds nothing
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    second = cli("sandbox", "build", "--catalogue", str(root),
                 env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(empty),
                      "PIP_CONFIG_FILE": os.devnull})
    assert second.returncode == 0, second.stderr
    assert f"requirements image ready: {tag} ({MPMATH})" in second.stderr
    assert docker_client.images.get(tag).id == built.id


async def test_the_gates_run_an_environment_with_its_requirements(
        docker_config, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The static gate lets it import what it pins; the executable and scenario gates run it
    in a sandbox of its requirements' image; unmet requirements are a ``load`` problem."""
    from envscaler.server.settings import Settings
    from envscaler.synth.gates.folders import gate_folder
    from envscaler.synth.sandboxes import Limits, SandboxHub
    from tests.conftest import new_instance

    root = requirements_catalogue(tmp_path / "envs")
    async with SandboxHub(docker_config, Limits.from_settings(Settings()), limit=2,
                          instance=new_instance()) as hub:
        calc = await gate_folder(root / "calc", hub)
        unmet = await gate_folder(root / "calc_unmet", hub)
    assert calc.passed, calc.to_dict()
    assert unmet.static is not None and unmet.static.passed
    assert unmet.executable is not None
    [problem] = unmet.executable.problems
    assert problem.rule == "load" and "mpmath==0.0.1" in problem.message
    assert not unmet.passed
