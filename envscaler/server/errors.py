"""API errors: one exception type, one JSON shape, one stable ``type`` per failure.

Every error answer of the gateway has the shape::

    {"ok": false, "error": {"type": "UnknownSession", "message": "...", "field": "..."}}

``field`` appears only when one input field is to blame (a JSON path such as ``member_id`` or
``body.init_config``). Types and statuses:

=====================  ======  ===========================================================
type                   status  meaning
=====================  ======  ===========================================================
UnknownEnv             404     no environment of that id in the catalogue
UnknownScenario        404     no scenario of that id in the environment
UnknownSession         404     no session of that id (or its record has expired)
UnknownTool            404     the session's environment has no tool of that name
UnknownSnapshot        404     no snapshot of that id (or it has expired)
MethodNotAllowed       405     a path served for other methods (``Allow`` names them)
InvalidArguments       422     tool arguments do not match the tool's JSON schema
InvalidRequest         422     the request body, path or query is malformed
Unauthorized           401     no valid API key or agent token
Forbidden              403     the token may not do this (agent tokens: own session's tools);
                               without API keys, a request from a web page of another origin
SessionClosed          409     the session was deleted
NoChecklist            409     the session's scenario has no check functions to validate
StateTooLarge          409     the session's state grew past ``ENVSCALER_MAX_STATE_BYTES``
                               through its calls (read or validated)
CallOutOfOrder         409     a call whose ``seq`` turn has passed, or too far ahead
StateNotData           409     the session's state (at validate: its initial state too) holds a
                               cycle or keys that collide as text, so it has no faithful JSON
                               form (the message names the place)
RequestTooLarge        413     the request body exceeds ``ENVSCALER_MAX_REQUEST_BYTES``
StateTooLarge          413     a session would start (open or reset) from a state past
                               ``ENVSCALER_MAX_STATE_BYTES``
ArgumentsTooLarge      413     a tool call's arguments exceed ``ENVSCALER_MAX_ARGUMENT_BYTES``
QuotaExceeded          413     the session used up a quota (``ENVSCALER_MAX_SESSION_CALLS``,
                               ``_TRAJECTORY_BYTES``, ``_SESSION_RESULT_BYTES``): retrying
                               cannot help, open a new session
UnsupportedMediaType   415     a request body that is not ``application/json``
MisdirectedRequest     421     without API keys: a ``Host`` not in ``ENVSCALER_ALLOWED_HOSTS``
JsonTooComplex         422     JSON past a limit: nesting depth, array items, object keys or
                               string length (``ENVSCALER_MAX_JSON_*``), naming the field
SessionExpired         410     the session was idle longer than the session TTL
CapacityExhausted      429     every sandbox slot is taken (``Retry-After``)
CapacityExhausted      503     sandboxes cannot be created now, or no checker is free
                               (``Retry-After``)
ChecksStarved          503     the machine gave the checks too little CPU to judge them
                               (``Retry-After``); no reward was computed
BackendUnavailable     503     the sandbox backend or Redis is down, or Redis is full
                               (``Retry-After``)
SessionBusy            503     the session is locked by a long operation (``Retry-After``)
Timeout                504     the tool call exceeded its deadline; the session stays usable
EnvLoadFailed          500     the environment's own code failed to load in its sandbox (its
                               module, class or constructor raised); the message has the
                               cause (``ModuleNotFoundError: ...``). Not the caller's fault,
                               and retrying cannot help: ``envscaler gate`` reports it too
CheckExhausted         500     a check ran out of its CPU time or memory, so it was never
                               judged: no reward was computed. The message names each such
                               check (``checklist[i]``), what ran out, the budget and the
                               settings it follows from; retrying cannot help (the budget is
                               the same on every attempt); the session stays usable. Also
                               when the checks ended their checker sandbox twice
InternalError          500     a bug; details are in the server log, never in the answer
=====================  ======  ===========================================================

Every door answers failures from one table, `ANSWERS`: the exception classes that are answers
rather than bugs, each as the `ApiError` (status, type) it answers; anything else is a bug, 500
``InternalError``. REST renders that `ApiError` as the JSON above (`ApiError.response`), and each
door in its own wire form (the MCP door as JSON-RPC errors, OpenEnv's as JSON-RPC errors and
WebSocket frames, ORS's as its tool output).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import OutOfMemoryError, RedisError, ResponseError
from starlette.exceptions import HTTPException as StarletteHTTPException


log = logging.getLogger("envscaler.server.errors")


class ApiError(Exception):
    """An answer other than success; raised anywhere, answered by each door in its wire form
    (REST: `response`)."""

    def __init__(
        self,
        status: int,
        type: str,
        message: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{type}: {message}")
        self.status = status
        self.type = type
        self.message = message
        self.field = field
        self.headers = headers

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"type": self.type, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        return {"ok": False, "error": error}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def retry_after(seconds: float) -> dict[str, str]:
    """A ``Retry-After`` header: whole seconds, at least 1."""
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


# Constructors for the common cases, so that types and statuses are spelled in one place.


def not_found(type: str, message: str) -> ApiError:
    return ApiError(404, type, message)


def invalid_request(message: str, field: str | None = None) -> ApiError:
    return ApiError(422, "InvalidRequest", message, field=field)


def invalid_arguments(message: str, field: str | None = None) -> ApiError:
    return ApiError(422, "InvalidArguments", message, field=field)


def arguments_too_large(message: str, field: str | None = None) -> ApiError:
    return ApiError(413, "ArgumentsTooLarge", message, field=field)


def session_expired(message: str) -> ApiError:
    return ApiError(410, "SessionExpired", message)


def timeout(message: str) -> ApiError:
    """504 ``Timeout``: a deadline passed; the session stays usable."""
    return ApiError(504, "Timeout", message)


def internal_error(message: str) -> ApiError:
    return ApiError(500, "InternalError", message)


def bearer_challenge(message: str, missing: bool = False, **params: str) -> str:
    """A ``WWW-Authenticate`` value that says why (RFC 6750 section 3): ``error`` is
    ``invalid_request`` when no credential was sent, else ``invalid_token``, and
    ``error_description`` the gateway's message, so that a client can show it rather than start
    a login flow the gateway does not have. ``params``: more parameters (``resource_metadata``)."""
    values = {"error": "invalid_request" if missing else "invalid_token",
              "error_description": message, **params}
    return "Bearer " + ", ".join(f'{name}="{_quotable(value)}"' for name, value in values.items())


def _quotable(text: str) -> str:
    """``text`` as RFC 6750 allows inside a quoted parameter: printable ASCII but the quote and the
    backslash (anything else becomes ``?``)."""
    return "".join(char if " " <= char <= "~" and char not in '"\\' else "?" for char in text)


def unauthorized(message: str, missing: bool = False) -> ApiError:
    """401 ``Unauthorized``; ``missing``: no credential was sent at all."""
    return ApiError(401, "Unauthorized", message,
                    headers={"WWW-Authenticate": bearer_challenge(message, missing)})


def method_not_allowed(message: str, allow: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message, headers={"Allow": allow})


def forbidden(message: str) -> ApiError:
    return ApiError(403, "Forbidden", message)


def env_load_failed(env_id: str, cause: str) -> ApiError:
    """The environment's code does not load; ``cause`` is the runtime's ``"<ExcType>: <message>
    (env.py line N: ...)"``. A 5xx that clients do not retry (they retry 429/502/503 only)."""
    return ApiError(500, "EnvLoadFailed",
                    f"environment {env_id} failed to load in its sandbox: {cause}")


