"""The `envscaler` command line against a live gateway: envs, scenarios, session commands, `check`
(through the gateway with ``--url``, and with an embedded gateway), run with Typer's CliRunner."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest
from envscaler.cli.main import app
from typer.testing import CliRunner, Result

from envscaler.server.embedded_redis import free_port
from tests.conftest import RUN_ID
from tests.integration.gateway_fixtures import COUNTER, LIBRARY
from tests.integration.live_gateway import *  # the fixtures: catalogue_root, live_gateway
from tests.integration.live_gateway import LiveGateway

Run = Callable[..., Result]


@pytest.fixture
def run(live_gateway: LiveGateway) -> Run:
    """``run("envs", "--json")``: the command against the live gateway (URL and key in the
    environment, as a person would set them)."""
    runner = CliRunner()

    def invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
        environment: dict[str, str | None] = {"ENVSCALER_URL": live_gateway.url,
                                               "ENVSCALER_API_KEY": live_gateway.api_key,
                                               "ENVSCALER_CATALOGUE": None, **(env or {})}
        result = runner.invoke(app, list(args), env=environment)
        assert "Traceback" not in result.output, result.output
        return result
    return invoke


def test_envs_and_scenarios(run: Run) -> None:
    listing = run("envs", "--json")
    assert listing.exit_code == 0, listing.output
    assert {env["id"] for env in json.loads(listing.stdout)} == {COUNTER, LIBRARY}
    table = run("envs")
    assert table.exit_code == 0 and COUNTER in table.stdout and LIBRARY in table.stdout

    shown = run("envs", "show", COUNTER)
    assert shown.exit_code == 0 and "CounterLab" in shown.stdout and "increment" in shown.stdout
    assert "name*: string" in shown.stdout
    assert json.loads(run("envs", "show", COUNTER, "--json").stdout)["class_name"] == "CounterLab"

    scenarios = run("scenarios", COUNTER, "--json")
    assert [s["id"] for s in json.loads(scenarios.stdout)] == ["counter-1", "counter-2"]
    assert [
        s["id"] for s in json.loads(run("scenarios", COUNTER, "--split", "eval", "--json").stdout)
    ] == ["counter-2"]
    assert "counter-1" in run("scenarios", COUNTER).stdout


def test_a_person_tries_an_environment_from_the_shell(run: Run) -> None:
    opened = run("session", "open", COUNTER, "--scenario", "counter-1", "--seed", "3", "--json")
    assert opened.exit_code == 0, opened.output
    created = json.loads(opened.stdout)
    session_id = created["session_id"]
    assert created["task"].startswith("Bring counter a to 3") and created["agent_token"].startswith(
        session_id)

    called = run("session", "call", session_id, "increment", '{"name": "a", "by": 2}')
    assert called.exit_code == 0 and json.loads(called.stdout)["data"]["value"] == 3
    again = json.loads(
        run("session", "call", session_id, "increment", '{"name": "b"}', "--json").stdout)
    assert again["ok"] and again["index"] == 1
    failing = run("session", "call", session_id, "explode", '{"message": "boom"}')
    assert failing.exit_code == 0 and "the tool failed: ToolException" in failing.stderr
    assert "boom" in failing.stderr

    assert json.loads(run("session", "state", session_id).stdout)["counters"] == {"a": 3, "b": 1}
    trajectory = json.loads(run("session", "trajectory", session_id, "--json").stdout)
    assert [entry["name"]
            for entry in trajectory["entries"]] == ["increment", "increment", "explode"]
    assert "explode" in run("session", "trajectory", session_id).stdout
    validation = run("session", "validate", session_id)
    assert validation.exit_code == 0 and "reward 1 (2 of 2 checks)" in validation.stdout
    assert json.loads(run("session", "validate", session_id, "--json").stdout)["reward"] == 1.0

    reset = run("session", "reset", session_id, "--seed", "8", "--json")
    assert json.loads(reset.stdout)["epoch"] == 1 and json.loads(reset.stdout)["seed"] == 8
    assert json.loads(run("session", "state", session_id).stdout)["counters"] == {"a": 1}

    assert run("session", "close", session_id).exit_code == 0
    assert run("session", "close", session_id).exit_code == 0
    closed = run("session", "call", session_id, "increment", '{"name": "a"}')
    assert closed.exit_code == 1 and "SessionClosed" in closed.stderr
    assert "open a new one" in closed.stderr

    opened = run("session", "open", COUNTER, "--init-config", '{"counters": {"x": 1}}')
    assert opened.exit_code == 0 and "agent token" in opened.stderr  # not a terminal: id only
    session_id = opened.stdout.strip()
    assert json.loads(run("session", "state", session_id).stdout)["counters"] == {"x": 1}
    assert run("session", "close", session_id).exit_code == 0


def test_failures_say_what_to_do(run: Run) -> None:
    unreachable = run("envs", env={"ENVSCALER_URL": f"http://127.0.0.1:{free_port()}"})
    assert unreachable.exit_code == 1 and "is the gateway running" in unreachable.stderr
    assert "./scripts/serve" in unreachable.stderr
    no_key = run("envs", env={"ENVSCALER_API_KEY": None})
    assert no_key.exit_code == 1 and "Unauthorized" in no_key.stderr
    assert "--api-key" in no_key.stderr
    unknown = run("envs", "show", "no_such_env")
    assert unknown.exit_code == 1 and "UnknownEnv" in unknown.stderr
    assert "envscaler envs" in unknown.stderr
    opened = json.loads(run("session", "open", COUNTER, "--json").stdout)
    try:
        bad = run("session", "call", opened["session_id"], "increment", '{"name": 7}')
        assert bad.exit_code == 1 and "InvalidArguments" in bad.stderr and "envs show" in bad.stderr
        missing = run("session", "call", opened["session_id"], "fly")
        assert missing.exit_code == 1 and "UnknownTool" in missing.stderr
    finally:
        run("session", "close", opened["session_id"])
    not_json = run("session", "open", COUNTER, "--init-config", "{oops")
    assert not_json.exit_code == 2 and "--init-config is not JSON" in not_json.stderr


def test_check_through_the_gateway_passes_every_scenario(
        run: Run, catalogue_root: Path) -> None:
    result = run("check", "--catalogue", str(catalogue_root), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] and report["summary"] == {
        "passed": 6, "failed": 0, "error": 0, "unverified": 0
    }
    assert all(row["reward"] == 1.0 and row["initial_reward"] < 1.0 for row in report["results"])
    table = run("check", "--catalogue", str(catalogue_root), "--env", COUNTER)
    assert table.exit_code == 0 and "counter-2" in table.stdout
    assert "no scenario fails" in table.stderr


@pytest.fixture
def broken_catalogue(catalogue_root: Path, tmp_path: Path) -> Path:
    """A copy with a wrong solution (counter-1 stops at a = 2), a scenario without a solution
    (counter-2), and a folder that does not load."""
    root = tmp_path / "broken"
    shutil.copytree(catalogue_root, root)
    scenarios_path = root / COUNTER / "scenarios.jsonl"
    scenarios = [json.loads(line) for line in scenarios_path.read_text().splitlines()]
    scenarios[0]["solution"][0]["arguments"]["by"] = 1
    scenarios[1]["solution"], scenarios[1]["verified"] = None, False
    scenarios_path.write_text("".join(json.dumps(s) + "\n" for s in scenarios))
    shutil.copytree(root / COUNTER, root / "misnamed_env")
    return root


def test_check_reports_a_wrong_solution_and_exits_1(run: Run, broken_catalogue: Path) -> None:
    result = run("check", "--catalogue", str(broken_catalogue), "--env", COUNTER, "--env",
                 "misnamed_env", "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    rows = {row["scenario"]: row for row in report["results"]}
    assert not report["ok"] and report["summary"] == {
        "passed": 0, "failed": 2, "error": 0, "unverified": 1
    }
    assert rows["counter-1"]["status"] == "failed" and rows["counter-1"]["reward"] == 0.5
    assert "Has counter a reached 3?" in rows["counter-1"]["detail"]
    assert rows["counter-2"]["status"] == "unverified"
    assert rows["-"]["env"] == "misnamed_env" and "does not load" in rows["-"]["detail"]
    assert "Fix the reference solution" in result.stderr

    table = run("check", "--catalogue", str(broken_catalogue), "--env", COUNTER)
    assert table.exit_code == 1 and "failed" in table.stdout and "unverified" in table.stdout
    unknown = run("check", "--catalogue", str(broken_catalogue), "--env", "nope")
    assert unknown.exit_code == 1 and "no environment nope" in unknown.stderr


@pytest.fixture
def check_socket_root() -> Iterator[Path]:
    """The embedded gateway's own socket root: its sandboxes carry it as a label, by which
    leftovers are found (the embedded gateway cannot add the suite's TEST_LABELS)."""
    root = Path(f"/tmp/esx-{RUN_ID}-check")
    root.mkdir(mode=0o700, exist_ok=True)
    yield root
    client = docker.from_env()
    leftovers = client.containers.list(all=True, filters={"label": f"envscaler.socket-root={root}"})
    for container in leftovers:
        container.remove(force=True)
    shutil.rmtree(root, ignore_errors=True)
    assert not leftovers, f"the embedded gateway left {len(leftovers)} sandboxes behind"


def test_check_with_an_embedded_gateway(
        run: Run,
        catalogue_root: Path,
        sandbox_image: str,
        check_socket_root: Path) -> None:
    result = run("check", "--catalogue", str(catalogue_root), "--env", COUNTER, "--json",
                 env={"ENVSCALER_URL": None, "ENVSCALER_SANDBOX_IMAGE": sandbox_image,
                      "ENVSCALER_SOCKET_ROOT": str(check_socket_root), "ENVSCALER_POOL_SIZE": "1"})
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["gateway"] == "embedded" and report["summary"]["passed"] == 2
    assert [row["reward"] for row in report["results"]] == [1.0, 1.0]
