"""Hostile environment code (tests/fixtures/hostile_envs) through a real gateway, under runc and
under gVisor: every attempt is contained and reported with a clear error, the gateway stays ready,
and a bystander session on the same gateway keeps its state and its calls.

The gateway runs in its own process with an API key in its environment, as in production, so
that a sandbox that could read the service's environment would find it.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from envscaler.sandbox.runtime.protocol import runtime_socket_name
from envscaler.server.settings import Settings
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import REPO_ROOT, GatewayProcess, gateway_process
from tests.reliability.helpers import assert_error, call, containers_of, entries, new_session

RUNTIMES = [None, "runsc"]


@dataclass
class Stage:
    gateway: GatewayProcess
    key: str
    runtime: str
    bystander: str
    count: int
    socket_root: Path
    redis_url: str
    log_path: Path

    def client(self) -> httpx.AsyncClient:
        return self.gateway.client(token=self.key)


@pytest.fixture(scope="module", params=RUNTIMES, ids=["runc", "gvisor"])
def stage(
    request: pytest.FixtureRequest,
    redis_url: str,
    sandbox_image: str,
    socket_root: Path,
    catalogue_root: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stage]:
    key = "hostile-secret-" + secrets.token_hex(16)
    private_redis = redis_url.rsplit("/", 1)[0] + "/5"  # a database of its own: never flushed
    settings = Settings(
        redis_url=private_redis,
        catalogue=catalogue_root,
        sandbox_backend="docker",
        sandbox_image=sandbox_image,
        sandbox_runtime=request.param,
        sandbox_memory="128m",
        sandbox_pids=64,  # gVisor's Sentry threads count against it too: 64 is its floor
        socket_root=socket_root,
        pool_size=2,
        max_sandboxes=32,
        call_timeout=3.0,
        load_timeout=5.0,
        check_cpu_seconds=1.0,
        api_keys=[key],
        log_level="WARNING",
    )
    log_path = tmp_path_factory.mktemp("hostile") / "gateway.log"
    with gateway_process(settings, log_path) as gateway:
        created = httpx.post(gateway.url + "/v1/sessions", json={"env": "counter_lab"},
                             headers={"Authorization": f"Bearer {key}"}, timeout=scaled(30))
        assert created.status_code == 201, created.text
        yield Stage(gateway, key, request.param or "runc", created.json()["session_id"], 0,
                    socket_root, private_redis, log_path)


@pytest.fixture
async def client(stage: Stage) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the stage's gateway; after the test, the bystander is checked untouched."""
    async with stage.client() as client:
        yield client
        answer = await call(client, stage.bystander, "increment", {"name": "b"})
        assert answer["result"]["data"] == {"name": "b", "before": stage.count,
                                             "value": stage.count + 1}
        stage.count += 1
        trajectory = await entries(client, stage.bystander)
        assert [e["result"]["data"]["before"] for e in trajectory] == list(range(stage.count))
        ready = await client.get("/readyz")
        assert ready.status_code == 200, ready.text


async def tool(client: httpx.AsyncClient, session_id: str, tool_name: str, /, **arguments: Any
               ) -> httpx.Response:
    return await client.post(f"/v1/sessions/{session_id}/calls",
                             json={"name": tool_name, "arguments": arguments})


async def result(client: httpx.AsyncClient, session_id: str, tool_name: str, /,
                 **arguments: Any) -> Any:
    """The tool's own result (a tool that fails answers ``success: false``)."""
    return (await call(client, session_id, tool_name, arguments))["result"]


def crashed(response: httpx.Response) -> str:
    """The call was answered 200 with a recorded ``SandboxCrashed``; its message."""
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["ok"] is False and body["error"]["type"] == "SandboxCrashed", body
    assert "Traceback" not in response.text
    return body["error"]["message"]


# ---------------------------------------------------------------- escape_artist


async def test_no_network(stage: Stage, client: httpx.AsyncClient) -> None:
    sid = await new_session(client, "escape_artist")
    port = stage.gateway.port
    for host, target_port in [("1.1.1.1", 53), ("172.17.0.1", port), ("127.0.0.1", port),
                              ("10.0.2.2", 80)]:
        answer = await result(client, sid, "connect_tcp", host=host, port=target_port)
        assert answer["success"] is False, (host, answer)
    assert (await result(client, sid, "resolve", name="example.com"))["success"] is False
    interfaces = await result(client, sid, "list_dir", path="/sys/class/net")
    assert interfaces["success"] is False or interfaces["data"] == ["lo"], interfaces


async def test_host_files_are_out_of_reach(stage: Stage, client: httpx.AsyncClient) -> None:
    sid = await new_session(client, "escape_artist")
    shadow = await result(client, sid, "read_file", path="/etc/shadow")
    assert shadow["success"] is False, shadow  # the image's own, and unreadable to nobody
    for path in [REPO_ROOT / "envscaler" / "server" / "settings.py",  # the gateway's code
                 stage.log_path,                           # the gateway's log
                 stage.socket_root / "instances",          # the host's socket root
                 Path("/var/lib/docker"),
                 Path("/root")]:
        answer = await result(client, sid, "read_file", path=str(path))
        assert answer["success"] is False, (path, answer)
        listing = await result(client, sid, "list_dir", path=str(path))
        assert listing["success"] is False, (path, listing)


