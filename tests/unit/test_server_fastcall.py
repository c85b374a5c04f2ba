"""What the tool call's fast path takes (`envscaler.server.fastcall`); the rest goes to the documented route,
which tests/integration/test_gateway_fastcall.py shows answers the same. Its request is
`envscaler.server.calls.call_request`'s, the doors' too."""

from __future__ import annotations

import json

import pytest

from envscaler.server.calls import call_request
from envscaler.server.errors import ApiError
from envscaler.server.fastcall import _call, _session_id
from envscaler.server.jsonlimits import JsonLimits
from envscaler.server.requestguard import is_json as _json

SESSION = "A" * 24


def scope(path: str = f"/v1/sessions/{SESSION}/calls", **overrides: object) -> dict:
    return {"type": "http", "method": "POST", "path": path, "root_path": "", **overrides}


def test_tool_call_paths() -> None:
    assert _session_id(scope()) == SESSION
    assert _session_id(scope(f"/v1/sessions/{'x' * 100}/calls")) == "x" * 100
    for refused in (
        scope(method="GET"),
        scope(type="websocket"),
        scope(root_path="/gateway"),
        scope("/v1/sessions//calls"),
        scope(f"/v1/sessions/{'x' * 101}/calls"),  # the route's max_length answers 422
        scope(f"/v1/sessions/{SESSION}/calls/"),
        scope(f"/v1/sessions/a/{SESSION}/calls"),
        scope(f"/v1/sessions/{SESSION}/tools"),
        scope("/v1/sessions/calls"),
        scope(**{"fastapi.telemetry": object()}),  # FastAPI's OpenTelemetry spans: the route
    ):
        assert _session_id(refused) is None, refused
    assert _session_id(scope(**{"fastapi.telemetry": None})) == SESSION  # excluded from it

LIMITS = JsonLimits(depth=32, items=10_000, keys=1_000, string=262_144)


def test_json_content_types() -> None:
    for media in (b"application/json", b"Application/JSON", b"application/json; charset=utf-8"):
        assert _json(media)
    for media in (b"application/merge-patch+json", b"text/plain", b"application/jsonx", b""):
        assert not _json(media)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"name": "t"}, ("t", {}, None, None)),
        ({"name": "t", "arguments": {"a": [1, 2.5, None]}, "call_id": "c"},
         ("t", {"a": [1, 2.5, None]}, "c", None)),
        ({"name": "t", "arguments": '{"a": 1}', "call_id": None}, ("t", '{"a": 1}', None, None)),
        ({"name": "n" * 200, "call_id": "c" * 200}, ("n" * 200, {}, "c" * 200, None)),
        ({"name": "é" * 200}, ("é" * 200, {}, None, None)),
        ({"name": "t", "arguments": {"n": 999_999_999_999_999_999}},
         ("t", {"n": 999_999_999_999_999_999}, None, None)),
        ({"name": "t", "seq": 0}, ("t", {}, None, 0)),
        ({"name": "t", "seq": 2**31 - 1}, ("t", {}, None, 2**31 - 1)),
    ],
)
def test_plain_call_requests_are_taken(body: dict, expected: tuple) -> None:
    call = _call(json.dumps(body).encode(), LIMITS)
    assert call is not None
    assert (call.name, call.arguments, call.call_id, call.seq) == expected


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{",
        b"[]",
        b'"t"',
        b"{}",
        b'{"name": ""}',
        b'{"name": 1}',
        b'{"name": null}',
        b'{"name": "' + b"n" * 201 + b'"}',
        b'{"name": "t", "extra": 1}',
        b'{"name": "t", "arguments": null}',
        b'{"name": "t", "arguments": 1}',
        b'{"name": "t", "arguments": []}',
        b'{"name": "t", "call_id": ""}',
        b'{"name": "t", "call_id": 1}',
        b'{"name": "t", "call_id": "' + b"c" * 201 + b'"}',
        b'{"name": "t", "seq": -1}',
        b'{"name": "t", "seq": "1"}',
        b'{"name": "t", "seq": true}',
        b'{"name": "t", "seq": 1.0}',
        b'{"name": "t", "seq": 2147483648}',
        b'{"name": "t", "arguments": {"a": NaN}}',
        b'{"name": "t", "arguments": {"a": Infinity}}',
        b'{"name": "t", "arguments": {"a": 1e400}}',
        b'{"name": "t", "arguments": {"a": "\\ud800"}}',
        # beyond 64 bits orjson gives a float where the standard library gives an int
        b'{"name": "t", "arguments": {"a": 18446744073709551616}}',
        b'{"name": "t", "arguments": {"a": -9223372036854775809}}',
        b'{"name": "t", "arguments": {"a": 1234567890123456789}}',
        b"\xef\xbb\xbf" + b'{"name": "t"}',  # a BOM: the standard library's bytes decoding
        '{"name": "t"}'.encode("utf-16"),
    ],
)
def test_anything_else_goes_to_the_route(body: bytes) -> None:
    assert _call(body, LIMITS) is None


def test_a_body_past_the_json_limits_is_answered_here() -> None:
    with pytest.raises(ApiError) as refused:
        _call(b'{"name": "t", "arguments": {"a": [[[1]]]}}', JsonLimits(2, 10, 10, 10))
    assert (refused.value.status, refused.value.type) == (422, "JsonTooComplex")


def test_a_refused_call_names_its_field() -> None:
    with pytest.raises(ApiError) as refused:
        call_request({"name": "t", "seq": -1})
    assert (refused.value.status, refused.value.type, refused.value.field) == (
        422, "InvalidRequest", "seq")
