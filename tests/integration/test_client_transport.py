"""The async client's connection pool (`envscaler_client._transport`) against a real HTTP/1.1 server
(uvicorn, as the gateway serves): connections are reused, capped only when asked (and the cap is
logged), expired before the server's keep-alive timeout, never reused out of step after a cancelled
request, and failures map to httpx's errors, which the client's retry policy knows."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn
from envscaler_client import AsyncEnvClient, RetryPolicy, TransportError, connection_limits
from envscaler_client._transport import PoolTransport

from envscaler.server.embedded_redis import free_port

Scope = dict[str, Any]


async def app(scope: Scope, receive: Any, send: Any) -> None:
    """Answers each request with its path, body and the client's port (one port a connection);
    ``/slow`` after 0.3 s, ``/close`` with ``Connection: close``."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"] == "/slow":
        await asyncio.sleep(0.3)
    answer = json.dumps({"path": scope["path"], "body": body.decode(),
                         "port": scope["client"][1]}).encode()
    headers = [(b"content-type", b"application/json")]
    if scope["path"] == "/close":
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": answer})


@pytest.fixture
async def server_url() -> AsyncIterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    await serving


def client(url: str, limits: httpx.Limits, **timeouts: float) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, transport=PoolTransport(limits),
                             timeout=httpx.Timeout(10.0, **timeouts))


async def ports(http: httpx.AsyncClient, *paths: str) -> list[int]:
    answers = await asyncio.gather(*(http.get(path) for path in paths))
    return [answer.json()["port"] for answer in answers]


async def test_a_connection_is_reused_and_the_body_and_path_arrive(server_url: str) -> None:
    async with client(server_url, connection_limits(4)) as http:
        first = await http.post("/a?x=1", json={"k": "v"})
        second = await http.post("/b", content=b"raw")
        assert first.json()["path"] == "/a" and json.loads(first.json()["body"]) == {"k": "v"}
        assert second.json()["body"] == "raw"
        assert first.json()["port"] == second.json()["port"]


async def test_requests_beyond_the_cap_wait_and_the_cap_is_logged_once(
        server_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="envscaler.client")
    async with client(server_url, connection_limits(2)) as http:
        seen = await ports(http, *["/slow"] * 6)
        seen += await ports(http, *["/slow"] * 6)
    assert len(set(seen)) == 2
    warnings = [r.getMessage() for r in caplog.records if "connection cap" in r.getMessage()]
    assert len(warnings) == 1 and "max_connections=2" in warnings[0]


async def test_without_a_cap_every_concurrent_request_has_its_connection(server_url: str) -> None:
    async with AsyncEnvClient(server_url) as envclient:
        assert envclient.config.limits.max_connections is None
    async with client(server_url, httpx.Limits(max_connections=None)) as http:
        assert len(set(await ports(http, *["/slow"] * 150))) == 150


async def test_an_idle_connection_expires_and_a_closing_one_is_not_reused(server_url: str) -> None:
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=4, keepalive_expiry=0.2)
    async with client(server_url, limits) as http:
        [before] = await ports(http, "/")
        await asyncio.sleep(0.3)
        [after] = await ports(http, "/")
        assert after != before
        [closing] = await ports(http, "/close")
        [next_one] = await ports(http, "/")
        assert closing == after and next_one != closing


async def test_a_cancelled_request_does_not_leave_its_answer_to_the_next(server_url: str) -> None:
    async with client(server_url, connection_limits(1)) as http:
        slow = asyncio.create_task(http.get("/slow"))
        await asyncio.sleep(0.1)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        answer = await http.get("/after")
        await asyncio.sleep(0.4)  # the cancelled request's answer would have come by now
        assert answer.json()["path"] == "/after"
        assert (await http.get("/again")).json()["path"] == "/again"


async def test_waiting_longer_than_the_pool_timeout_fails(server_url: str) -> None:
    async with client(server_url, connection_limits(1), pool=0.05) as http:
        slow = asyncio.create_task(http.get("/slow"))
        await asyncio.sleep(0.05)
        with pytest.raises(httpx.PoolTimeout):
            await http.get("/")
        assert (await slow).status_code == 200
        assert (await http.get("/")).status_code == 200  # the slot was given back


async def test_a_read_timeout_and_an_unreachable_gateway_are_httpx_errors(server_url: str) -> None:
    async with client(server_url, connection_limits(1), read=0.05) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get("/slow")
        assert (await http.get("/")).status_code == 200
    once = RetryPolicy(attempts=1)
    async with AsyncEnvClient(f"http://127.0.0.1:{free_port()}", retry=once) as envclient:
        with pytest.raises(TransportError) as caught:
            await envclient.health()
        assert caught.value.unreachable


async def test_a_cancelled_wait_for_a_connection_passes_it_on(server_url: str) -> None:
    async with client(server_url, connection_limits(1), pool=60.0) as http:
        slow = asyncio.create_task(http.get("/slow"))
        await asyncio.sleep(0.05)
        gone = asyncio.create_task(http.get("/gone"))
        waiting = asyncio.create_task(http.get("/waiting"))
        await asyncio.sleep(0.05)
        gone.cancel()
        assert (await slow).status_code == 200
        answer = await asyncio.wait_for(waiting, 30.0)  # handed on, not left to the pool timeout
        assert answer.json()["path"] == "/waiting"
        with pytest.raises(asyncio.CancelledError):
            await gone
