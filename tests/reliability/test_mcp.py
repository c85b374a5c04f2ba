"""MCP per session (`envscaler.server.doors.mcp`), driven by the official MCP Python client
(``mcp.client.streamable_http``, 2.x here and 1.x from ``.venv-mcp1``) over real HTTP: against a
gateway under uvicorn, and through ``envscaler serve`` with two workers, where requests of one
session land on both. Real Redis, real Docker sandboxes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from envscaler.server.embedded_redis import free_port
from envscaler.server.settings import Settings
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import (
    COUNTER,
    LIBRARY,
    REPO_ROOT,
    GatewayProcess,
    gateway_process,
    own_redis_db,
)
from tests.integration.serve_helpers import serve, serve_env, wait_for
from tests.reliability.helpers import entries, state

API_KEY = "mcp-test-admin-key-0123456789"
CALL_TIMEOUT = 2.0
CLIENTS = 16


def _gateway_settings(redis_url: str, db: int, **values: Any) -> dict[str, Any]:
    return {"redis_url": own_redis_db(redis_url, db), "api_keys": [API_KEY], "call_timeout": CALL_TIMEOUT,
            "max_sandboxes": 48, "pool_size": 4, "log_level": "WARNING", **values}


@pytest.fixture(scope="module")
def gateway(redis_url: str, sandbox_image: str, socket_root: Path, catalogue_root: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    settings = Settings(**_gateway_settings(
        redis_url, 9, catalogue=catalogue_root, sandbox_backend="docker",
        sandbox_image=sandbox_image, socket_root=socket_root))
    with gateway_process(settings, tmp_path_factory.mktemp("mcp") / "gw.log") as process:
        yield process


@pytest.fixture(scope="module")
def open_gateway(redis_url: str, sandbox_image: str, socket_root: Path, catalogue_root: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway without API keys (REST admits the loopback operator without a token)."""
    settings = Settings(**_gateway_settings(
        redis_url, 11, api_keys=[], pool_size=1, catalogue=catalogue_root,
        sandbox_backend="docker", sandbox_image=sandbox_image, socket_root=socket_root))
    with gateway_process(settings, tmp_path_factory.mktemp("mcp-open") / "gw.log") as process:
        yield process


