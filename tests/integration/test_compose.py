"""The deployment: build the gateway image on this machine, bring docker-compose.yml up, use it.

The gateway runs in a container, reaches Redis over the compose network, and creates sandbox
containers as siblings through the mounted Docker socket.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from envscaler.format.loader import load_env
from envscaler.server.embedded_redis import free_port
from tests.conftest import REPO_ROOT, RUN_ID
from tests.deadlines import scaled

API_KEY = f"compose-{RUN_ID}"
REDIS_PASSWORD = secrets.token_hex(16)
READY_TIMEOUT = 180.0


def compose(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker-compose", "-p", f"envscaler-test-{RUN_ID}", *args], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True, timeout=scaled(300))


@pytest.fixture(scope="module")
def stack(docker_client, sandbox_image: str) -> Iterator[tuple[str, Path]]:  # type: ignore[no-untyped-def]
    build = subprocess.run([str(REPO_ROOT / "scripts" / "build-gateway-image")], capture_output=True,
                           text=True, timeout=scaled(600))
    assert build.returncode == 0, build.stderr[-3000:]
    socket_root = Path(f"/tmp/esc-{RUN_ID}")
    port = free_port()
    env = {**os.environ, "ENVSCALER_API_KEYS": API_KEY, "ENVSCALER_PORT": str(port),
           "ENVSCALER_REDIS_PASSWORD": REDIS_PASSWORD,
           "ENVSCALER_SOCKET_ROOT": str(socket_root), "ENVSCALER_POOL_SIZE": "1"}
    up = compose(env, "up", "-d")
    assert up.returncode == 0, up.stderr[-3000:]
    try:
        yield f"http://127.0.0.1:{port}", socket_root
    finally:
        logs = compose(env, "logs", "--no-color", "gateway").stdout
        down = compose(env, "down", "-v", "-t", "20")
        assert down.returncode == 0, down.stderr[-3000:]
    leftovers = docker_client.containers.list(
        all=True, filters={"label": f"envscaler.socket-root={socket_root}"})
    for container in leftovers:
        container.remove(force=True)
    assert not leftovers, f"the composed gateway left {len(leftovers)} sandboxes behind:\n{logs[-3000:]}"


def wait_until_ready(client: httpx.Client) -> dict:
    deadline = time.monotonic() + scaled(READY_TIMEOUT)
    while time.monotonic() < deadline:
        try:
            answer = client.get("/readyz")
            if answer.status_code == 200:
                return answer.json()
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    pytest.fail("the composed gateway never became ready")


@pytest.mark.timeout(900)  # the image build downloads wheels on a fresh machine
def test_compose_stack_serves_a_session_end_to_end(stack: tuple[str, Path]) -> None:
    url, _ = stack
    scenario = load_env(REPO_ROOT / "generated_envs" / "library_loans").scenarios[0]
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {API_KEY}"},
                      timeout=scaled(30)) as client:
        ready = wait_until_ready(client)
        assert ready["isolation"] == "container"
        assert httpx.get(f"{url}/v1/envs").status_code == 401
        created = client.post("/v1/sessions", json={"env": "library_loans", "scenario": scenario.id})
        assert created.status_code == 201, created.text
        session = created.json()["session_id"]
        untouched = client.post(f"/v1/sessions/{session}/validate").json()
        assert untouched["reward"] < 1.0
        for call in scenario.solution or []:
            answer = client.post(f"/v1/sessions/{session}/calls",
                                 json={"name": call.name, "arguments": json.dumps(call.arguments)})
            assert answer.status_code == 200 and answer.json()["ok"], answer.text
        assert client.post(f"/v1/sessions/{session}/validate").json()["reward"] == 1.0
        assert client.delete(f"/v1/sessions/{session}").status_code == 200


def test_composed_redis_is_private(stack: tuple[str, Path],
                                   docker_client) -> None:  # type: ignore[no-untyped-def]
    """Published on no host port, reached (here over the test's own compose network) only with
    the password, and full rather than evicting."""
    [container] = docker_client.containers.list(filters={"label": [
        f"com.docker.compose.project=envscaler-test-{RUN_ID}", "com.docker.compose.service=redis"]})
    assert not any(container.attrs["NetworkSettings"]["Ports"].values())
    assert REDIS_PASSWORD not in " ".join(container.attrs["Args"])
    [network] = container.attrs["NetworkSettings"]["Networks"].values()
    with redis.Redis(host=network["IPAddress"], socket_timeout=5) as anonymous:
        with pytest.raises(redis.AuthenticationError):
            anonymous.ping()
    with redis.Redis(host=network["IPAddress"], password=REDIS_PASSWORD, socket_timeout=5,
                     decode_responses=True) as client:
        assert client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
        assert int(client.config_get("maxmemory")["maxmemory"]) > 0
