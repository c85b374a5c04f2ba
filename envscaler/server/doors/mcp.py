"""MCP, per session: a streamable-HTTP MCP endpoint at ``/v1/sessions/{id}/mcp``.

An agent harness that speaks MCP points at one session's URL with that session's agent token
(``Authorization: Bearer <agent token>``, or an API key) and sees exactly the session's tools:

- ``tools/list`` answers the environment's tool schemas (``inputSchema`` is the same JSON schema
  as the REST tools' ``parameters``); ``reset``, ``validate``, the state and the checks are never
  tools here: they stay on the REST API, for API keys only.
- ``tools/call`` is `envscaler.server.sessions.toolcall.ToolCalls.call`, the same operation as
  ``POST /v1/sessions/{id}/calls``: the same request model and its limits, schema validation,
  the session lock, idempotency (``_meta.call_id`` plays ``call_id``, ``_meta.seq`` ``seq``),
  the trajectory and the deadline. A tool's failure, and a call the gateway refuses (unknown
  tool, arguments that do not match the schema, a deadline), are ``isError`` results whose text
  is the REST error object (``{"type", "message", "field"?}``), so the agent reads why and can
  try again.

Before the MCP layer sees a request, the caller is authenticated (always: the session's agent
token or an API key, even on a gateway without API keys, where REST admits the loopback operator
anonymously) and the session must exist and be active, or the request is refused with the
gateway's status and error shape (401, 403, 404, 409, 410): a harness learns at ``initialize``
that its token or its session is wrong, not at its first tool call. `McpErrors` frames every such
refusal on an MCP path, this door's and those of the layers before it (the host guard, the body
and JSON limits), as a JSON-RPC error too, so that the MCP client raises the gateway's message
rather than a generic one; a 401's ``WWW-Authenticate`` says why too
(`envscaler.server.errors.bearer_challenge`).

The SDK's session manager (one per gateway, run by the door's lifespan) runs stateless (a
transport per HTTP request, no MCP session id) and answers JSON, not SSE: everything a request
needs is in Redis, so any worker of any gateway serves any request of any MCP client, without
sticky routing. A stateless server has nothing to say unprompted and no MCP session to end, so
only ``POST`` is served: ``GET`` (the SDK would open a server-to-client SSE stream that never
ends, held outside the request timeouts) and ``DELETE`` answer 405 with ``Allow: POST``, as the
streamable HTTP transport provides for.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from fastapi import APIRouter, FastAPI
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.jsonrpc import INVALID_REQUEST
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from envscaler.common import jsoncodec
from envscaler.server import paths
from envscaler.server.auth import Principal
from envscaler.server.catalogue import ServedEnv, tool_name, tool_parameters
from envscaler.server.doors import Door
from envscaler.server.doors.episodes import tool_call
from envscaler.server.errors import ApiError, backend_unavailable, method_not_allowed
from envscaler.server.sessions import SessionService

MCP_PATH = paths.session_path(paths.MCP)
STATE_KEY = "mcp"  # app.state's: the running SDK session manager
SCOPE_KEY = "envscaler.mcp"  # the request's `McpCaller`, for the MCP handlers
CALL_ID_META = "call_id"  # tools/call ``_meta`` key of the REST ``call_id``
SEQ_META = "seq"  # and of its ``seq``


@dataclass(frozen=True)
class McpCaller:
    """Who calls which session, as the gateway checked before the MCP layer ran."""

    service: SessionService
    principal: Principal
    session_id: str
    env: ServedEnv


def mcp_tools(env: ServedEnv) -> list[types.Tool]:
    """The environment's tools as MCP tools (OpenAI function schemas -> name, description,
    inputSchema)."""
    return [types.Tool(name=tool_name(schema),
                       description=schema.get("function", schema).get("description"),
                       input_schema=tool_parameters(schema))
            for schema in env.tools]


def _caller(ctx: ServerRequestContext[Any, Any]) -> McpCaller:
    request = ctx.request
    caller = request.scope.get(SCOPE_KEY) if isinstance(request, Request) else None
    if not isinstance(caller, McpCaller):
        raise RuntimeError("an MCP request reached its handler without the gateway's checks")
    return caller


def _text(value: Any) -> str:
    return jsoncodec.dumps(value)


def _error_result(error: dict[str, Any],
                  meta: dict[str, Any] | None = None) -> types.CallToolResult:
    """A refused or failed call as the agent reads it: the REST error object, as text."""
    return types.CallToolResult(
        content=[types.TextContent(text=_text(error))], is_error=True, meta=meta
    )


async def _list_tools(
    ctx: ServerRequestContext[Any, Any], _params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=mcp_tools(_caller(ctx).env))


async def _call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    caller = _caller(ctx)
    try:
        meta = params.meta or {}
        call = tool_call(params.name, params.arguments, meta.get(CALL_ID_META),
                         meta.get(SEQ_META))
        outcome = await caller.service.call(
            caller.principal, caller.session_id, call.name, call.arguments, call.call_id,
            call.seq)
    except ApiError as exc:
        return _error_result(exc.body()["error"])
    body = outcome.body()
    meta = {key: body[key] for key in ("index", "call_id", "duplicate", "duration_ms")}
    if not body["ok"]:
        return _error_result(body["error"], meta)
    result = body["result"]
    return types.CallToolResult(
        content=[types.TextContent(text=_text(result))],
        structured_content=result if isinstance(result, dict) else None,
        is_error=False,
        meta=meta,
    )


def _server() -> Server[Any]:
    return Server(
        "envscaler-session",
        version="1",
        instructions="The tools of one EnvScaler session: call them to complete its task.",
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
    )


@asynccontextmanager
async def serve(app: FastAPI) -> AsyncIterator[None]:
    """The door's lifespan: the SDK's session manager for the gateway's lifetime (a manager runs
    once, so one per run)."""
    manager = StreamableHTTPSessionManager(
        _server(), json_response=True, stateless=True,
        max_request_body_size=app.state.settings.max_request_bytes,
    )
    async with manager.run():
        setattr(app.state, STATE_KEY, manager)
        try:
            yield
        finally:
            setattr(app.state, STATE_KEY, None)


class McpDoor:
    """The ASGI endpoint of ``MCP_PATH``: the gateway's checks, then the SDK's transport."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = scope["app"]
        manager: StreamableHTTPSessionManager | None = getattr(app.state, STATE_KEY, None)
        try:
            if scope["method"] != "POST":
                raise method_not_allowed(
                    f"{scope['method']} is not served: this MCP endpoint is stateless (no "
                    "server-to-client stream, no MCP session to end); send JSON-RPC with POST",
                    allow="POST")
            if manager is None:
                raise backend_unavailable("the gateway is starting or stopping")
            principal = app.state.auth.authenticate(Request(scope).headers.get("authorization"),
                                                    anonymous=False)
            service: SessionService = app.state.service
            session_id = scope["path_params"]["session_id"]
            _record, env = await service.tools(principal, session_id, active=True)
        except ApiError as exc:
            await exc.response()(scope, receive, send)
            return
        scope[SCOPE_KEY] = McpCaller(service, principal, session_id, env)
        await manager.handle_request(scope, receive, send)


