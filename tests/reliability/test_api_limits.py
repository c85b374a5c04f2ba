"""What any HTTP client can do to the gateway, against a real gateway (uvicorn, as `envscaler
serve` runs it), real Redis and Docker sandboxes: JSON of any shape, big calls, endless sessions,
forged agent tokens, foreign hosts and web pages, connections that never finish their head.

Each refusal is a clear error in the gateway's shape, nothing is recorded, the session goes on,
and no other session notices."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis as redis_sync
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from envscaler.server.settings import Settings
from envscaler.server.store import LIVE_KEYS, calls_key, live_key, lock_key, session_key
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import (
    COUNTER,
    GatewayProcess,
    gateway_process,
    own_redis_db,
)

ADMIN = "admin-key-for-the-limits-tests"
ARGUMENT_BYTES = 16_384
ITEMS, KEYS, STRING = 1_000, 100, 15_000
SESSION_CALLS, TRAJECTORY_BYTES, RESULT_BYTES = 40, 262_144, 196_608
MAX_RESULT = 24_576
HEAD_TIMEOUT, BODY_TIMEOUT, CONNECTIONS = 1.5, 2.0, 6
JSON = {"content-type": "application/json"}


def limits_settings(db: int, redis_url: str, sandbox_image: str, socket_root: Path,
                    catalogue_root: Path, **overrides: Any) -> Settings:
    return Settings(redis_url=own_redis_db(redis_url, db), catalogue=catalogue_root,
                    sandbox_backend="docker", sandbox_image=sandbox_image,
                    socket_root=socket_root, pool_size=1, max_sandboxes=16, log_level="WARNING",
                    **overrides)


@pytest.fixture(scope="module")
def gateway(redis_url: str, sandbox_image: str, socket_root: Path, catalogue_root: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """No API keys (loopback), small limits."""
    settings = limits_settings(
        10, redis_url, sandbox_image, socket_root, catalogue_root, api_keys=[], call_timeout=3.0,
        max_argument_bytes=ARGUMENT_BYTES, max_json_items=ITEMS, max_json_keys=KEYS,
        max_json_string=STRING, max_session_calls=SESSION_CALLS,
        max_trajectory_bytes=TRAJECTORY_BYTES, max_session_result_bytes=RESULT_BYTES,
        max_result_bytes=MAX_RESULT,
        header_timeout=HEAD_TIMEOUT, body_timeout=BODY_TIMEOUT, max_connections=CONNECTIONS)
    with gateway_process(settings, tmp_path_factory.mktemp("limits") / "gw.log") as process:
        yield process


@pytest.fixture(scope="module")
def keyed_gateway(redis_url: str, sandbox_image: str, socket_root: Path, catalogue_root: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    settings = limits_settings(11, redis_url, sandbox_image, socket_root, catalogue_root,
                               api_keys=[ADMIN], call_timeout=10.0)
    with gateway_process(settings, tmp_path_factory.mktemp("limits-keyed") / "gw.log") as process:
        yield process


def refused(response: httpx.Response, status: int, error_type: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text[:500])
    assert "Traceback" not in response.text
    body = response.json()
    assert body["ok"] is False and body["error"]["type"] == error_type, body
    return body["error"]


def create(client: httpx.Client, **body: Any) -> str:
    response = client.post("/v1/sessions", json={"env": COUNTER, "scenario": "counter-1", **body})
    assert response.status_code == 201, response.text
    return response.json()["session_id"]


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def call_body(arguments: Any) -> bytes:
    return json.dumps({"name": "increment", "arguments": arguments}).encode()


# ---------------------------------------------------------------- JSON limits


def test_json_past_its_limits_is_refused_and_the_session_goes_on(
    gateway: GatewayProcess,
) -> None:
    with httpx.Client(base_url=gateway.url, timeout=scaled(60), headers=JSON) as client:
        session_id = create(client)
        calls = f"/v1/sessions/{session_id}/calls"
        deep = b'{"name": "increment", "arguments": {"name": ' + nested(500) + b"}}"
        cases = [
            # (path, body, status, type, field, the limit named)
            (calls, call_body({"name": [0] * (ITEMS + 1)}), 422, "JsonTooComplex",
             "body.arguments.name", "ENVSCALER_MAX_JSON_ITEMS"),
            (calls, deep, 422, "JsonTooComplex", "body.arguments.name" + ".0" * 30,
             "ENVSCALER_MAX_JSON_DEPTH"),
            (calls, call_body(nested(5_000).decode()), 422, "JsonTooComplex", "body.arguments",
             "ENVSCALER_MAX_JSON_DEPTH"),  # arguments as a JSON string, past the parser's stack
            (calls, call_body({f"k{i}": 0 for i in range(KEYS + 1)}), 422, "JsonTooComplex",
             "body.arguments", "ENVSCALER_MAX_JSON_KEYS"),
            (calls, call_body({"name": "x" * (STRING + 1)}), 422, "JsonTooComplex",
             "body.arguments.name", "ENVSCALER_MAX_JSON_STRING"),
            (calls, call_body({"name": "x" * 2 * ARGUMENT_BYTES}), 413, "ArgumentsTooLarge",
             None, "ENVSCALER_MAX_ARGUMENT_BYTES"),
            (calls, b'{"name": "increment", "arguments": ' + nested(100_000) + b"}", 413,
             "ArgumentsTooLarge", None, "ENVSCALER_MAX_ARGUMENT_BYTES"),
            ("/v1/sessions", b'{"env": "counter_lab", "init_config": {"a": '
             + nested(100_000) + b"}}", 422, "JsonTooComplex", "body", "ENVSCALER_MAX_JSON_DEPTH"),
            ("/v1/sessions", json.dumps({"env": COUNTER, "init_config": {"a": [0] * 6_000_000}})
             .encode(), 413, "StateTooLarge", None, "ENVSCALER_MAX_STATE_BYTES"),
            (f"/v1/sessions/{session_id}/reset", b'{"init_config": {"a": ' + nested(40) + b"}}",
             422, "JsonTooComplex", "body.init_config.a" + ".0" * 30, "ENVSCALER_MAX_JSON_DEPTH"),
        ]
        for path, body, status, error_type, field, limit in cases:
            error = refused(client.post(path, content=body), status, error_type)
            assert error.get("field") == field and limit in error["message"], (path, error)

        # Refused before reading: a call declaring a body past its limit gets its answer at once.
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=scaled(10)) as sock:
            sock.sendall(f"POST {calls} HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                         "application/json\r\nContent-Length: 4000000\r\n\r\n{".encode())
            answer = b""
            while b"}}" not in answer and (chunk := sock.recv(65536)):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 413") and b"ArgumentsTooLarge" in answer, answer

        # A session's start may be a database: more keys and items than any other body may
        # hold, within the size of a state.
        rows = {f"k{i}": [0] * (ITEMS + 1) for i in range(KEYS + 1)}
        opened = client.post("/v1/sessions", json={"env": COUNTER, "init_config": {"rows": rows}})
        assert opened.status_code == 201, opened.text[:300]
        started = client.get(f"/v1/sessions/{opened.json()['session_id']}/state")
        assert started.json()["state"]["rows"] == rows

        # Nothing was recorded; the session goes on and its trajectory reads.
        answer = client.post(calls, content=call_body({"name": "a"}))
        assert answer.status_code == 200 and answer.json()["index"] == 0, answer.text
        trajectory = client.get(f"/v1/sessions/{session_id}/trajectory")
        assert trajectory.status_code == 200 and len(trajectory.json()["entries"]) == 1
        assert client.get(f"/v1/sessions/{session_id}/state").status_code == 200


# ---------------------------------------------------------------- quotas


def test_quotas_bound_each_session_and_no_other(gateway: GatewayProcess) -> None:
    redis = redis_sync.Redis.from_url(gateway.env["ENVSCALER_REDIS_URL"])
    with httpx.Client(base_url=gateway.url, timeout=scaled(60), headers=JSON) as client:
        def run(session_id: str, name: str, arguments: dict[str, Any]) -> httpx.Response:
            return client.post(f"/v1/sessions/{session_id}/calls",
                               json={"name": name, "arguments": arguments})

        def until_refused(session_id: str, name: str, arguments: dict[str, Any]) -> dict:
            for _ in range(SESSION_CALLS + 1):
                response = run(session_id, name, arguments)
                if response.status_code != 200:
                    return refused(response, 413, "QuotaExceeded")
            raise AssertionError("no quota stopped the session")

        bystander = create(client)
        counted, sized, results = create(client), create(client), create(client)

        error = until_refused(counted, "increment", {"name": "a"})
        assert f"ENVSCALER_MAX_SESSION_CALLS={SESSION_CALLS}" in error["message"], error
        assert redis.llen(calls_key(counted)) == SESSION_CALLS
        # The count is per episode: a reset starts the next one, and the session goes on.
        assert client.post(f"/v1/sessions/{counted}/reset", json={}).status_code == 200
        assert run(counted, "increment", {"name": "a"}).status_code == 200

        error = until_refused(sized, "increment", {"name": "x" * (STRING - 100)})
        assert "ENVSCALER_MAX_TRAJECTORY_BYTES" in error["message"], error
        stored = sum(len(entry) for entry in redis.lrange(calls_key(sized), 0, -1))
        assert stored <= TRAJECTORY_BYTES
        assert int(redis.hget(session_key(sized), "size")) == stored

        error = until_refused(results, "blob", {"size": 20_000})
        assert "ENVSCALER_MAX_SESSION_RESULT_BYTES" in error["message"], error
        result = len(json.dumps({"success": True, "data": "x" * 20_000}, separators=(",", ":")))
        # Refused at the first call whose largest possible result could pass the quota.
        assert redis.llen(calls_key(results)) == (RESULT_BYTES - MAX_RESULT) // result + 1
        assert int(redis.hget(session_key(results), "result_size")) <= RESULT_BYTES

        for session_id in (counted, sized, results):  # refused calls leave them readable
            assert client.get(f"/v1/sessions/{session_id}/trajectory").status_code == 200
            assert client.get(f"/v1/sessions/{session_id}/state").status_code == 200
            assert client.delete(f"/v1/sessions/{session_id}").status_code == 200
        answer = run(bystander, "increment", {"name": "a"})
        assert answer.status_code == 200 and answer.json()["index"] == 0, answer.text


def test_a_session_serves_a_whole_training_run(gateway: GatewayProcess) -> None:
    """Episodes of one session, reset to reset, past every per-session count: each reset trims
    the episodes before the one it ends, so what Redis keeps stays two episodes long."""
    redis = redis_sync.Redis.from_url(gateway.env["ENVSCALER_REDIS_URL"])
    per_episode, episodes = SESSION_CALLS - 5, 6
    with httpx.Client(base_url=gateway.url, timeout=scaled(60), headers=JSON) as client:
        session_id = create(client)
        for _ in range(episodes):
            for _ in range(per_episode):
                answer = client.post(f"/v1/sessions/{session_id}/calls",
                                     json={"name": "increment", "arguments": {"name": "a"}})
                assert answer.status_code == 200, answer.text
            assert client.post(f"/v1/sessions/{session_id}/reset", json={}).status_code == 200
            assert redis.llen(calls_key(session_id)) <= 2 * (per_episode + 1)
        info = client.get(f"/v1/sessions/{session_id}").json()
        assert info["calls"] == episodes * (per_episode + 1) > SESSION_CALLS
        stored = redis.lrange(calls_key(session_id), 0, -1)
        assert int(redis.hget(session_key(session_id), "size")) == sum(map(len, stored))
        entries = client.get(f"/v1/sessions/{session_id}/trajectory").json()["entries"]
        # The episode that ended last, whole, from its reset marker: indices run on.
        assert [e["index"] for e in entries] == list(
            range(info["calls"] - per_episode - 2, info["calls"]))
        assert entries[0]["kind"] == "reset" and entries[-1]["kind"] == "reset"
        assert client.get(f"/v1/sessions/{session_id}/state").json()["state"]["counters"] == {"a": 1}


# ---------------------------------------------------------------- forged agent tokens


def test_a_forged_agent_token_takes_no_lock_and_touches_nothing(
    keyed_gateway: GatewayProcess,
) -> None:
    redis = redis_sync.Redis.from_url(keyed_gateway.env["ENVSCALER_REDIS_URL"])

    async def scenario() -> None:
        admin = httpx.AsyncClient(base_url=keyed_gateway.url, timeout=scaled(60),
                                  headers={"Authorization": f"Bearer {ADMIN}"})
        created = await admin.post("/v1/sessions", json={"env": COUNTER, "scenario": "counter-1"})
        assert created.status_code == 201, created.text
        session_id, token = created.json()["session_id"], created.json()["agent_token"]
        calls = f"/v1/sessions/{session_id}/calls"
        agent = keyed_gateway.client(token)
        forger = keyed_gateway.client(f"{session_id}.{'F' * 32}")
        try:
            idle_since = redis.zscore(live_key(session_id), session_id)
            expires_in = redis.pttl(session_key(session_id))
            await asyncio.sleep(1.1)
            increment = {"name": "increment", "arguments": {"name": "a"}}
            refused(await forger.post(calls, json=increment), 401, "Unauthorized")
            assert redis.zscore(live_key(session_id), session_id) == idle_since  # the idle timer runs on
            assert redis.pttl(session_key(session_id)) <= expires_in - 1000  # not refreshed
            assert not redis.exists(lock_key(session_id))

            # While the session's own agent holds the session, a forger is refused at once: it
            # does not wait in line behind the holder, nor hold up the agent's next call.
            legit = asyncio.create_task(
                agent.post(calls, json={"name": "nap", "arguments": {"seconds": 3}}))
            while not redis.exists(lock_key(session_id)):
                assert not legit.done(), legit.result().text
                await asyncio.sleep(0.01)
            refused(await forger.post(calls, json=increment), 401, "Unauthorized")
            assert not legit.done()
            assert (await legit).status_code == 200
            answer = await agent.post(calls, json=increment)
            assert answer.status_code == 200 and answer.json()["index"] == 1, answer.text
        finally:
            for client in (admin, agent, forger):
                await client.aclose()

    asyncio.run(scenario())


# ---------------------------------------------------------------- hosts, origins, content types


def test_without_api_keys_only_local_hosts_and_json_bodies_are_served(
    gateway: GatewayProcess,
) -> None:
    redis = redis_sync.Redis.from_url(gateway.env["ENVSCALER_REDIS_URL"])
    live = sum(redis.zcard(key) for key in LIVE_KEYS)
    port = gateway.port
    with httpx.Client(base_url=gateway.url, timeout=scaled(60)) as client:
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.nip.io:{port}", ""):
            error = refused(client.get("/healthz", headers={"Host": host}), 421,
                            "MisdirectedRequest")
            assert "ENVSCALER_ALLOWED_HOSTS" in error["message"]
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "LOCALHOST"):
            assert client.get("/healthz", headers={"Host": host}).status_code == 200, host

        body = {"env": COUNTER, "scenario": "counter-1"}
        refused(client.post("/v1/sessions", json=body, headers={"Origin": "http://evil.example"}),
                403, "Forbidden")
        refused(client.post("/v1/sessions", json=body, headers={"Origin": "null"}),
                403, "Forbidden")
        for content_type in ("application/x-www-form-urlencoded", "multipart/form-data",
                             "text/plain", None):
            headers = {"content-type": content_type} if content_type else {}  # None: no type
            error = refused(client.post("/v1/sessions", content=json.dumps(body),
                                        headers=headers), 415, "UnsupportedMediaType")
            assert "application/json" in error["message"]
        refused(client.post("/v1/sessions", data=body), 415, "UnsupportedMediaType")
        assert sum(redis.zcard(key) for key in LIVE_KEYS) == live  # none of them opened a session

        created = client.post("/v1/sessions", json=body,
                              headers={"Origin": f"http://localhost:{port}"})
        assert created.status_code == 201, created.text
        calls = f"/v1/sessions/{created.json()['session_id']}/calls"
        refused(client.post(calls, content=b'{"name": "increment", "arguments": {"name": "a"}}',
                            headers={"content-type": "text/plain"}), 415, "UnsupportedMediaType")
        answer = client.post(calls, json={"name": "increment", "arguments": {"name": "a"}})
        assert answer.status_code == 200 and answer.json()["index"] == 0, answer.text

    # a WebSocket's upgrade too (OpenEnv's door): a page of another origin may open one unasked
    ws_url = f"ws://127.0.0.1:{port}/openenv/{COUNTER}/ws"
    for origin in ("http://evil.example", "null"):
        with pytest.raises(InvalidStatus) as denied:
            ws_connect(ws_url, additional_headers={"Origin": origin}, open_timeout=30)
        assert denied.value.response.status_code == 403
    with ws_connect(ws_url, additional_headers={"Origin": f"http://localhost:{port}"},
                    open_timeout=30) as ws:
        ws.send(json.dumps({"type": "state"}))
        assert json.loads(ws.recv(timeout=scaled(30)))["data"]["episode_id"] is None


# ---------------------------------------------------------------- connections


def partial_head(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=scaled(10))
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: 1\r\n")
    return sock


def closed_by_gateway(sock: socket.socket, trickle: bool, rounds: int = 20) -> bytes | None:
    """What the gateway sent before closing the connection (within ``rounds`` half seconds, the
    client sending a header line each round when ``trickle``), None when it stayed open."""
    sock.settimeout(0.5)
    received = b""
    for _ in range(rounds):
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            if trickle:
                try:
                    sock.sendall(b"X-More: 1\r\n")
                except OSError:
                    return received
            continue
        except OSError:
            return received
        if not chunk:
            return received
        received += chunk
    return None


def get(port: int, path: str = "/healthz") -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=scaled(10)) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                     .encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1])


def test_connections_that_never_finish_their_head_are_closed(gateway: GatewayProcess) -> None:
    slow = [partial_head(gateway.port) for _ in range(CONNECTIONS - 2)]
    try:
        assert get(gateway.port) == 200  # served meanwhile
        answers = [closed_by_gateway(slow[0], trickle=True)]
        answers += [closed_by_gateway(sock, trickle=False) for sock in slow[1:]]
    finally:
        for sock in slow:
            sock.close()
    for answer in answers:
        assert answer is not None, "a connection without a complete head was held open"
        assert answer.startswith(b"HTTP/1.1 408"), answer


def test_a_body_that_trickles_past_its_deadline_is_answered_408_and_closed(
        gateway: GatewayProcess) -> None:
    """A complete head, then a body sent a byte at a time: held for ever before the deadline."""
    sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=scaled(10))
    try:
        sock.sendall(b"POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
        answer = closed_by_gateway(sock, trickle=False)
    finally:
        sock.close()
    assert answer is not None, "a connection whose body never ended was held open"
    assert answer.startswith(b"HTTP/1.1 408") and b"ENVSCALER_BODY_TIMEOUT" in answer, answer
    assert get(gateway.port) == 200


def test_connections_past_the_limit_are_answered_503(gateway: GatewayProcess) -> None:
    slow = [partial_head(gateway.port) for _ in range(CONNECTIONS)]
    try:
        assert get(gateway.port) == 503  # the slow ones hold every place
    finally:
        for sock in slow:
            sock.close()
    assert get(gateway.port) == 200  # their places are free again
