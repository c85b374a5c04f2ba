"""Other ecosystems' own clients against a real gateway (real Redis, Docker sandboxes): NeMo Gym
0.7.0 (its ``SimpleAgent`` and HTTP client, in .venv-nemo-gym) on the NeMo Gym door, GEM 0.1.0
(``gem.make``, in .venv-gem) through ``envscaler_client.adapters.gem``, and verifiers 0.4.0
(``vf.load_environment`` and its ``vf-validate`` command, in .venv-verifiers) through the
``envscaler_verifiers`` taskset. Each solves ``library_loans-001`` with its reference solution to
reward 1.0 and gets refused calls back as errors in its own form. The peers run as subprocesses
(tests/fixtures/peers/), each in the venv scripts/bootstrap made from its lock file; no model
endpoint is reachable, so the policies are scripted."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from envscaler_client.adapters.nemo_gym import nemo_gym_rows
from envscaler_client.rollout.reference import load_references

from envscaler.server.settings import Settings
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import (
    LIBRARY,
    REPO_ROOT,
    GatewayProcess,
    catalogue_root,
    gateway_process,
    own_redis_db,
)

__all__ = ["catalogue_root"]  # the fixture

API_KEY = "peer-protocols-admin-key-0123456789"
PEERS = REPO_ROOT / "tests" / "fixtures" / "peers"
SCENARIO, OTHER = f"{LIBRARY}-001", f"{LIBRARY}-002"
DRIVER_TIMEOUT = 600  # the peers' imports alone take tens of seconds on a loaded machine
ARGUMENT_BYTES = 4096


@pytest.fixture(scope="module")
def gateway(redis_url: str, sandbox_image: str, socket_root: Path, catalogue_root: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    settings = Settings(redis_url=own_redis_db(redis_url, 7), api_keys=[API_KEY],
                        catalogue=catalogue_root, sandbox_backend="docker",
                        sandbox_image=sandbox_image, socket_root=socket_root, pool_size=2,
                        max_argument_bytes=ARGUMENT_BYTES, log_level="WARNING")
    with gateway_process(settings, tmp_path_factory.mktemp("peers") / "gw.log") as process:
        yield process


def solution() -> list[dict[str, Any]]:
    [calls] = load_references(REPO_ROOT / "generated_envs", LIBRARY)[SCENARIO] or [[]]
    assert calls, "library_loans-001 has a reference solution"
    return calls


def drive(venv: str, driver: str, spec: dict[str, Any], gateway: GatewayProcess,
          cwd: Path) -> dict[str, Any]:
    """Run a peer's driver in its venv, in ``cwd`` (NeMo Gym's Hydra writes its outputs/ there);
    its report (the last line of its output)."""
    python = REPO_ROOT / venv / "bin" / "python"
    assert python.exists(), f"no {venv}: run scripts/bootstrap"
    env = {**os.environ, "ENVSCALER_URL": gateway.url, "ENVSCALER_API_KEY": API_KEY}
    # On standard input: NeMo Gym reads its command line as Hydra overrides.
    done = subprocess.run([str(python), str(PEERS / driver)], input=json.dumps(spec), env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=scaled(DRIVER_TIMEOUT),
                          check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def rest(gateway: GatewayProcess, path: str) -> Any:
    """A REST read with the API key."""
    answer = httpx.get(gateway.url + path, headers={"Authorization": f"Bearer {API_KEY}"},
                       timeout=scaled(60))
    assert answer.status_code == 200, answer.text
    return answer.json()


def error_type(body: Any) -> str:
    return body["error"]["type"]


def tool_responses(observation: str) -> list[Any]:
    """The JSON of each ``<tool_response>`` block of a GEM observation."""
    return [json.loads(block.split("<tool_response>", 1)[1])
            for block in observation.split("</tool_response>") if block.strip()]


# ---------------------------------------------------------------- NeMo Gym


def test_nemo_gym_agent_solves_a_scenario_on_the_door(gateway: GatewayProcess,
                                                      tmp_path: Path) -> None:
    rows_file = tmp_path / "library_loans.jsonl"
    exported = subprocess.run(
        [str(REPO_ROOT / ".venv" / "bin" / "envscaler"), "export", "nemo-gym", LIBRARY,
         "--out", str(rows_file), "--url", gateway.url, "--api-key", API_KEY],
        capture_output=True, text=True, timeout=scaled(120), check=False)
    assert exported.returncode == 0, exported.stderr
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert rows == nemo_gym_rows(LIBRARY, url=gateway.url, api_key=API_KEY)
    env_tools = rest(gateway, f"/v1/envs/{LIBRARY}")["tools"]
    [row] = [row for row in rows if row["scenario"] == SCENARIO]
    assert [tool["name"] for tool in row["responses_create_params"]["tools"]] == [
        tool["function"]["name"] for tool in env_tools]
    calls = solution()
    turns = [[["renew_everything", {}], ["get_member", {"member_id": 1001}]],
             *[[[call["name"], call.get("arguments", {})]] for call in calls]]

    report = drive(".venv-nemo-gym", "nemo_gym_driver.py",
                   {"base_url": f"{gateway.url}/nemo-gym/{LIBRARY}", "api_key": API_KEY,
                    "row": row, "turns": turns}, gateway, tmp_path)

    assert report["seed_status"] == 200 and report["cookie_names"] == ["envscaler_session"]
    assert report["seed"]["scenario"] == SCENARIO and report["seed"]["seed"] == 0
    status, body = report["unknown_tool"]
    assert status == 404 and error_type(body) == "UnknownTool"
    status, body = report["bad_arguments"]
    assert status == 422 and error_type(body) == "InvalidArguments"
    assert body["error"]["field"] == "member_id"
    status, body = report["no_cookie"]
    assert status == 401 and error_type(body) == "Unauthorized"
    # the agent's own refused calls came back as model-visible outputs, and the episode went on
    refused = [json.loads(output) for output in report["tool_outputs"][:2]]
    assert [error_type(body) for body in refused] == ["UnknownTool", "InvalidArguments"]
    assert len(report["tool_outputs"]) == 2 + len(calls)
    assert report["verify_status"] == 200 and report["reward"] == 1.0
    assert report["checks"]["passed"] == report["checks"]["total"] > 0
    status, body = report["after_verify"]  # verify closed the session
    assert status == 409 and error_type(body) == "SessionClosed"
    assert report["aggregate"]["agent_metrics"]["mean/reward"] == pytest.approx(0.625)
    assert report["aggregate"]["key_metrics"]["pass@1/reward_1"] == 0.5
    assert report["reverify_mode"] == "unsupported"
    assert [status for status, _ in report["close"]] == [200, 200]

    # the REST trajectory has the agent's calls, and none of the refused ones
    session_id = report["seed"]["session_id"]
    trajectory = rest(gateway, f"/v1/sessions/{session_id}/trajectory")
    called = [entry["name"] for entry in trajectory["entries"] if entry.get("kind") != "reset"]
    assert called == [call["name"] for call in calls]


async def test_nemo_gym_door_needs_the_api_key_and_a_known_environment(
        gateway: GatewayProcess) -> None:
    async with gateway.client() as anonymous:
        refused = await anonymous.post(f"/nemo-gym/{LIBRARY}/seed_session",
                                       json={"scenario": SCENARIO})
    assert refused.status_code == 401 and error_type(refused.json()) == "Unauthorized"
    async with gateway.client(API_KEY) as client:
        unknown = await client.post("/nemo-gym/no_such_env/seed_session",
                                    json={"scenario": SCENARIO})
        assert unknown.status_code == 404 and error_type(unknown.json()) == "UnknownEnv"
        wrong = await client.post(f"/nemo-gym/{LIBRARY}/seed_session",
                                  json={"env": "other", "scenario": SCENARIO})
        assert wrong.status_code == 422 and wrong.json()["error"]["field"] == "body.env"
        missing = await client.post(f"/nemo-gym/{LIBRARY}/seed_session", json={"seed": 1})
        assert missing.status_code == 422 and missing.json()["error"]["field"] == "body.scenario"
        # a tool call's body limit, as on REST, before anything else is read
        huge = await client.post(f"/nemo-gym/{LIBRARY}/get_member",
                                 json={"member_id": "M" * (2 * ARGUMENT_BYTES)})
        assert huge.status_code == 413 and error_type(huge.json()) == "ArgumentsTooLarge"


# ---------------------------------------------------------------- GEM (ROLL)


def test_gem_env_plays_a_scenario_to_reward_one(gateway: GatewayProcess,
                                                tmp_path: Path) -> None:
    report = drive(".venv-gem", "gem_driver.py",
                   {"env": LIBRARY, "scenario": SCENARIO, "solution": solution(),
                    "other_scenario": OTHER}, gateway, tmp_path)

    assert report["env_id"] == f"envscaler:{LIBRARY}" and report["registered"]
    assert report["scenario"] == SCENARIO and report["seed"] == 3 and report["task"]
    assert "get_member" in report["tools"]
    observation, reward, terminated, truncated, info = report["refused"]
    assert [error_type(body) for body in tool_responses(observation)] == [
        "UnknownTool", "InvalidArguments", "InvalidToolCall"]
    assert (reward, terminated, truncated, info["tool_calls"]) == (0.0, False, False, 3)
    observation, reward, terminated, _, info = report["solved"]
    results = tool_responses(observation)
    assert len(results) == len(solution()) and not terminated
    assert all(result["success"] for result in results), results
    _, reward, terminated, truncated, info = report["final"]
    assert (reward, terminated, truncated, info["tool_calls"]) == (1.0, True, False, 0)
    # the next episode moved the same session to another scenario in place
    assert report["second_session"] == report["session"]
    _, reward, terminated, _, _ = report["untouched"]
    assert terminated and reward < 1.0


# ---------------------------------------------------------------- verifiers


def test_verifiers_taskset_loads_calls_tools_and_scores(gateway: GatewayProcess,
                                                        tmp_path: Path) -> None:
    report = drive(".venv-verifiers", "verifiers_driver.py",
                   {"url": gateway.url, "env": LIBRARY, "scenario": SCENARIO}, gateway, tmp_path)

    assert report["env_class"] == "SingleAgentEnv" and report["tasks"] >= 2
    assert SCENARIO in report["names"] and report["has_system_prompt"] and report["prompt"]
    assert report["toolsets"] == ["EnvScalerToolset"]
    assert "get_member" in report["tools"]
    # a refusal is an isError result whose text is the gateway's error object
    assert report["unknown_tool"] == {"is_error": True, "body": {
        "type": "UnknownTool", "message": "environment 'library_loans' has no tool "
        "'renew_everything'"}}
    assert report["bad_arguments"]["is_error"]
    assert report["bad_arguments"]["body"]["type"] == "InvalidArguments"
    assert not report["member"]["is_error"]
    assert report["member"]["body"]["data"]["member_id"] == "M-1001"
    assert list(report["rewards"]) == ["envscaler"] and report["reward"] < 1.0


def test_vf_validate_plays_the_reference_to_reward_one(gateway: GatewayProcess,
                                                       tmp_path: Path) -> None:
    """verifiers' own model-free check: the gold check plays the reference solution through
    the MCP helper and must reach 1.0; the noop check scores the untouched task, below 1.0."""
    command = [str(REPO_ROOT / ".venv-verifiers" / "bin" / "vf-validate"), "envscaler_verifiers",
               "--taskset.env", LIBRARY, "--taskset.task.url", gateway.url,
               "--taskset.task.references", str(REPO_ROOT / "generated_envs"),
               "--select.include.names", SCENARIO, "--runtime.type", "subprocess",
               "--rich", "false", "-o", str(tmp_path)]
    env = {**os.environ, "ENVSCALER_API_KEY": API_KEY}
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=scaled(DRIVER_TIMEOUT), check=False)
    assert done.returncode == 0, done.stderr[-4000:] + done.stdout[-2000:]
    [results] = tmp_path.glob("*/results.jsonl")
    [row] = [json.loads(line) for line in results.read_text().splitlines()]
    assert row["name"] == SCENARIO and row["reason"] == "valid", row
    assert row["gold"]["valid"] is True and row["noop"]["valid"] is True
    assert row["noop"]["reward"] < 1.0