@pytest.fixture
async def admin(gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway.client(API_KEY) as client:
        yield client


async def _open(admin: httpx.AsyncClient, env: str = COUNTER, **body: Any) -> tuple[str, str]:
    """A new session: (id, agent token)."""
    response = await admin.post("/v1/sessions", json={"env": env, **body})
    assert response.status_code == 201, response.text
    return response.json()["session_id"], response.json()["agent_token"]


def _mcp_url(base: str, session_id: str) -> str:
    return f"{base}/v1/sessions/{session_id}/mcp"


@asynccontextmanager
async def mcp_session(url: str, token: str | None,
                      http: httpx2.AsyncClient | None = None) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session, as a harness opens one (``http``: a client of one's
    own, e.g. held to one worker; its headers then carry the token)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    own = http is None
    client = http or httpx2.AsyncClient(headers=headers, timeout=scaled(60))
    try:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session
    finally:
        if own:
            await client.aclose()


def _error(result: types.CallToolResult) -> dict[str, Any]:
    """The REST error object an isError result carries."""
    assert result.is_error is True, result
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return json.loads(content.text)


def _result(result: types.CallToolResult) -> Any:
    assert result.is_error is False, result
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return json.loads(content.text)


# ---------------------------------------------------------------- tools/list


async def test_tools_list_is_exactly_the_sessions_tools(
        gateway: GatewayProcess, admin: httpx.AsyncClient) -> None:
    session_id, token = await _open(admin, LIBRARY, scenario=f"{LIBRARY}-001")
    rest = (await admin.get(f"/v1/sessions/{session_id}/tools")).json()["tools"]
    async with mcp_session(_mcp_url(gateway.url, session_id), token) as mcp:
        listed = (await mcp.list_tools()).tools
    assert [tool.name for tool in listed] == [tool["function"]["name"] for tool in rest]
    for tool, schema in zip(listed, rest, strict=True):
        assert tool.input_schema == schema["function"]["parameters"]
        assert tool.description == schema["function"]["description"]
    assert not {"reset", "validate", "state", "trajectory"} & {tool.name for tool in listed}


# ---------------------------------------------------------------- tools/call


async def test_calls_take_the_rest_path_and_failures_are_readable_results(
        gateway: GatewayProcess, admin: httpx.AsyncClient) -> None:
    session_id, token = await _open(admin, COUNTER, scenario="counter-1")
    async with mcp_session(_mcp_url(gateway.url, session_id), token) as mcp:
        done = await mcp.call_tool("increment", {"name": "a", "by": 2}, meta={"call_id": "c-1"})
        assert _result(done) == {"success": True, "data": {"name": "a", "before": 1, "value": 3}}
        assert done.structured_content == _result(done)
        assert done.meta is not None and done.meta["index"] == 0 and not done.meta["duplicate"]
        # a retry with the same call_id answers the stored result and runs nothing
        again = await mcp.call_tool("increment", {"name": "a", "by": 2}, meta={"call_id": "c-1"})
        assert _result(again) == _result(done) and again.meta and again.meta["duplicate"] is True

        refused = _error(await mcp.call_tool("increment", {"name": "b", "by": "two"}))
        assert refused["type"] == "InvalidArguments" and refused["field"] == "by", refused
        assert _error(await mcp.call_tool("reset", {}))["type"] == "UnknownTool"
        assert _error(await mcp.call_tool("validate", {}))["type"] == "UnknownTool"
        long_id = _error(await mcp.call_tool("increment", {"name": "b"},
                                             meta={"call_id": "x" * 201}))
        assert long_id["type"] == "InvalidRequest" and long_id["field"] == "call_id", long_id

        # the limits of REST calls hold here too: the service's, as an isError result...
        huge = _error(await mcp.call_tool("increment", {"name": "é" * 200_000}))
        assert huge["type"] == "ArgumentsTooLarge", huge  # ENVSCALER_MAX_ARGUMENT_BYTES
        # ...and those of the layers before the door, as a JSON-RPC error with their message
        with pytest.raises(MCPError, match="ENVSCALER_MAX_JSON_STRING"):
            await mcp.call_tool("increment", {"name": "x" * 300_000})

        failed = _error(await mcp.call_tool("explode", {"message": "the shelf fell"}))
        assert failed["type"] == "ToolException" and "the shelf fell" in failed["message"]
        late = _error(await mcp.call_tool("nap", {"seconds": CALL_TIMEOUT * 3}))
        assert late["type"] == "Timeout", late
        # the session goes on after a tool's exception and a deadline
        assert _result(await mcp.call_tool("increment", {"name": "b"}))["data"]["value"] == 1

    trajectory = await entries(admin, session_id)
    assert [(e["name"], e["ok"]) for e in trajectory] == [
        ("increment", True), ("explode", False), ("nap", False), ("increment", True)]
    assert trajectory[0]["call_id"] == "c-1"
    assert (await state(admin, session_id))["counters"] == {"a": 3, "b": 1}
    validation = (await admin.post(f"/v1/sessions/{session_id}/validate")).json()
    assert validation["reward"] == 1.0, validation


MCP1_PYTHON = REPO_ROOT / ".venv-mcp1" / "bin" / "python"  # scripts/bootstrap makes it
MCP1_CLIENT = REPO_ROOT / "tests" / "fixtures" / "mcp1" / "client.py"


async def test_a_harness_on_the_mcp_1x_sdk_works_too(
        gateway: GatewayProcess, admin: httpx.AsyncClient) -> None:
    assert MCP1_PYTHON.exists(), "no .venv-mcp1: run scripts/bootstrap"
    session_id, token = await _open(admin, COUNTER, scenario="counter-1")
    calls = [["increment", {"name": "a", "by": 2}], ["increment", {"name": "b", "by": "x"}],
             ["explode", {"message": "no"}], ["increment", {"name": "b"}]]
    process = await asyncio.create_subprocess_exec(
        str(MCP1_PYTHON), str(MCP1_CLIENT), _mcp_url(gateway.url, session_id), token,
        json.dumps(calls), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), scaled(120))
    assert process.returncode == 0, stderr.decode()[-3000:]
    seen = json.loads(stdout)
    assert seen["tools"] == ["increment", "nap", "token", "spin", "explode", "crash", "blob"]
    done, refused, failed, again = seen["results"]
    assert not done["is_error"] and json.loads(done["text"])["data"]["value"] == 3
    assert refused["is_error"] and json.loads(refused["text"])["type"] == "InvalidArguments"
    assert failed["is_error"] and json.loads(failed["text"])["type"] == "ToolException"
    assert not again["is_error"] and json.loads(again["text"])["data"]["value"] == 1
    validation = (await admin.post(f"/v1/sessions/{session_id}/validate")).json()
    assert validation["reward"] == 1.0, validation


