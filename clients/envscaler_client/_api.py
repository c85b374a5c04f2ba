"""The gateway's endpoints as `ApiRequest` builders, and the operations that take several requests
or update a session, as flows (see `envscaler_client._protocol`). No I/O here."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from envscaler_client._protocol import ApiRequest, Flow, exchange
from envscaler_client._session import SessionData
from envscaler_client.errors import EnvScalerError, NotFoundError
from envscaler_client.models import (
    CallResult,
    EnvDetail,
    EnvList,
    EnvSummary,
    ForkResult,
    Health,
    Readiness,
    ResetResult,
    ScenarioList,
    ScenarioSummary,
    SessionClosed,
    SessionCreated,
    SessionInfo,
    SessionState,
    SessionTools,
    SnapshotTaken,
    Trajectory,
    Validation,
)
from envscaler_client.retry import Replay, RetryPolicy

log = logging.getLogger("envscaler.client")

Arguments = Mapping[str, Any] | str | None

# Errors of a model's tool call that the model should read and correct, rather than end the episode.
MODEL_ERRORS = frozenset({"InvalidArguments", "UnknownTool"})


def new_call_id() -> str:
    return uuid.uuid4().hex


def _segment(value: str) -> str:
    return quote(value, safe="")


def _session(session_id: str, suffix: str = "") -> str:
    return f"/v1/sessions/{_segment(session_id)}{suffix}"


def _without_none(**values: Any) -> dict[str, Any]:
    """The values that are set; mappings as dicts, which is what JSON encoding takes."""
    return {key: dict(value) if isinstance(value, Mapping) else value
            for key, value in values.items() if value is not None}


# ---------------------------------------------------------------- endpoints

def health() -> ApiRequest[Health]:
    return ApiRequest("GET", "/healthz", Health.model_validate)


def ready() -> ApiRequest[Readiness]:
    return ApiRequest("GET", "/readyz", Readiness.model_validate, answers=frozenset({503}))


def list_envs() -> ApiRequest[list[EnvSummary]]:
    return ApiRequest("GET", "/v1/envs", lambda body: EnvList.model_validate(body).envs)


def get_env(env: str) -> ApiRequest[EnvDetail]:
    return ApiRequest("GET", f"/v1/envs/{_segment(env)}", EnvDetail.model_validate)


def list_scenarios(env: str, split: str | None = None) -> ApiRequest[list[ScenarioSummary]]:
    return ApiRequest("GET", f"/v1/envs/{_segment(env)}/scenarios",
                      lambda body: ScenarioList.model_validate(body).scenarios,
                      params=_without_none(split=split) or None)


def create_session(env: str, scenario: str | None, init_config: Mapping[str, Any] | None,
                   seed: int) -> ApiRequest[SessionCreated]:
    body = {"env": env, "seed": seed, **_without_none(scenario=scenario, init_config=init_config)}
    return ApiRequest("POST", "/v1/sessions", SessionCreated.model_validate, json=body,
                      replay=Replay.UNSENT)


def open_snapshot(snapshot_id: str) -> ApiRequest[SessionCreated]:
    return ApiRequest("POST", "/v1/sessions", SessionCreated.model_validate,
                      json={"snapshot": snapshot_id}, replay=Replay.UNSENT)


def fork(session_id: str, count: int) -> ApiRequest[ForkResult]:
    """Retried only when unsent, as a create: a fork that reached the gateway opened sessions."""
    return ApiRequest("POST", _session(session_id, "/fork"), ForkResult.model_validate,
                      json={"count": count}, replay=Replay.UNSENT)


def snapshot(session_id: str) -> ApiRequest[SnapshotTaken]:
    return ApiRequest("POST", _session(session_id, "/snapshot"), SnapshotTaken.model_validate)


def session_info(session_id: str) -> ApiRequest[SessionInfo]:
    return ApiRequest("GET", _session(session_id), SessionInfo.model_validate)


def session_tools(session_id: str, token: str | None) -> ApiRequest[SessionTools]:
    return ApiRequest("GET", _session(session_id, "/tools"), SessionTools.model_validate,
                      token=token)


def call(session_id: str, name: str, arguments: Arguments, call_id: str | None,
         token: str | None, seq: int | None = None) -> ApiRequest[CallResult]:
    """A tool call; its ``call_id`` is fixed here, once, so every retry carries the same one
    (and its ``seq``, when it is ordered)."""
    body = {"name": name, "arguments": arguments if isinstance(arguments, str) else
            dict(arguments or {}), "call_id": call_id or new_call_id(),
            **_without_none(seq=seq)}
    return ApiRequest("POST", _session(session_id, "/calls"), CallResult.model_validate, json=body,
                      token=token)


def session_call(data: SessionData, name: str, arguments: Arguments, call_id: str | None,
                 ordered: bool) -> ApiRequest[CallResult]:
    """A call of the session ``data``; ``ordered``: numbered now, in the order of these calls
    (`SessionData.take_seq`), so that the gateway runs it after every ordered call made before
    it through this object, however the requests overtake each other on the way."""
    return call(data.id, name, arguments, call_id, data.agent_token,
                data.take_seq() if ordered else None)


def state(session_id: str) -> ApiRequest[SessionState]:
    return ApiRequest("GET", _session(session_id, "/state"), SessionState.model_validate)


def trajectory(session_id: str) -> ApiRequest[Trajectory]:
    return ApiRequest("GET", _session(session_id, "/trajectory"), Trajectory.model_validate)


def reset(session_id: str, scenario: str | None, seed: int | None,
          init_config: Mapping[str, Any] | None) -> ApiRequest[ResetResult]:
    body = _without_none(scenario=scenario, seed=seed, init_config=init_config)
    return ApiRequest("POST", _session(session_id, "/reset"), ResetResult.model_validate, json=body)


def validate(session_id: str) -> ApiRequest[Validation]:
    return ApiRequest("POST", _session(session_id, "/validate"), Validation.model_validate)


def delete(session_id: str) -> ApiRequest[SessionClosed]:
    return ApiRequest("DELETE", _session(session_id), SessionClosed.model_validate)


# ---------------------------------------------------------------- flows

def attach_flow(session_id: str, agent_token: str | None, policy: RetryPolicy) -> Flow[SessionData]:
    """An existing session. With its agent token, only the tools can be read (the token allows
    nothing else); with the client's API key, also its scenario, seed and task."""
    tools = yield from exchange(session_tools(session_id, agent_token), policy)
    data = SessionData(id=session_id, env=tools.env, tools=tools.tools, agent_token=agent_token,
                       next_seq=tools.next_seq)
    if agent_token is None:
        info = yield from exchange(session_info(session_id), policy)
        data.scenario, data.seed, data.closed = info.scenario, info.seed, info.status == "closed"
        if info.scenario is not None:
            scenarios = yield from exchange(list_scenarios(info.env), policy)
            data.task = next((s.task for s in scenarios if s.id == info.scenario), None)
    return data


