"""The tool call's usual case as pure ASGI, ahead of FastAPI's routing.

``POST /v1/sessions/{id}/calls`` is most of the gateway's traffic. Through FastAPI it paid for the
route matching, the dependency injection, the request model's validation, the content type's
parsing and four middleware layers: a third of the gateway's CPU per call (py-spy, with the
tool call benchmark). `FastCalls` answers it directly when the request is plainly well formed,
through the same `envscaler.server.routes.sessions.answer_call` as the route, its errors through the app's
own exception handlers. Anything else goes to the app, with the body already read handed on
unchanged, and is answered as before by the documented route (`envscaler.server.routes.sessions.call_tool`):

- another method or path, a non-empty ``root_path``, or a session id longer than the route allows;
- no ``Content-Length``, or one over a call's body limit (`envscaler.server.limits.BodyLimit` answers 413);
- a content type other than ``application/json`` (parameters allowed);
- a client that disconnects before its body is read;
- a body that `orjson` does not parse (it refuses everything the standard library's parser, which
  FastAPI uses, refuses, and more: NaN, lone surrogates, numbers out of range; where both parse,
  they give the same value, but for integers beyond 64 bits, so a run of 19 digits goes to the app
  too), or that does not plainly satisfy `envscaler.server.models.CallRequest`;
- a request that FastAPI's native OpenTelemetry instrumentation observes (only when an OTel
  provider is configured), so that it keeps its spans.

A body that parses but exceeds the JSON limits (`envscaler.server.jsonlimits`) is answered here with 422
``JsonTooComplex``, as `envscaler.server.limits.BodyLimit` would answer it. The order of checks is
FastAPI's: a well-formed body is checked first, then the caller (401/403), then the session and
the arguments (`envscaler.server.sessions.toolcall.ToolCalls.call`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette._utils import is_async_callable
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request

from envscaler.server import jsonlimits
from envscaler.server.errors import ApiError
from envscaler.server.jsonlimits import JsonLimits
from envscaler.server.limits import OFFLOAD_BYTES, replay
from envscaler.server.models import MAX_CALL_FIELD_CHARS, MAX_SEQ
from envscaler.server.requestguard import is_json
from envscaler.server.routes.sessions import MAX_SESSION_ID_CHARS, answer_call

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

PREFIX = "/v1/sessions/"
SUFFIX = "/calls"
FIELDS = frozenset(("name", "arguments", "call_id", "seq"))
LONG_INTEGER = re.compile(rb"[0-9]{19}")  # 19 digits may be beyond 64 bits; 18 never are


class FastCalls:
    def __init__(self, app: Any, max_bytes: int, limits: JsonLimits) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        session_id = _session_id(scope)
        if session_id is None:
            await self.app(scope, receive, send)
            return
        authorization = None
        content_type = None
        length = -1
        for name, value in scope["headers"]:
            if name == b"content-length":
                if length == -1:
                    length = int(value) if value.isdigit() else -2
            elif name == b"content-type":
                if content_type is None:
                    content_type = value
            elif name == b"authorization":
                if authorization is None:
                    authorization = value
        if not (0 < length <= self.max_bytes) or content_type is None or not is_json(content_type):
            await self.app(scope, receive, send)
            return
        messages = []
        chunks = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                await self.app(scope, replay(messages, receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks) if len(chunks) > 1 else chunks[0]
        try:
            if len(body) > OFFLOAD_BYTES:
                call = await run_in_threadpool(_call_request, body, self.limits)
            else:
                call = _call_request(body, self.limits)
        except ApiError as exc:
            await exc.response()(scope, receive, send)
            return
        if call is None:
            await self.app(scope, replay(messages, receive), send)
            return
        app = scope["app"]
        try:
            caller = app.state.auth.authenticate(
                authorization.decode("latin-1") if authorization is not None else None
            )
            response = await answer_call(app.state.service, caller, session_id, *call)
        except Exception as exc:
            handler = _handler(app.exception_handlers, exc)
            if handler is None:
                raise  # to ServerErrorMiddleware (500), as from the route
            request = Request(scope, receive)
            if is_async_callable(handler):
                response = await handler(request, exc)
            else:
                response = await run_in_threadpool(handler, request, exc)
            exc.__traceback__ = None  # as Starlette does: the instance may be raised again
            if response is None:
                return
        await response(scope, receive, send)


def _session_id(scope: Scope) -> str | None:
    """The session id of a tool call the fast path may take, else None."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
        return None
    path: str = scope["path"]
    if not (path.startswith(PREFIX) and path.endswith(SUFFIX)):
        return None
    session_id = path[len(PREFIX):-len(SUFFIX)]
    if not 0 < len(session_id) <= MAX_SESSION_ID_CHARS or "/" in session_id:
        return None
    if scope.get("fastapi.telemetry") is not None:
        return None
    return session_id


def _call_request(
    body: bytes, limits: JsonLimits
) -> tuple[str, dict[str, Any] | str, str | None, int | None] | None:
    """(name, arguments, call_id, seq) of a body that is plainly a valid `CallRequest`, else None;
    `ApiError` ``JsonTooComplex`` when it exceeds the JSON limits."""
    if LONG_INTEGER.search(body) is not None:
        return None  # orjson reads integers beyond 64 bits as floats; the standard library does not
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    jsonlimits.check(value, limits, "body")
    if type(value) is not dict or not value.keys() <= FIELDS:
        return None
    name = value.get("name")
    if type(name) is not str or not 0 < len(name) <= MAX_CALL_FIELD_CHARS:
        return None
    arguments = value.get("arguments", None)
    if arguments is None:
        if "arguments" in value:
            return None  # null: the model refuses it
        arguments = {}
    elif type(arguments) is not dict and type(arguments) is not str:
        return None
    call_id = value.get("call_id")
    if call_id is not None and (type(call_id) is not str
                                or not 0 < len(call_id) <= MAX_CALL_FIELD_CHARS):
        return None
    seq = value.get("seq")
    if seq is not None and (type(seq) is not int or not 0 <= seq <= MAX_SEQ):
        return None
    return name, arguments, call_id, seq


def _handler(handlers: dict[Any, Any], exc: Exception) -> Any:
    """The handler Starlette's ExceptionMiddleware would use (FastAPI gives it every handler but
    the one for ``Exception``/500, which is ServerErrorMiddleware's)."""
    if isinstance(exc, HTTPException) and exc.status_code != 500:
        handler = handlers.get(exc.status_code)
        if handler is not None:
            return handler
    for cls in type(exc).__mro__:
        if cls is Exception:
            return None
        if cls in handlers:
            return handlers[cls]
    return None