# ---------------------------------------------------------------- refusals


async def test_bad_token_unknown_session_and_closed_session_are_refused_clearly(
        gateway: GatewayProcess, admin: httpx.AsyncClient) -> None:
    session_id, token = await _open(admin)
    other_id, other_token = await _open(admin)
    url = _mcp_url(gateway.url, session_id)
    unknown = _mcp_url(gateway.url, "Z" * 24)
    forged = f"{session_id}.{'A' * 32}"
    cases = [  # (url, token, status, type, what the MCP client raises)
        (url, None, 401, "Unauthorized", "missing 'Authorization"),
        (url, "not-a-key", 401, "Unauthorized", "unknown API key"),
        (url, forged, 401, "Unauthorized", "invalid agent token"),
        (url, other_token, 403, "Forbidden", "belongs to another session"),
        (unknown, API_KEY, 404, "UnknownSession", "never created"),
        (unknown, other_token, 403, "Forbidden", "belongs to another session"),
    ]
    for target, bad, status, error_type, message in cases:
        error = _refused(await _raw_initialize(target, bad), status, error_type)
        assert message in error["message"], error
        await _client_refused(target, bad, message)

    # the refusals left both sessions usable; a session closed under a client refuses it
    async with mcp_session(url, token) as mcp:
        assert _result(await mcp.call_tool("increment", {"name": "a"}))["data"]["value"] == 1
        deleted = await admin.delete(f"/v1/sessions/{session_id}")
        assert deleted.status_code == 200, deleted.text
        with pytest.raises(MCPError, match="was deleted"):
            await mcp.call_tool("increment", {"name": "a"})
    _refused(await _raw_initialize(url, token), 409, "SessionClosed")
    async with mcp_session(_mcp_url(gateway.url, other_id), other_token) as mcp:
        assert _result(await mcp.call_tool("increment", {"name": "z"}))["data"]["value"] == 1


async def test_get_and_delete_answer_405_and_hold_no_stream_open(
        gateway: GatewayProcess, admin: httpx.AsyncClient) -> None:
    """A stateless server has nothing to send unprompted and no MCP session to end: no SSE
    stream is opened (it would never end, outside every request timeout), the answer is
    complete at once, and the SDK's client goes on working."""
    session_id, token = await _open(admin)
    url = _mcp_url(gateway.url, session_id)
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    async with httpx.AsyncClient(timeout=scaled(30)) as client:
        for method in ("GET", "DELETE"):
            async with client.stream(method, url, headers=headers) as response:
                assert response.status_code == 405, (method, response.headers)
                assert response.headers["allow"] == "POST"
                body = json.loads(await response.aread())  # complete: nothing held open
            assert body["jsonrpc"] == "2.0" and body["error"]["type"] == "MethodNotAllowed"
            assert "stateless" in body["error"]["message"], body
    async with mcp_session(url, token) as mcp:
        assert _result(await mcp.call_tool("increment", {"name": "a"}))["data"]["value"] == 1