class McpErrors:
    """Outermost ASGI layer: on MCP paths, the gateway's error answers (``{"ok": false, "error":
    {...}}``, from any layer) get ``jsonrpc``, ``id`` and ``error.code`` added, so each is also a
    JSON-RPC error, which an MCP client reads and raises with the gateway's message (the SDK's
    own answers, JSON-RPC already, pass unchanged)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or paths.session_of(scope["path"], paths.MCP) is None:
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _framing(send))


def _framing(send: Send) -> Callable[[Message], Awaitable[None]]:
    """``send`` that holds back an error answer's start and body, and frames the body."""
    start: Message | None = None
    chunks: list[bytes] = []

    async def framed(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start" and message["status"] >= 400:
            start = message
            return
        if start is None or message["type"] != "http.response.body":
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        body = _as_json_rpc(b"".join(chunks))
        headers = MutableHeaders(raw=list(start["headers"]))
        headers["content-length"] = str(len(body))
        await send({**start, "headers": headers.raw})
        await send({"type": "http.response.body", "body": body})

    return framed


def _as_json_rpc(body: bytes) -> bytes:
    """The gateway's error body as a JSON-RPC error too; any other body as it is."""
    try:
        value = jsoncodec.loads(body)
    except ValueError:
        return body
    if not (isinstance(value, dict) and value.get("ok") is False
            and isinstance(value.get("error"), dict) and "jsonrpc" not in value):
        return body
    value["error"]["code"] = INVALID_REQUEST
    value.update(jsonrpc="2.0", id=None)
    return jsoncodec.dump_bytes(value)


router = APIRouter(lifespan=serve)
router.add_route(MCP_PATH, McpDoor(), include_in_schema=False)  # ASGI: every method, to the SDK
DOOR = Door(name="mcp", router=router, layer=McpErrors)