def backend_unavailable(message: str, after: float = 2.0) -> ApiError:
    return ApiError(503, "BackendUnavailable", message, headers=retry_after(after))


def capacity_exhausted(message: str, after: float, status: int = 503) -> ApiError:
    """503 ``CapacityExhausted`` (429 when every sandbox slot is taken), retried ``after``."""
    return ApiError(status, "CapacityExhausted", message, headers=retry_after(after))


def session_busy(message: str, after: float) -> ApiError:
    return ApiError(503, "SessionBusy", message, headers=retry_after(after))


def redis_full(exc: BaseException) -> bool:
    """Redis refused a write because its ``maxmemory`` is reached (``noeviction``)."""
    return isinstance(exc, OutOfMemoryError) or (
        isinstance(exc, ResponseError) and str(exc).startswith("OOM ")
    )  # the lean script client's replies are plain ResponseErrors


def redis_failed(exc: RedisError) -> ApiError:
    """503 for a Redis command that failed. A full Redis (it refuses writes rather than evict
    sessions) is named as such: it is not down, and frees up as sessions are closed and
    expire, so a later retry succeeds."""
    if redis_full(exc):
        return backend_unavailable(
            "Redis is full (its maxmemory is reached) and refuses to store more until sessions "
            "are closed or expire; nothing was changed, retry later", after=5.0)
    return backend_unavailable(f"Redis is unavailable: {exc}")