async def test_meta_seq_orders_calls_as_the_rest_seq_does(
        gateway: GatewayProcess, admin: httpx.AsyncClient) -> None:
    session_id, token = await _open(admin)
    async with mcp_session(_mcp_url(gateway.url, session_id), token) as mcp:
        later, first = await asyncio.gather(
            mcp.call_tool("increment", {"name": "b"}, meta={"seq": 1}),
            mcp.call_tool("increment", {"name": "a"}, meta={"seq": 0}))
        assert _result(first)["data"]["name"] == "a" and first.meta and first.meta["index"] == 0
        assert later.meta and later.meta["index"] == 1
        late = _error(await mcp.call_tool("increment", {"name": "c"}, meta={"seq": 0}))
        assert late["type"] == "CallOutOfOrder" and late["field"] == "seq", late


async def test_without_api_keys_the_mcp_door_still_needs_the_agent_token(
        open_gateway: GatewayProcess) -> None:
    """One rule: the MCP door admits the session's agent token (or an API key), nothing else,
    whether or not the gateway has API keys; each 401 says why in ``WWW-Authenticate`` too, so
    that an MCP client shows it instead of starting an OAuth login."""
    async with httpx.AsyncClient(base_url=open_gateway.url, timeout=scaled(60)) as operator:
        session_id, token = await _open(operator)  # REST: the loopback operator, no token
    url = _mcp_url(open_gateway.url, session_id)
    cases = [(None, "invalid_request", "missing 'Authorization"),
             ("not-a-key", "invalid_token", "not an agent token"),
             (f"{session_id}.{'A' * 32}", "invalid_token", "invalid agent token")]
    for bad, code, message in cases:
        response = await _raw_initialize(url, bad)
        error = _refused(response, 401, "Unauthorized")
        assert message in error["message"], error
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and f'error="{code}"' in challenge, challenge
        assert f'error_description="{error["message"]}"' in challenge, challenge
        await _client_refused(url, bad, message)
    async with mcp_session(url, token) as mcp:
        assert _result(await mcp.call_tool("increment", {"name": "a"}))["data"]["value"] == 1


async def _raw_initialize(url: str, token: str | None) -> httpx.Response:
    """An MCP ``initialize`` as plain HTTP, to read the status and body of a refusal."""
    headers = {"Accept": "application/json, text/event-stream",
               **({"Authorization": f"Bearer {token}"} if token else {})}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}
    async with httpx.AsyncClient(timeout=scaled(30)) as client:
        return await client.post(url, json=body, headers=headers)


async def _client_refused(url: str, token: str | None, message: str) -> None:
    """The SDK's client, opening ``url`` with ``token``, raises the gateway's ``message``."""
    with pytest.raises((MCPError, BaseExceptionGroup)) as raised:
        async with mcp_session(url, token):
            pass
    assert message in _mcp_error(raised.value).error.message, raised.value


def _mcp_error(raised: BaseException) -> MCPError:
    """The client's error, out of the task groups it was raised through."""
    while isinstance(raised, BaseExceptionGroup) and len(raised.exceptions) == 1:
        raised = raised.exceptions[0]
    assert isinstance(raised, MCPError), raised
    return raised


