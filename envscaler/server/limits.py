"""Limits on request bodies, as pure ASGI: their size (``ENVSCALER_MAX_REQUEST_BYTES``; for tool
calls ``ENVSCALER_MAX_ARGUMENT_BYTES``) and the shape of their JSON (`envscaler.server.jsonlimits`).

A body that starts a session or a reset may carry the caller's own ``init_config``: a database,
as large as the state a session may hold (`envscaler.server.statesize.state_limit`) and with as many keys
or items as it likes, so its size limit is that state limit and only the JSON limits that protect
the gateway whatever the size (nesting depth, string length) apply to it.

A body declared larger than its limit (``Content-Length``) is refused before any of it is read;
a body without a length (chunked) is counted as it arrives and refused once it passes the limit.
Either way the answer is 413 in the gateway's error shape, and the body is never held in memory
beyond the limit. A body within its limit is read whole, parsed and checked against the JSON
limits here, before any route parses it (the standard library's parser, which FastAPI uses,
overflows on deep nesting), then handed on unchanged. Big bodies are parsed on a worker thread:
the event loop keeps serving other sessions meanwhile.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from starlette.concurrency import run_in_threadpool

from envscaler.server import jsonlimits, paths
from envscaler.server.errors import ApiError, arguments_too_large
from envscaler.server.jsonlimits import JsonLimits
from envscaler.server.statesize import StateLimit

Scope = dict[str, Any]
Message = dict[str, Any]

CALL_ENVELOPE_BYTES = 4096  # a call's body beyond its arguments: name, call id, keys
OFFLOAD_BYTES = 65_536  # bodies larger than this are parsed and checked on a worker thread
START_ENVELOPE_BYTES = 4096  # a session start's body beyond its init_config


def call_body_bytes(max_request_bytes: int, max_argument_bytes: int) -> int:
    """The largest body of a tool call: its arguments' limit and room for the rest, within the
    limit of every body."""
    return min(max_request_bytes, max_argument_bytes + CALL_ENVELOPE_BYTES)


def _is_start_path(path: str) -> bool:
    """A path whose ``POST`` starts a session or a reset: its body may carry an ``init_config``."""
    return path == paths.SESSIONS or paths.session_of(path, paths.RESET) is not None


@dataclasses.dataclass(frozen=True)
class _Rule:
    """How large a body may be, the answer past that, and the JSON limits it is held to."""

    max_bytes: int
    too_large: ApiError
    json: JsonLimits


class BodyLimit:
    def __init__(self, app: Any, max_bytes: int, max_argument_bytes: int, limits: JsonLimits,
                 state: StateLimit, door_calls: Sequence[Callable[[str], bool]]) -> None:
        """``door_calls``: whether a path is a tool call of a door (`envscaler.server.doors`)."""
        self.app = app
        self.door_calls = tuple(door_calls)
        self.body = _Rule(max_bytes, ApiError(
            413, "RequestTooLarge", f"the request body exceeds {max_bytes} bytes "
            "(ENVSCALER_MAX_REQUEST_BYTES)"), limits)
        call = call_body_bytes(max_bytes, max_argument_bytes)
        self.call = self.body if call >= max_bytes else _Rule(call, arguments_too_large(
            f"a tool call's body exceeds {call} bytes: its arguments may take "
            f"{max_argument_bytes} (ENVSCALER_MAX_ARGUMENT_BYTES)"), limits)
        start = max(max_bytes, state.max_bytes + START_ENVELOPE_BYTES)
        self.start = _Rule(start, ApiError(
            413, "StateTooLarge", f"the request body exceeds {start:,} bytes: a session may start "
            f"from up to {state.max_bytes:,} bytes of state, set by {state.because}"),
            dataclasses.replace(limits, items=start, keys=start))

    def _rule(self, scope: Scope) -> _Rule:
        path = scope["path"]
        if self._is_call(path):
            return self.call
        if scope["method"] == "POST" and _is_start_path(path):
            return self.start
        return self.body

    def _is_call(self, path: str) -> bool:
        """A tool call's path: REST's, or a door's (NeMo Gym's ``/nemo-gym/{env}/{tool}``)."""
        return (paths.session_of(path, paths.CALLS) is not None
                or any(is_call(path) for is_call in self.door_calls))

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rule = self._rule(scope)
        limit, too_large = rule.max_bytes, rule.too_large
        length = _declared_length(scope)
        if length == 0:
            await self.app(scope, receive, send)
            return
        if length is not None and length > limit:
            await too_large.response()(scope, receive, send)
            return
        chunks, received = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before sending its body: no one to answer
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > limit:
                await too_large.response()(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            if len(body) > OFFLOAD_BYTES:
                await run_in_threadpool(_check, body, rule.json)
            else:
                _check(body, rule.json)
        except ApiError as exc:
            await exc.response()(scope, receive, send)
            return
        await self.app(scope, replay([_request(body)], receive), send)


def _check(body: bytes, limits: JsonLimits) -> None:
    try:
        jsonlimits.loads(body, limits)
    except ValueError:
        pass  # not JSON: the route answers 422 InvalidRequest, as it always did


def _declared_length(scope: Scope) -> int | None:
    """The body's length: 0 when there is none, None when it is not declared (chunked)."""
    chunked = False
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
        if name == b"transfer-encoding":
            chunked = True
    return None if chunked else 0


def _request(body: bytes) -> Message:
    return {"type": "http.request", "body": body, "more_body": False}


def replay(messages: list[Message], receive: Any) -> Any:
    """``receive`` that first hands out ``messages``."""
    pending = list(reversed(messages))

    async def replayed() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replayed
