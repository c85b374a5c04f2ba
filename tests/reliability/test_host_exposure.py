"""What reaches the host from a sandbox (tests/fixtures/hostile_envs/host_reacher): its output
lands on the host's disk only up to ENVSCALER_SANDBOX_LOG_SIZE, and under runc it gets no
io_uring from the host kernel; the session, a bystander session and the gateway go on serving.
"""

from __future__ import annotations

import errno
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis

from envscaler.sandbox.config import parse_size
from envscaler.server.settings import Settings
from envscaler.server.store import session_key
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import GatewayProcess, gateway_process
from tests.reliability.helpers import call, engine, new_session

LOG_SIZE = "256k"
# json-file may finish the message that crosses its limit: one message is at most 16 KiB of
# output, framed in JSON.
LOG_SLACK = 2 * 32 * 1024
FLOOD_MEGABYTES = 8  # to each of stdout and stderr: 64 times the cap


@dataclass
class Stage:
    gateway: GatewayProcess
    key: str
    bystander: str
    redis_url: str


@pytest.fixture(scope="module", params=[None, "runsc"], ids=["runc", "gvisor"])
def stage(request: pytest.FixtureRequest, redis_url: str, sandbox_image: str, socket_root: Path,
          catalogue_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    key = "host-exposure-" + secrets.token_hex(16)
    private_redis = redis_url.rsplit("/", 1)[0] + "/6"  # a database of its own: never flushed
    settings = Settings(
        redis_url=private_redis, catalogue=catalogue_root, sandbox_backend="docker",
        sandbox_image=sandbox_image, sandbox_runtime=request.param, sandbox_log_size=LOG_SIZE,
        socket_root=socket_root, pool_size=1, max_sandboxes=16, call_timeout=10.0,
        api_keys=[key], log_level="WARNING")
    log_path = tmp_path_factory.mktemp("host-exposure") / "gateway.log"
    with gateway_process(settings, log_path) as gateway:
        created = httpx.post(gateway.url + "/v1/sessions", json={"env": "counter_lab"},
                             headers={"Authorization": f"Bearer {key}"}, timeout=scaled(30))
        assert created.status_code == 201, created.text
        yield Stage(gateway, key, created.json()["session_id"], private_redis)


@pytest.fixture
async def client(stage: Stage) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the stage's gateway; after the test, the bystander still calls and the
    gateway is ready."""
    async with stage.gateway.client(token=stage.key) as client:
        yield client
        answer = await call(client, stage.bystander, "increment", {"name": "b"})
        assert answer["ok"] is True, answer
        ready = await client.get("/readyz")
        assert ready.status_code == 200, ready.text


def container_of(stage: Stage, session_id: str) -> str:
    with redis.Redis.from_url(stage.redis_url, decode_responses=True) as records:
        return json.loads(records.hget(session_key(session_id), "sandbox"))["id"]


def bytes_on_disk(log_path: str) -> int:
    """The log file and every rotated file of it."""
    return sum(path.stat().st_size for path in Path(log_path).parent.glob(
        Path(log_path).name + "*"))


async def test_a_flood_of_output_stays_under_the_log_cap(stage: Stage,
                                                         client: httpx.AsyncClient) -> None:
    session = await new_session(client, "host_reacher")
    flood = await call(client, session, "flood_output", {"megabytes": FLOOD_MEGABYTES})
    assert flood["ok"] is True, flood
    assert flood["result"]["data"] == 2 * FLOOD_MEGABYTES << 20
    container = engine().api.inspect_container(container_of(stage, session))
    assert container["HostConfig"]["LogConfig"]["Type"] == "json-file"
    on_disk = bytes_on_disk(container["LogPath"])
    assert on_disk <= parse_size(LOG_SIZE) + LOG_SLACK, f"{on_disk} bytes of logs on the host"
    tail = engine().api.logs(container["Id"], tail=5).decode(errors="replace")
    assert "flood xxx" in tail  # the newest output is still there for diagnostics
    after = await call(client, session, "note", {"text": "t"})
    assert after["ok"] is True and after["result"]["data"] == 1, after


@pytest.mark.parametrize("stage", [None], ids=["runc"], indirect=True)
async def test_io_uring_setup_is_refused(stage: Stage, client: httpx.AsyncClient) -> None:
    session = await new_session(client, "host_reacher")
    answer = await call(client, session, "io_uring", {})
    assert answer["ok"] is True, answer
    assert answer["result"]["data"] == {"fd": -1, "errno": errno.ENOSYS}
    after = await call(client, session, "note", {"text": "t"})
    assert after["ok"] is True and after["result"]["data"] == 1, after
