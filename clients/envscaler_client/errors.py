"""Exceptions, one class per meaning, carrying the gateway's error ``type``, ``message``, ``field``.

The gateway answers every error as ``{"ok": false, "error": {"type", "message", "field"?}}`` with a
stable ``type`` (``UnknownSession``, ``InvalidArguments``, ``CapacityExhausted``...) and a status.
The class says what to do (fix the request, authenticate, wait, open a new session); ``type`` says
exactly what happened.

A tool that fails inside its environment is not an exception: the call answers 200 with
``ok: false`` and the agent sees it (`envscaler_client.models.CallResult`).
"""

from __future__ import annotations

import httpx

from envscaler_client.retry import retry_after as parse_retry_after


class EnvScalerError(Exception):
    """Base of every error of the client; ``status`` is None when no HTTP answer came."""

    def __init__(self, message: str, *, type: str = "EnvScalerError", status: int | None = None,
                 field: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.type = type
        self.message = message
        self.status = status
        self.field = field
        self.retry_after = retry_after

    def __str__(self) -> str:
        text = f"{self.type}: {self.message}"
        if self.status is not None:
            text += f" (HTTP {self.status})"
        return text


class NotFoundError(EnvScalerError):
    """404: unknown environment, scenario, session or tool."""


class InvalidArgumentsError(EnvScalerError):
    """422: tool arguments that do not match the tool's schema (``InvalidArguments``), or a
    malformed request (``InvalidRequest``); ``field`` names the culprit."""


class AuthError(EnvScalerError):
    """401/403: no valid API key, or an agent token used beyond its session's tools."""


class SessionClosedError(EnvScalerError):
    """409/410: the session was deleted (``SessionClosed``) or expired (``SessionExpired``); its
    state, trajectory and validation stay readable."""


class CapacityError(EnvScalerError):
    """429/503: no sandbox free, a busy session, a backend down; retry after ``retry_after``."""


class CallTimeoutError(EnvScalerError):
    """504: the tool exceeded its deadline; its effects were discarded and the session goes on."""


class CheckExhaustedError(EnvScalerError):
    """500 ``CheckExhausted``: a check of the validation ran out of its CPU time or memory, so it
    was never judged and there is no reward (not a reward of 0). Retrying cannot help; the message
    names the check, the budget and the gateway's setting that raises it. The session goes on."""


class TransportError(EnvScalerError):
    """No HTTP answer: connection refused, timeout, dropped connection. ``type`` is the name of
    the underlying httpx exception (``ConnectError``, ``ReadTimeout``...)."""

    @property
    def unreachable(self) -> bool:
        """True when no connection to the gateway could be made at all."""
        return self.type in ("ConnectError", "ConnectTimeout")


_BY_TYPE: dict[str, type[EnvScalerError]] = {"SessionClosed": SessionClosedError,
                                             "SessionExpired": SessionClosedError,
                                             "CheckExhausted": CheckExhaustedError}
_BY_STATUS: dict[int, type[EnvScalerError]] = {
    401: AuthError, 403: AuthError, 404: NotFoundError, 410: SessionClosedError,
    422: InvalidArgumentsError, 429: CapacityError, 503: CapacityError, 504: CallTimeoutError}


def error_from_response(response: httpx.Response) -> EnvScalerError:
    """The exception for an error answer; a body that is not the gateway's (a proxy's HTML page)
    gives type ``HTTP<status>``."""
    status = response.status_code
    error_type, message, field = f"HTTP{status}", response.reason_phrase or "error", None
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and isinstance(error.get("type"), str):
        error_type = error["type"]
        message = str(error.get("message", message))
        field = error.get("field")
    elif response.text:
        message = f"{message}: {response.text[:200]}"
    cls = _BY_TYPE.get(error_type) or _BY_STATUS.get(status, EnvScalerError)
    return cls(message, type=error_type, status=status, field=field,
               retry_after=parse_retry_after(response.headers))


def transport_error(exc: httpx.TransportError) -> TransportError:
    """The exception for a request that got no answer, naming the method and URL when known."""
    try:
        where = f"{exc.request.method} {exc.request.url}: "
    except RuntimeError:  # httpx raised it before the request was attached
        where = ""
    return TransportError(f"{where}{exc or type(exc).__name__}", type=type(exc).__name__)