def reset_flow(data: SessionData, scenario: str | None, seed: int | None,
               init_config: Mapping[str, Any] | None, policy: RetryPolicy) -> Flow[ResetResult]:
    result = yield from exchange(reset(data.id, scenario, seed, init_config), policy)
    data.scenario, data.seed, data.task = result.scenario, result.seed, result.task
    data.next_seq = 0  # a new episode: its ordered calls are numbered from 0
    return result


def close_flow(data: SessionData, policy: RetryPolicy,
               unwinding: BaseException | None = None) -> Flow[None]:
    """Delete once; a session the gateway no longer knows (its record expired) is closed too.

    ``unwinding``: the exception leaving a ``with`` block; a failure to close is then logged
    instead of raised, so it does not hide the exception that matters.
    """
    if data.closed:
        return
    try:
        yield from exchange(delete(data.id), policy)
    except NotFoundError:
        pass
    except EnvScalerError as exc:
        if unwinding is None:
            raise
        log.warning("could not close session %s while handling %s: %s", data.id,
                    type(unwinding).__name__, exc)
        return
    data.closed = True


def tool_message_flow(data: SessionData, tool_call: Any,
                      policy: RetryPolicy) -> Flow[dict[str, Any]]:
    """Run a model's tool call; the ``tool`` message to append to the conversation.

    Arguments the schema rejects (malformed JSON included) and unknown tools become an error
    message the model can correct. The ``call_id`` is fresh, not the model's tool-call id: some
    servers number tool calls ``call_0``, ``call_1``... in every turn, and a reused id would make
    the gateway answer with an earlier call's result. The call is ordered, numbered here, when
    this function is called (not when the flow first runs): the calls of a turn started in the
    model's order take effect in it, however many run at once.
    """
    tool_call_id, name, arguments = parse_tool_call(tool_call)
    return _tool_message(tool_call_id, session_call(data, name, arguments, None, ordered=True),
                         policy)


def _tool_message(tool_call_id: str, request: ApiRequest[CallResult],
                  policy: RetryPolicy) -> Flow[dict[str, Any]]:
    try:
        result = yield from exchange(request, policy)
    except EnvScalerError as exc:
        if exc.type not in MODEL_ERRORS:
            raise
        error = {"type": exc.type, "message": exc.message, **_without_none(field=exc.field)}
        content = json.dumps({"error": error}, ensure_ascii=False)
    else:
        content = result_content(result)
    return {"role": "tool", "tool_call_id": tool_call_id, "content": content}


def result_content(result: CallResult) -> str:
    """The JSON text a model reads: the tool's result, or ``{"error": {"type", "message"}}``."""
    if result.ok:
        return json.dumps(result.result, ensure_ascii=False)
    error = result.error.model_dump() if result.error is not None else None
    return json.dumps({"error": error}, ensure_ascii=False)


def parse_tool_call(tool_call: Any) -> tuple[str, str, Arguments]:
    """(id, name, arguments) of an OpenAI ``tool_calls`` item: a dict, or an SDK object with
    ``.id`` and ``.function.name`` / ``.function.arguments``. Arguments stay as the model wrote
    them (usually a JSON string): the gateway parses them and reports malformed JSON."""
    if isinstance(tool_call, Mapping):
        function = tool_call.get("function") or {}
        tool_call_id = tool_call.get("id")
        name, arguments = function.get("name"), function.get("arguments")
    else:
        function = getattr(tool_call, "function", None)
        tool_call_id = getattr(tool_call, "id", None)
        name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"not an OpenAI tool call (no function name): {tool_call!r}")
    if not isinstance(tool_call_id, str):
        raise TypeError(f"not an OpenAI tool call (no id): {tool_call!r}")
    return tool_call_id, name, arguments