async def test_writes_outside_tmp_fail(stage: Stage, client: httpx.AsyncClient) -> None:
    sid = await new_session(client, "escape_artist")
    for path in ["/etc/passwd", "/opt/envscaler/sandbox/runtime/envhost.py", "/evil",
                 "/var/tmp/x", "/run/envscaler/planted", "/proc/sys/kernel/hostname"]:
        answer = await result(client, sid, "write_file", path=path, text="x")
        assert answer["success"] is False, (path, answer)
    assert (await result(client, sid, "write_file", path="/tmp/ok", text="x"))["success"] is True
    ballast = await result(client, sid, "fill_socket_dir", megabytes=64)
    assert ballast["success"] is False, ballast  # the host's disk is not the sandbox's to fill


async def test_service_secrets_are_not_in_the_sandbox(stage: Stage,
                                                      client: httpx.AsyncClient) -> None:
    sid = await new_session(client, "escape_artist")
    found = (await result(client, sid, "environment"))["data"]
    text = repr(found)
    assert stage.key not in text
    assert "ENVSCALER_" not in text
    assert not any(name.startswith("ENVSCALER") for name in found["environ"])


async def test_docker_socket_and_other_sessions_sockets_are_unreachable(
    stage: Stage, client: httpx.AsyncClient
) -> None:
    sid = await new_session(client, "escape_artist")
    for path in ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"]:
        answer = await result(client, sid, "connect_unix", path=path)
        assert answer["success"] is False, (path, answer)
    found = (await result(client, sid, "host_socket_root"))["data"]
    # its own directory: the keeper's socket and its slots' (theirs refuse it: test_docker_sandbox)
    own = found["listings"].pop("/run/envscaler")
    slots = len(own) - 1
    assert sorted(own) == sorted(["control.sock", *map(runtime_socket_name, range(slots))]), own
    assert 1 <= slots <= Settings().sandbox_slots
    assert found["sources"], found  # the mount table names the host directory...
    host_names = {p.name for p in Path(stage.socket_root).iterdir()} | set(own)
    for path, listing in found["listings"].items():  # ...but that path leads nowhere in here
        if path in found["sources"]:
            assert isinstance(listing, str), (path, listing)
        if isinstance(listing, list):
            assert not host_names & set(listing), (path, listing)
    # The bystander's socket, by its host path (as if it had leaked): not reachable from here.
    async with stage.client() as admin:
        info = (await admin.get(f"/v1/sessions/{stage.bystander}")).json()
    assert info["status"] == "active"
    other = next(iter(Path(stage.socket_root).glob("*/*/runtime.sock")))
    answer = await result(client, sid, "connect_unix", path=str(other))
    assert answer["success"] is False, answer


async def test_the_socket_cannot_be_swapped_for_a_link(stage: Stage,
                                                       client: httpx.AsyncClient) -> None:
    """Replacing its own socket with a link to another socket would make the next gateway that
    attaches to this session talk to that one: the socket's directory is not the sandbox's."""
    sid = await new_session(client, "escape_artist")
    target = str(next(iter(Path(stage.socket_root).glob("*/*/runtime.sock"))))
    answer = await result(client, sid, "hijack_socket", target=target)
    assert answer["success"] is False, answer
    assert (await result(client, sid, "note", key="still", value="here"))["success"] is True


# ---------------------------------------------------------------- resource_hog


async def test_fork_bomb(stage: Stage, client: httpx.AsyncClient) -> None:
    sid = await new_session(client, "resource_hog")
    body = (await tool(client, sid, "fork_bomb")).json()
    assert body["ok"] is True and body["result"]["data"]["forked"] < 64, body  # its slot's limit
    assert body["result"]["data"]["error"] == "Resource temporarily unavailable"
    assert (await result(client, sid, "note", text="after"))["data"] == 1


async def test_memory_bomb(stage: Stage, client: httpx.AsyncClient) -> None:
    sid = await new_session(client, "resource_hog")
    await result(client, sid, "note", text="before")
    message = crashed(await tool(client, sid, "memory_bomb"))
    if stage.runtime == "runc":
        assert "out of memory" in message, message
    assert (await result(client, sid, "note", text="after"))["data"] == 2


async def test_endless_loop(stage: Stage, client: httpx.AsyncClient) -> None:
    sid = await new_session(client, "resource_hog")
    assert_error(await tool(client, sid, "spin"), 504, "Timeout")
    assert (await result(client, sid, "note", text="after"))["data"] == 1


async def test_deep_recursion(stage: Stage, client: httpx.AsyncClient) -> None:
    sid = await new_session(client, "resource_hog")
    body = (await tool(client, sid, "recurse", depth=100_000)).json()
    assert body["ok"] is False and body["error"]["type"] == "ToolException", body
    assert "RecursionError" in body["error"]["message"]
    crashed(await tool(client, sid, "smash_stack"))
    assert (await result(client, sid, "note", text="after"))["data"] == 1