def _field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(part) for part in loc)


def invalid_request_from(errors: Sequence[Any]) -> ApiError:
    """The 422 of a request model's validation errors (pydantic's): the first one, and how many
    more; for every door that validates with the same models (REST, MCP)."""
    if not errors:
        return invalid_request("the request is malformed")
    first = errors[0]
    field = _field_path(first.get("loc", ()))
    message = (
        f"{field}: {first.get('msg', 'invalid')}" if field else str(first.get("msg", "invalid"))
    )
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return invalid_request(message, field=field or None)


_HTTP_TYPES = {
    400: "InvalidRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    413: "RequestTooLarge",
    415: "UnsupportedMediaType",
    422: "InvalidRequest",
}


def _http_error(exc: StarletteHTTPException) -> ApiError:
    status = exc.status_code
    error_type = _HTTP_TYPES.get(status, "InternalError" if status >= 500 else "InvalidRequest")
    message = exc.detail if isinstance(exc.detail, str) else "request failed"
    return ApiError(status, error_type, message, headers=getattr(exc, "headers", None))


def _validation_error(exc: RequestValidationError) -> ApiError:
    return invalid_request_from(exc.errors())


def _itself(exc: ApiError) -> ApiError:
    return exc


@dataclass(frozen=True)
class Answer:
    """How an exception class answers: the `ApiError` of an instance, and the log line's name
    when it is logged."""

    error: Callable[[Any], ApiError]
    logged: str | None = None


ANSWERS: dict[type[Exception], Answer] = {
    ApiError: Answer(_itself),
    RequestValidationError: Answer(_validation_error),  # FastAPI's, of a request model
    StarletteHTTPException: Answer(_http_error),  # Starlette's: no route, another method
    RedisError: Answer(redis_failed, logged="redis error"),  # one the session layer let through
}
"""The error table: each exception class that is an answer rather than a bug, as the `ApiError`
it answers. An exception answers by the first of its classes (its MRO) in the table."""


def answer(exc: Exception, method: str, path: str) -> ApiError | None:
    """The `ApiError` that ``exc`` answers by `ANSWERS`, or None: a bug (`bug` answers it)."""
    for cls in type(exc).__mro__:
        row = ANSWERS.get(cls)
        if row is not None:
            if row.logged is not None:
                log.error("%s method=%s path=%s error=%r", row.logged, method, path, exc)
            return row.error(exc)
    return None


def bug(exc: Exception, method: str, path: str) -> ApiError:
    """500 ``InternalError``, its details (and traceback) in the log only."""
    log.error("unhandled error method=%s path=%s error=%r", method, path, exc, exc_info=exc)
    return internal_error("internal error; the server log has the details")


async def _handle(request: Request, exc: Exception) -> JSONResponse:
    method, path = request.method, request.url.path
    return (answer(exc, method, path) or bug(exc, method, path)).response()


def install(app: FastAPI) -> None:
    """The REST answers of the table's exceptions, and of bugs (Starlette's outermost layer
    answers ``Exception``)."""
    for cls in (*ANSWERS, Exception):
        app.add_exception_handler(cls, _handle)