def _refused(response: httpx.Response, status: int, error_type: str) -> dict[str, Any]:
    """The gateway's error shape, which is also a JSON-RPC error."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["ok"] is False and body["jsonrpc"] == "2.0" and body["id"] is None, body
    assert body["error"]["type"] == error_type and body["error"]["message"], body
    assert isinstance(body["error"]["code"], int)
    return body["error"]


# ---------------------------------------------------------------- many clients at once


async def test_many_mcp_clients_at_once_each_see_only_their_session(
        gateway: GatewayProcess, admin: httpx.AsyncClient) -> None:
    sessions = [await _open(admin) for _ in range(CLIENTS)]

    async def agent(number: int, session_id: str, token: str) -> None:
        async with mcp_session(_mcp_url(gateway.url, session_id), token) as mcp:
            assert len((await mcp.list_tools()).tools) == 7
            for step in range(1, 4):
                done = await mcp.call_tool("increment", {"name": f"n{number}", "by": number},
                                           meta={"call_id": f"{number}-{step}"})
                assert _result(done)["data"]["value"] == number * step

    await asyncio.gather(*(agent(n, *s) for n, s in enumerate(sessions, start=1)))
    for number, (session_id, _token) in enumerate(sessions, start=1):
        assert (await state(admin, session_id))["counters"] == {f"n{number}": number * 3}
        assert len(await entries(admin, session_id)) == 3


# ---------------------------------------------------------------- envscaler serve, 2 workers


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=scaled(2)).status_code == 200
    except httpx.HTTPError:
        return False


@dataclass
class Pinned:
    """An MCP client on one kept-alive connection, and the local port of each of its answers."""

    mcp: ClientSession
    http: httpx2.AsyncClient
    ports: list[int]

    async def instance(self) -> str:
        """The worker holding the connection (``/healthz`` on it)."""
        return str((await self.http.get(self.http.base_url.join("/healthz"))).json()["instance"])


async def _pinned(stack: AsyncExitStack, base: str, session_id: str, token: str) -> Pinned:
    ports: list[int] = []

    async def record(response: httpx2.Response) -> None:
        ports.append(response.extensions["network_stream"].get_extra_info("client_addr")[1])

    http = httpx2.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"},
                              timeout=scaled(60), limits=httpx2.Limits(max_connections=1),
                              event_hooks={"response": [record]})
    stack.push_async_callback(http.aclose)
    mcp = await stack.enter_async_context(mcp_session(_mcp_url(base, session_id), None, http))
    return Pinned(mcp, http, ports)


async def test_through_envscaler_serve_any_worker_serves_any_mcp_request(
        redis_url: str, sandbox_image: str, socket_root: Path, catalogue_root: Path,
        tmp_path: Path) -> None:
    """One session's MCP requests alternate between two clients whose connections are held by
    different workers of ``envscaler serve --workers 2``."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    values = _gateway_settings(redis_url, 10, catalogue=str(catalogue_root),
                               sandbox_backend="docker", sandbox_image=sandbox_image,
                               pool_size="1", api_keys=API_KEY, log_level="INFO")
    env = serve_env(socket_root, **{name: str(value) for name, value in values.items()})
    process = serve(port, env, tmp_path / "serve.log", workers=2)
    try:
        wait_for(lambda: _ready(port), 90, "the gateway")
        async with httpx.AsyncClient(base_url=base, timeout=scaled(60),
                                     headers={"Authorization": f"Bearer {API_KEY}"}) as admin, \
                AsyncExitStack() as stack:
            session_id, token = await _open(admin)
            on: dict[str, Pinned] = {}
            for _ in range(64):  # new connections land on either worker
                pinned = await _pinned(stack, base, session_id, token)
                on[await pinned.instance()] = pinned
                if len(on) == 2:  # asked again: an idle connection may have been closed
                    on = {await pinned.instance(): pinned for pinned in on.values()}
                    if len(on) == 2:
                        break
            assert len(on) == 2, "every connection landed on one worker"
            clients = list(on.values())
            held = {id(c): (len(c.ports) - 1, c.ports[-1]) for c in clients}  # the /healthz
            for step in range(1, 7):
                done = await clients[step % 2].mcp.call_tool("increment", {"name": "a"})
                assert _result(done)["data"]["value"] == step  # one session, either worker
            for instance, client in on.items():
                assert await client.instance() == instance
                first, port_held = held[id(client)]
                assert set(client.ports[first:]) == {port_held}  # all on the worker's connection
            assert [e["name"] for e in await entries(admin, session_id)] == ["increment"] * 6
    finally:
        process.terminate()
        process.wait(scaled(30))