async def test_huge_results(stage: Stage, client: httpx.AsyncClient) -> None:
    sid = await new_session(client, "resource_hog")
    body = (await tool(client, sid, "huge_result", megabytes=8)).json()
    assert body["ok"] is False and body["error"]["type"] == "ResultTooLarge", body
    body = (await tool(client, sid, "nested_result", depth=100_000)).json()
    assert body["ok"] is True, body  # cut at the runtime's depth limit, with a marker
    depth, value = 0, body["result"]["data"]
    while isinstance(value, list):
        depth, value = depth + 1, value[0]
    assert depth < 200 and value.startswith("<max depth reached"), (depth, value)
    filled = await result(client, sid, "fill_tmp")
    assert filled["data"]["error"] == "No space left on device", filled
    # the container's /tmp: the sessions' share (ENVSCALER_SANDBOX_TMPFS) times its slots
    assert filled["data"]["written"] <= (16 << 20) * Settings().sandbox_slots
    assert (await result(client, sid, "note", text="after"))["data"] == 1


# ---------------------------------------------------------------- self_destruct


@pytest.mark.parametrize("name,arguments", [
    ("exit_now", {"code": 1}),
    ("kill_self", {"signal": 9}),
])
async def test_a_tool_that_kills_its_runtime(stage: Stage, client: httpx.AsyncClient, name: str,
                                             arguments: dict[str, Any]) -> None:
    sid = await new_session(client, "self_destruct")
    await result(client, sid, "note", text="before")
    crashed(await tool(client, sid, name, **arguments))
    assert (await result(client, sid, "note", text="after"))["data"] == 2
    trajectory = await entries(client, sid)
    assert [(e["name"], e["ok"], e["replay"]) for e in trajectory] == [
        ("note", True, True), (name, False, False), ("note", True, True)]


async def test_killing_every_process_spares_all_but_its_own(stage: Stage,
                                                             client: httpx.AsyncClient) -> None:
    """kill(-1, SIGKILL) reaches only what the sandbox's user may signal in its own PID
    namespace: not init, which is exempt, and not the keeper, which runs as another user (the
    kernel may still count the call as delivered). The session goes on in the same sandbox."""
    sid = await new_session(client, "self_destruct")
    response = await tool(client, sid, "kill_everything")
    body = response.json()
    assert (body["ok"] is True and body["result"]["data"] == "survived") or \
        body["error"]["type"] == "ToolException", body
    assert (await result(client, sid, "note", text="after"))["data"] == 1
    assert [entry.get("replay") for entry in await entries(client, sid)] == [True, True]


@pytest.mark.parametrize("signal_number", [9, 15, 2])
async def test_signals_to_pid_1(stage: Stage, client: httpx.AsyncClient,
                                signal_number: int) -> None:
    """Under runc, SIGKILL to init is ignored inside its namespace; under gVisor it ends the
    sandbox. docker-init forwards SIGTERM and SIGINT to the runtime, which may die just after
    answering: the call is then recorded as having run, and every rebuild replays it and dies
    again. Either way only this session suffers, with a clear error (SandboxCrashed, or 503 naming
    the replayed call that killed the sandbox), until it is reset."""
    sid = await new_session(client, "self_destruct")
    await result(client, sid, "note", text="before")
    response = await tool(client, sid, "signal_init", signal=signal_number)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["ok"] is True or body["error"]["type"] == "SandboxCrashed", body
    after = await tool(client, sid, "note", text="after")
    if after.status_code == 503:
        message = assert_error(after, 503, "BackendUnavailable")["message"]
        assert "replaying call 1" in message, message
    else:
        body = after.json()
        assert body["ok"] is True or body["error"]["type"] == "SandboxCrashed", body
    if signal_number == 9 and stage.runtime == "runc":
        assert after.json()["result"]["data"] == 2
    reset = await client.post(f"/v1/sessions/{sid}/reset")
    assert reset.status_code == 200, reset.text
    assert (await result(client, sid, "note", text="fresh"))["data"] == 1


# ---------------------------------------------------------------- slow_start


@pytest.mark.parametrize("mode,status,error_type", [
    ("hang", 504, "Timeout"),
    ("exit", 503, "BackendUnavailable"),
    ("raise", 422, "InvalidRequest"),
])
async def test_a_constructor_that_misbehaves(stage: Stage, client: httpx.AsyncClient, mode: str,
                                             status: int, error_type: str) -> None:
    before = claimed(stage.gateway.instances[-1])
    response = await client.post("/v1/sessions",
                                 json={"env": "slow_start", "init_config": {"mode": mode}})
    assert_error(response, status, error_type)
    assert claimed(stage.gateway.instances[-1]) <= before, "the failed sandbox was left running"


def claimed(instance: str) -> set[str]:
    """Running containers of ``instance`` claimed by a session (renamed after it)."""
    return {c.id for c in containers_of(instance, running=True)
            if c.name != f"envscaler-{instance}-{c.labels['envscaler.sandbox']}"}
