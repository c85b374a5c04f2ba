"""The tool call's usual case as pure ASGI, ahead of FastAPI's routing.

``POST /v1/sessions/{id}/calls`` is most of the gateway's traffic. Through FastAPI it paid for the
route matching, the dependency injection, the content type's parsing and four middleware layers:
a third of the gateway's CPU per call (py-spy, with the tool call benchmark). `FastCalls` answers
it directly when the request is plainly well formed, with what the route uses: the path of
`envscaler.server.paths`, the request of `envscaler.server.calls.call_request` (`CallRequest`'s
rules), the answer of `envscaler.server.calls.answer_call`, and its errors from the gateway's
table (`envscaler.server.errors.answer`), so byte for byte as the route. Anything else goes to the
app, with the body already read handed on unchanged, and is answered as before by the documented
route (`envscaler.server.routes.sessions.call_tool`):

- another method or path, a non-empty ``root_path``, or a session id longer than the route allows;
- no ``Content-Length``, or one over a call's body limit (`envscaler.server.limits.BodyLimit` answers 413);
- a content type other than ``application/json`` (parameters allowed);
- a client that disconnects before its body is read;
- a body that `orjson` does not parse (it refuses everything the standard library's parser, which
  FastAPI uses, refuses, and more: NaN, lone surrogates, numbers out of range; where both parse,
  they give the same value, but for integers beyond 64 bits, so a run of 19 digits goes to the app
  too), or that is not a valid `envscaler.server.models.CallRequest` (the route words the 422,
  after the caller's 401 or 403, as FastAPI orders them);
- a request that FastAPI's native OpenTelemetry instrumentation observes (only when an OTel
  provider is configured), so that it keeps its spans;
- a bug (an exception the error table does not list): it goes up to Starlette's outermost layer,
  which answers 500, as from the route.

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
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from envscaler.server import errors, jsonlimits, paths
from envscaler.server.calls import answer_call, call_request
from envscaler.server.errors import ApiError
from envscaler.server.jsonlimits import JsonLimits
from envscaler.server.limits import OFFLOAD_BYTES, replay
from envscaler.server.models import CallRequest
from envscaler.server.requestguard import is_json

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

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
        length, content_type, authorization = _headers(scope)
        if not (0 < length <= self.max_bytes) or content_type is None or not is_json(content_type):
            await self.app(scope, receive, send)
            return
        messages, body = await _read(receive)
        try:
            call = None if body is None else await self._parse(body)
        except ApiError as exc:
            await exc.response()(scope, receive, send)
            return
        if call is None:
            await self.app(scope, replay(messages, receive), send)
            return
        response = await _answer(scope, session_id, call, authorization)
        await response(scope, receive, send)

    async def _parse(self, body: bytes) -> CallRequest | None:
        if len(body) > OFFLOAD_BYTES:
            return await run_in_threadpool(_call, body, self.limits)
        return _call(body, self.limits)


def _session_id(scope: Scope) -> str | None:
    """The session id of a tool call the fast path may take, else None."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
        return None
    session_id = paths.session_of(scope["path"], paths.CALLS)
    if session_id is None or len(session_id) > paths.MAX_SESSION_ID_CHARS:
        return None
    if scope.get("fastapi.telemetry") is not None:
        return None
    return session_id


def _headers(scope: Scope) -> tuple[int, bytes | None, bytes | None]:
    """The first ``Content-Length`` (-1 when none, -2 when not a number), ``Content-Type`` and
    ``Authorization``."""
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
    return length, content_type, authorization


async def _read(receive: Receive) -> tuple[list[Message], bytes | None]:
    """The messages received, and the body (None when the client left before sending it)."""
    messages = []
    chunks = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return messages, b"".join(chunks) if len(chunks) > 1 else chunks[0]


def _call(body: bytes, limits: JsonLimits) -> CallRequest | None:
    """The call of a body that plainly is one (`call_request`), else None; `ApiError`
    ``JsonTooComplex`` when it exceeds the JSON limits."""
    if LONG_INTEGER.search(body) is not None:
        return None  # orjson reads integers beyond 64 bits as floats; the standard library does not
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    jsonlimits.check(value, limits, "body")
    try:
        return call_request(value)
    except ApiError:
        return None  # the route words the 422 (after the caller's 401 or 403)


async def _answer(scope: Scope, session_id: str, call: CallRequest,
                  authorization: bytes | None) -> Response:
    """The route's answer: the call's, or its error's from the gateway's table (a bug is raised
    to Starlette's outermost layer, which answers 500, as from the route)."""
    app = scope["app"]
    try:
        caller = app.state.auth.authenticate(
            authorization.decode("latin-1") if authorization is not None else None)
        return await answer_call(app.state.service, caller, session_id, call)
    except Exception as exc:
        error = errors.answer(exc, scope["method"], scope["path"])
        if error is None:
            raise
        exc.__traceback__ = None  # as Starlette does: the instance may be raised again
        return error.response()
