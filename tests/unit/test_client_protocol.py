"""The client's sans-I/O core: retry decisions, the request flow, error mapping, tool-call parsing.

Flows are driven by hand here: the test plays the network, sending each yielded request an outcome.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from envscaler_client import (
    AuthError,
    CallTimeoutError,
    CapacityError,
    CheckExhaustedError,
    EnvScalerError,
    InvalidArgumentsError,
    NotFoundError,
    RetryPolicy,
    SessionClosedError,
    TransportError,
    _api,
)
from envscaler_client._protocol import ApiRequest, exchange
from envscaler_client._session import SessionData
from envscaler_client.errors import error_from_response
from envscaler_client.models import CallResult, Trajectory
from envscaler_client.retry import Replay, retry_after

REQUEST = httpx.Request("POST", "http://gateway/v1/sessions/x/calls")
POLICY = RetryPolicy(attempts=4, backoff=0.5, max_backoff=4.0, jitter=0.5, max_retry_after=10.0)


def response(status: int, body: Any = None,
             headers: dict[str, str] | None = None) -> httpx.Response:
    content = json.dumps(body).encode() if body is not None else b""
    return httpx.Response(status, content=content, headers=headers, request=REQUEST)


def error_body(error_type: str, message: str = "m", field: str | None = None) -> dict[str, Any]:
    error = {"type": error_type, "message": message, **({"field": field} if field else {})}
    return {"ok": False, "error": error}


# ---------------------------------------------------------------- retry decisions

@pytest.mark.parametrize("error", [httpx.ConnectError("refused"), httpx.ConnectTimeout("slow"),
                                   httpx.PoolTimeout("pool"), httpx.ReadTimeout("read"),
                                   httpx.RemoteProtocolError("dropped"), httpx.ReadError("reset")])
def test_safe_requests_are_retried_after_any_network_failure(error: httpx.TransportError) -> None:
    delay = POLICY.delay(Replay.SAFE, 1, error)
    assert delay is not None and 0.5 <= delay <= 0.75


@pytest.mark.parametrize("error, retried", [(httpx.ConnectError("refused"), True),
                                            (httpx.ConnectTimeout("slow"), True),
                                            (httpx.PoolTimeout("pool"), True),
                                            (httpx.ReadTimeout("read"), False),
                                            (httpx.RemoteProtocolError("dropped"), False),
                                            (httpx.ReadError("reset"), False),
                                            (httpx.WriteError("broken pipe"), False)])
def test_unsent_requests_are_retried_only_when_nothing_reached_the_server(
        error: httpx.TransportError, retried: bool) -> None:
    assert (POLICY.delay(Replay.UNSENT, 1, error) is not None) is retried


def test_errors_that_no_retry_can_fix_are_not_retried() -> None:
    assert POLICY.delay(Replay.SAFE, 1, httpx.UnsupportedProtocol("ftp://")) is None
    for status in (400, 401, 404, 409, 422, 500, 504):
        assert POLICY.delay(Replay.SAFE, 1, response(status, error_body("X"))) is None


@pytest.mark.parametrize("status", [429, 502, 503])
def test_overload_answers_are_retried_for_safe_requests_only(status: int) -> None:
    assert POLICY.delay(Replay.SAFE, 1, response(status)) is not None
    assert POLICY.delay(Replay.UNSENT, 1, response(status, headers={"Retry-After": "1"})) is None


def test_retry_after_is_a_floor_and_too_long_a_wait_is_left_to_the_caller() -> None:
    for _ in range(50):
        delay = POLICY.delay(Replay.SAFE, 1, response(503, headers={"Retry-After": "3"}))
        assert delay is not None and 3.0 <= delay <= 4.5
    assert POLICY.delay(Replay.SAFE, 1, response(429, headers={"Retry-After": "11"})) is None


def test_back_off_doubles_up_to_its_cap_and_attempts_are_bounded() -> None:
    policy = RetryPolicy(attempts=10, backoff=0.5, max_backoff=4.0, jitter=0.0)
    error = httpx.ConnectError("refused")
    assert [policy.delay(Replay.SAFE, attempt, error) for attempt in range(1, 10)] == \
        [0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0]
    assert policy.delay(Replay.SAFE, 10, error) is None
    assert RetryPolicy(attempts=1).delay(Replay.SAFE, 1, error) is None
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)


def test_retry_after_header_forms() -> None:
    assert retry_after(httpx.Headers({"Retry-After": "7"})) == 7.0
    assert retry_after(httpx.Headers({"Retry-After": "-3"})) == 0.0
    assert retry_after(httpx.Headers({})) is None
    assert retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    assert 100 < (retry_after(httpx.Headers({"Retry-After": later})) or 0) <= 120
    earlier = format_datetime(datetime.now(UTC) - timedelta(seconds=120), usegmt=True)
    assert retry_after(httpx.Headers({"Retry-After": earlier})) == 0.0


# ---------------------------------------------------------------- the flow

def play(request: ApiRequest[Any], outcomes: list[httpx.Response | httpx.TransportError],
         policy: RetryPolicy = POLICY) -> tuple[Any, list[ApiRequest[Any]], list[float]]:
    """Drive ``exchange`` with ``outcomes`` in order: (result, requests sent, sleeps)."""
    flow = exchange(request, policy)
    sent: list[ApiRequest[Any]] = []
    sleeps: list[float] = []
    step = next(flow)
    try:
        while True:
            if isinstance(step, ApiRequest):
                sent.append(step)
                step = flow.send(outcomes[len(sent) - 1])
            else:
                sleeps.append(step)
                step = flow.send(None)
    except StopIteration as done:
        return done.value, sent, sleeps


CALL_ANSWER = {
    "ok": True, "result": {"success": True}, "index": 0, "call_id": "c", "duplicate": True,
    "duration_ms": 1.0
}


def test_a_call_is_retried_with_the_same_call_id_until_it_is_answered() -> None:
    request = _api.call("S" * 24, "increment", {"name": "a"}, None, None)
    result, sent, sleeps = play(request, [
        httpx.RemoteProtocolError("dropped"),
        response(503, error_body("SessionBusy"), {"Retry-After": "1"}),
        response(200, CALL_ANSWER)
    ])
    assert isinstance(result, CallResult) and result.ok and result.duplicate
    assert len(sent) == 3 and len({item.json["call_id"] for item in sent}) == 1
    assert len(sent[0].json["call_id"]) == 32
    assert len(sleeps) == 2 and sleeps[1] >= 1.0


def test_session_creation_is_not_retried_once_it_may_have_reached_the_server() -> None:
    request = _api.create_session("counter_lab", "counter-1", None, 0)
    with pytest.raises(TransportError) as caught:
        play(request, [httpx.ReadTimeout("read", request=REQUEST)])
    assert caught.value.type == "ReadTimeout" and caught.value.status is None
    assert not caught.value.unreachable
    assert "POST http://gateway/v1/sessions/x/calls" in caught.value.message
    with pytest.raises(CapacityError) as capacity:
        play(request, [response(429, error_body("CapacityExhausted"), {"Retry-After": "2"})])
    assert capacity.value.retry_after == 2.0
    created = {"session_id": "S" * 24, "env": "counter_lab", "tools": [], "agent_token": "t"}
    result, sent, _ = play(request, [httpx.ConnectError("refused"), response(201, created)])
    assert result.session_id == "S" * 24 and len(sent) == 2


def test_when_retries_run_out_the_last_failure_is_raised() -> None:
    busy = response(503, error_body("SessionBusy", "busy"), {"Retry-After": "1"})
    with pytest.raises(CapacityError) as caught:
        play(_api.state("S" * 24), [busy] * 4)
    assert (caught.value.type, caught.value.status, caught.value.retry_after) == ("SessionBusy",
                                                                                  503, 1.0)
    with pytest.raises(TransportError) as refused:
        play(_api.health(), [httpx.ConnectError("refused")] * 4)
    assert refused.value.unreachable


def test_readiness_answers_503_with_a_body_not_an_error() -> None:
    body = {"ready": False, "instance": "i", "isolation": "container",
            "components": {"redis": {"ok": False, "error": "down"}}}
    result, sent, _ = play(_api.ready(), [response(503, body)])
    assert result.ready is False and result.components["redis"].error == "down" and len(sent) == 1


def test_an_answer_that_is_not_the_gateways_is_an_error_not_a_crash() -> None:
    html = httpx.Response(200, content=b"<html>hello</html>", request=REQUEST)
    with pytest.raises(EnvScalerError) as caught:
        play(_api.health(), [html])
    assert caught.value.type == "InvalidResponse"


def test_paths_escape_ids() -> None:
    assert _api.state("a/b?c").path == "/v1/sessions/a%2Fb%3Fc/state"
    assert _api.list_scenarios("e v", "rl").params == {"split": "rl"}
    assert _api.reset("S", None, 3, None).json == {"seed": 3}
    assert _api.call("S", "t", None, "id",
                     "token").send_kwargs()["headers"] == {"Authorization": "Bearer token"}


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("status, error_type, cls",
                         [(404, "UnknownEnv", NotFoundError), (404, "UnknownTool", NotFoundError),
                          (404, "NotFound", NotFoundError),
                          (422, "InvalidArguments", InvalidArgumentsError),
                          (422, "InvalidRequest", InvalidArgumentsError),
                          (401, "Unauthorized", AuthError), (403, "Forbidden", AuthError),
                          (409, "SessionClosed", SessionClosedError),
                          (410, "SessionExpired", SessionClosedError),
                          (409, "NoChecklist", EnvScalerError),
                          (429, "CapacityExhausted", CapacityError),
                          (503, "BackendUnavailable", CapacityError),
                          (503, "SessionBusy", CapacityError), (504, "Timeout", CallTimeoutError),
                          (500, "CheckExhausted", CheckExhaustedError),
                          (500, "InternalError", EnvScalerError)])
def test_errors_map_to_classes_and_keep_the_servers_type(status: int, error_type: str,
                                                          cls: type[EnvScalerError]) -> None:
    error = error_from_response(
        response(status, error_body(error_type, "what happened", "member_id"),
                 {"Retry-After": "4"}))
    assert type(error) is cls
    assert (error.type, error.message, error.field, error.status, error.retry_after) == \
        (error_type, "what happened", "member_id", status, 4.0)
    assert str(error) == f"{error_type}: what happened (HTTP {status})"


def test_an_error_page_from_a_proxy_still_maps_by_status() -> None:
    error = error_from_response(
        httpx.Response(502, content=b"<html>Bad Gateway</html>", request=REQUEST))
    assert type(
        error) is EnvScalerError and error.type == "HTTP502" and "Bad Gateway" in error.message
    error = error_from_response(httpx.Response(503, content=b"", request=REQUEST))
    assert type(error) is CapacityError and error.type == "HTTP503"


# ---------------------------------------------------------------- models and tool calls

def test_models_keep_fields_they_do_not_know() -> None:
    result = CallResult.model_validate({**CALL_ANSWER, "cost": 3})
    assert result.model_extra == {"cost": 3}
    trajectory = Trajectory.model_validate({
        "session_id": "s", "env": "e", "epoch": 1, "entries": [{
            "index": 0, "epoch": 0, "name": "t", "arguments": {}, "ok": True, "result": 1,
            "time": 1.0
        }, {
            "index": 1, "epoch": 1, "kind": "reset", "scenario": "x", "seed": 0, "time": 2.0,
            "init_config": {"a": 1}
        }]
    })
    assert [entry.index for entry in trajectory.calls] == [0]
    assert trajectory.entries[1].model_extra == {"init_config": {"a": 1}}


def test_tool_calls_as_dicts_and_sdk_objects() -> None:
    as_dict = {
        "id": "call_1", "type": "function", "function": {"name": "get", "arguments": '{"a": 1}'}
    }
    assert _api.parse_tool_call(as_dict) == ("call_1", "get", '{"a": 1}')
    as_object = SimpleNamespace(id="call_2", function=SimpleNamespace(name="get",
                                                                      arguments="{oops"))
    assert _api.parse_tool_call(as_object) == ("call_2", "get", "{oops")
    for broken in ({"id": "x",
                    "function": {}}, {"function": {"name": "get"}}, SimpleNamespace(id="x")):
        with pytest.raises(TypeError):
            _api.parse_tool_call(broken)


def test_tool_message_content_is_json_text_for_the_model() -> None:
    ok = CallResult.model_validate({**CALL_ANSWER, "result": {"success": True, "data": "é"}})
    assert json.loads(_api.result_content(ok)) == {"success": True, "data": "é"}
    failed = CallResult.model_validate({**CALL_ANSWER, "ok": False, "result": None,
                                        "error": {"type": "ToolException", "message": "boom"}})
    assert json.loads(
        _api.result_content(failed)) == {"error": {"type": "ToolException", "message": "boom"}}


def test_ordered_calls_are_numbered_when_made_and_keep_their_seq_through_retries() -> None:
    data = SessionData(id="S" * 24, env="e", tools=[])
    flows = [_api.tool_message_flow(data, {"id": f"t{n}", "function": {"name": "f"}}, POLICY)
             for n in range(3)]
    # numbered as they were made, whichever runs first
    assert [next(flow).json["seq"] for flow in reversed(flows)] == [2, 1, 0]
    assert "seq" not in _api.session_call(data, "f", {}, None, ordered=False).json
    result, sent, _ = play(_api.session_call(data, "f", {}, None, ordered=True), [
        httpx.RemoteProtocolError("dropped"), response(200, CALL_ANSWER)])
    assert result.ok and [item.json["seq"] for item in sent] == [3, 3]
    reset = _api.reset_flow(data, None, None, None, POLICY)
    next(reset)
    with pytest.raises(StopIteration):
        reset.send(response(200, {"session_id": data.id, "env": "e", "scenario": None, "seed": 0,
                                  "epoch": 1, "task": None}))
    assert _api.session_call(data, "f", {}, None, ordered=True).json["seq"] == 0
