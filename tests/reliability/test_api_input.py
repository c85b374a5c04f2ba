"""Hostile API input against a real gateway (uvicorn): oversized bodies, ids with path tricks, and
arbitrary tool arguments. Never a 5xx, never a traceback, always the error shape; and no id ever
reaches a Redis key outside a well-formed session's namespace (watched with MONITOR)."""

from __future__ import annotations

import json
import math
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import redis as redis_sync
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envscaler.server.settings import Settings
from envscaler.server.store import LIVE_KEYS
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import (
    LIBRARY,
    GatewayProcess,
    gateway_process,
    own_redis_db,
)

LIMIT = 64 * 1024
SESSION_KEY = re.compile(
    r"^envscaler:session:\{\d+\}:[A-Za-z0-9_-]{16,64}(:calls|:call-ids|:lock)?$")
OTHER_KEYS = set(LIVE_KEYS)


@pytest.fixture(scope="module")
def gateway(redis_url: str, sandbox_image: str, socket_root: Path, catalogue_root: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    settings = Settings(redis_url=own_redis_db(redis_url, 6), catalogue=catalogue_root,
                        sandbox_backend="docker", sandbox_image=sandbox_image,
                        socket_root=socket_root, pool_size=1, max_sandboxes=16, call_timeout=3.0,
                        max_request_bytes=LIMIT, max_state_bytes=LIMIT, log_level="WARNING",
                        api_keys=[])
    with gateway_process(settings, tmp_path_factory.mktemp("api") / "gw.log") as process:
        yield process


def assert_refused(response: httpx.Response, statuses: set[int]) -> dict[str, Any]:
    assert response.status_code in statuses, (response.status_code, response.text)
    assert "Traceback" not in response.text
    body = response.json()
    assert body["ok"] is False and set(body) == {"ok", "error"}, body
    assert body["error"]["type"] and body["error"]["message"]
    return body["error"]


# ---------------------------------------------------------------- oversized bodies


def test_oversized_bodies_are_refused_with_413(gateway: GatewayProcess) -> None:
    with httpx.Client(base_url=gateway.url, timeout=scaled(30)) as client:
        # A session's start is bounded by the state limit (its body by that and an envelope).
        big = {"env": "counter_lab", "init_config": {"pad": "x" * (LIMIT + 1)}}
        error = assert_refused(client.post("/v1/sessions", json=big), {413})
        assert error["type"] == "StateTooLarge" and f"{LIMIT:,} bytes" in error["message"]
        assert "ENVSCALER_MAX_STATE_BYTES" in error["message"]
        bigger = {"env": "counter_lab", "init_config": {"pad": "x" * (2 * LIMIT)}}
        error = assert_refused(client.post("/v1/sessions", json=bigger), {413})
        assert error["type"] == "StateTooLarge" and "ENVSCALER_MAX_STATE_BYTES" in error["message"]

        session = client.post("/v1/sessions", json={"env": "counter_lab", "scenario": "counter-1"})
        assert session.status_code == 201, session.text
        url = f"/v1/sessions/{session.json()['session_id']}/calls"

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield b'{"name": "increment", "arguments": {"name": "'
            for _ in range(LIMIT // 1024 + 8):
                yield b"a" * 1024
            yield b'"}}'

        error = assert_refused(client.post(url, content=chunks(),
                                           headers={"content-type": "application/json"}), {413})
        assert error["type"] == "RequestTooLarge"

        # Just under the limit is served.
        fits = {"env": "counter_lab", "init_config": {"pad": "x" * (LIMIT - 200)}}
        assert client.post("/v1/sessions", json=fits).status_code == 201
        answer = client.post(url, json={"name": "increment", "arguments": {"name": "a"}})
        assert answer.status_code == 200 and answer.json()["index"] == 0  # nothing else recorded

    # A huge declared length is refused before any of the body is read.
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=scaled(10)) as sock:
        sock.sendall(b"POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                     b"application/json\r\nContent-Length: 68719476736\r\n\r\n{")
        head = sock.recv(65536).decode()
    assert head.startswith("HTTP/1.1 413"), head
    assert httpx.get(gateway.url + "/readyz").status_code == 200


# ---------------------------------------------------------------- ids with path tricks


TRICKS = [
    "..", ".", "../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", "%2e%2e", "%2e%2e%2f%2e%2e",
    "%252e%252e", "..\\..\\windows", "A" * 10_000, "ßéssion-ïd-ääääääääääää",
    "%E2%80%AEdi-noisses-rellam", "%F0%9F%92%A5" * 10, "*", "envscaler:sessions:{0}:live",
    "AAAAAAAAAAAAAAAAAAAAAAAA%00", "AAAAAAAAAAAAAAAAAAAAAAAA%0d%0aSET%20x%201",
    "AAAAAAAAAAAAAAAAAAAAAAAA:calls", "AAAAAAAAAAAAAAAAAAAAAAAA%3Acall-ids", "%20", "~root",
]
ROUTES = [("GET", "/v1/sessions/{}"), ("GET", "/v1/sessions/{}/state"),
          ("GET", "/v1/sessions/{}/trajectory"), ("GET", "/v1/sessions/{}/tools"),
          ("POST", "/v1/sessions/{}/calls"), ("POST", "/v1/sessions/{}/reset"),
          ("POST", "/v1/sessions/{}/validate"), ("DELETE", "/v1/sessions/{}"),
          ("GET", "/v1/envs/{}"), ("GET", "/v1/envs/{}/scenarios")]


def raw_request(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, str]:
    """One HTTP/1.1 request with the path as given: no client-side normalization of ``..`` or
    percent-escapes (only non-ASCII is percent-encoded, as any HTTP client must)."""
    path = quote(path, safe="".join(chr(c) for c in range(33, 127)))
    head = (f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=scaled(10)) as sock:
        sock.sendall(head.encode("utf-8", "surrogateescape") + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.partition(b"\r\n\r\n")[2].decode("utf-8", "replace")


class Monitor(threading.Thread):
    """Every command the Redis server runs, until a marker ECHO."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.marker = "end-of-monitor"
        self.commands: list[dict[str, Any]] = []
        self.ready = threading.Event()

    def run(self) -> None:
        client = redis_sync.Redis.from_url(self.url)
        with client.monitor() as monitor:
            self.ready.set()
            for command in monitor.listen():
                if self.marker in command["command"]:
                    return
                self.commands.append(command)

    def stop(self) -> list[dict[str, Any]]:
        redis_sync.Redis.from_url(self.url).echo(self.marker)
        self.join(10)
        return self.commands


def test_ids_with_path_tricks_are_refused_and_touch_no_other_keys(
    gateway: GatewayProcess,
) -> None:
    url = gateway.env["ENVSCALER_REDIS_URL"]
    monitor = Monitor(url)
    monitor.start()
    assert monitor.ready.wait(scaled(10))
    for trick in TRICKS:
        for method, route in ROUTES:
            body = b'{"name": "increment", "arguments": {}}' if route.endswith("calls") else b""
            status, text = raw_request(gateway.port, method, route.format(trick), body)
            assert status in {400, 404, 405, 422}, (method, route, trick, status, text)
            assert "Traceback" not in text
            if text:
                error = json.loads(text)["error"]
                assert error["type"] in {"UnknownSession", "UnknownEnv", "NotFound",
                                         "InvalidRequest", "MethodNotAllowed"}, error
    with httpx.Client(base_url=gateway.url, timeout=scaled(30)) as client:
        for body in [{"env": "../counter_lab"}, {"env": "counter_lab/../library_loans"},
                     {"env": "counter_lab", "scenario": "../../etc/passwd"},
                     {"env": "counter_lab", "scenario": "counter-1/../counter-2"},
                     {"env": "%2e%2e"}, {"env": "*"}]:
            assert_refused(client.post("/v1/sessions", json=body), {404, 422})
    commands = monitor.stop()
    for command in commands:
        text = command["command"]
        for key in re.findall(r"envscaler:\S+", text):
            assert key in OTHER_KEYS or SESSION_KEY.match(key), (key, text)
        for trick in TRICKS:
            if len(trick) > 2:
                assert trick not in text and trick.lower() not in text.lower(), (trick, text)
    # Requests with malformed ids never get past the id check: no session key was read at all.
    assert not [c for c in commands if "envscaler:session:" in c["command"]], commands


# ---------------------------------------------------------------- tool arguments

JSON_SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(-(2**70), 2**70)
                | st.floats(allow_nan=True, allow_infinity=True)
                | st.text(st.characters(codec=None), max_size=20))
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def targets(gateway: GatewayProcess) -> dict[str, tuple[str, list[str], dict[str, list[str]]]]:
    """env -> (a live session, its tool names, each tool's parameter names)."""
    found = {}
    for env, scenario in [(LIBRARY, "library_loans-001"), ("counter_lab", "counter-1")]:
        created = httpx.post(gateway.url + "/v1/sessions", json={"env": env, "scenario": scenario},
                             timeout=scaled(30))
        assert created.status_code == 201, created.text
        tools = created.json()["tools"]
        params = {t["function"]["name"]: t["function"]["parameters"].get("properties", {})
                  for t in tools}
        usable = [name for name in params if name not in {"nap", "spin", "crash", "blob"}]
        found[env] = (created.json()["session_id"], usable, params)
    return found


# Values that pass a JSON schema's type but are hard to store, send or print.
NASTY = st.sampled_from(["\ud800", "a\udfffb", "\x00", "\u202e", "\U0001f4a5", "", "x" * 5000,
                         math.nan, math.inf, -math.inf, 2**64, -(2**63) - 1, 1e308, -0.0])
TEXT = st.text(st.characters(codec=None), max_size=20)
TYPED = {"string": TEXT, "integer": st.integers(), "number": st.floats() | st.integers(),
         "boolean": st.booleans(), "array": st.lists(JSON_SCALARS, max_size=3),
         "object": st.dictionaries(TEXT, JSON_SCALARS, max_size=3)}


def typed(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    kinds = spec.get("type")
    kinds = [k for k in kinds if k != "null"] if isinstance(kinds, list) else [kinds]
    if spec.get("enum"):
        return st.sampled_from(spec["enum"])
    return TYPED.get(kinds[0] if kinds else None, JSON_VALUES)


@st.composite
def tool_calls(draw, targets):  # type: ignore[no-untyped-def]
    env = draw(st.sampled_from(sorted(targets)))
    session_id, tools, params = targets[env]
    name = draw(st.sampled_from(tools))
    schema = params.get(name) or {}
    form = draw(st.sampled_from(["shaped"] * 3 + ["json-string", "object", "text", "value"]))
    if form in ("shaped", "json-string"):  # every parameter, of its type or nasty: reaches tools
        arguments: Any = {key: draw(NASTY if draw(st.integers(0, 2)) == 0 else typed(spec))
                          for key, spec in schema.items()}
        if form == "json-string":
            arguments = json.dumps(arguments, allow_nan=True)
    elif form == "object":
        keys = st.sampled_from(list(schema) or ["x"]) | st.text(max_size=8)
        arguments = draw(st.dictionaries(keys, JSON_VALUES | NASTY, max_size=4))
    elif form == "text":
        arguments = draw(TEXT)
    else:
        arguments = draw(JSON_VALUES)
    body: dict[str, Any] = {"name": draw(st.just(name) | st.text(max_size=12)),
                            "arguments": arguments}
    if draw(st.booleans()):
        body["call_id"] = draw(TEXT.filter(bool))
    # allow_nan: NaN and Infinity as Python's json writes them; a strict client never would
    return session_id, json.dumps(body, allow_nan=True).encode()


def test_arbitrary_tool_arguments_never_cause_a_server_error(gateway, targets) -> None:  # type: ignore[no-untyped-def]
    client = httpx.Client(base_url=gateway.url, timeout=scaled(30),
                          headers={"content-type": "application/json"})
    seen: dict[int, int] = {}

    @given(case=tool_calls(targets))
    @settings(max_examples=300, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def fuzz(case: tuple[str, bytes]) -> None:
        session_id, body = case
        response = client.post(f"/v1/sessions/{session_id}/calls", content=body)
        seen[response.status_code] = seen.get(response.status_code, 0) + 1
        assert response.status_code < 500, (body, response.text)
        assert "Traceback" not in response.text
        answer = response.json()
        if response.status_code != 200:
            assert answer["ok"] is False and answer["error"]["type"], answer

    try:
        fuzz()
    finally:
        client.close()
    assert seen.get(200, 0) > 10 and seen.get(422, 0) > 10, seen
    for session_id, _, _ in targets.values():
        trajectory = httpx.get(f"{gateway.url}/v1/sessions/{session_id}/trajectory",
                               timeout=scaled(30))
        assert trajectory.status_code == 200, trajectory.text
        entries = trajectory.json()["entries"]
        assert [e["index"] for e in entries] == list(range(len(entries)))
        assert httpx.get(f"{gateway.url}/v1/sessions/{session_id}/state",
                         timeout=scaled(30)).status_code == 200


def test_init_configs_that_are_not_strict_json_are_refused(gateway: GatewayProcess) -> None:
    """NaN, Infinity and lone surrogates parse in Python but can be neither stored nor sent."""
    with httpx.Client(base_url=gateway.url, timeout=scaled(30),
                      headers={"content-type": "application/json"}) as client:
        session = client.post("/v1/sessions", json={"env": "counter_lab", "scenario": "counter-1"})
        reset_url = f"/v1/sessions/{session.json()['session_id']}/reset"
        for config in ['{"counters": {"a": NaN}}', '{"x": [1, Infinity]}', '{"k": "\\ud800"}',
                       '{"\\udfff": 1}']:
            for url, body in [("/v1/sessions", '{"env": "counter_lab", "init_config": %s}'),
                              (reset_url, '{"init_config": %s}')]:
                response = client.post(url, content=(body % config).encode())
                error = assert_refused(response, {422})
                assert error["type"] == "InvalidRequest" and error["field"] == "body.init_config"
        assert client.post(reset_url, json={"init_config": {"counters": {"a": 5}}}).status_code == 200
