"""A tool call, the same at every door: its request parsed by one function, its answer over HTTP.

`call_request` holds a request (name, arguments, call_id, seq) to `CallRequest`'s rules, the model
REST's route validates its body with: the fast path (`envscaler.server.fastcall`), the MCP door and
the other doors (`envscaler.server.doors.episodes.call`) parse with it, so no door has rules of its
own. `answer_call` is the answer of the route and of the fast path, `checked` (a deadline as the
504 ``Timeout``) that of every door that answers a call with an HTTP status.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from envscaler.server.auth import Principal
from envscaler.server.errors import invalid_request_from, timeout
from envscaler.server.models import CallRequest
from envscaler.server.responses import FastJSONResponse
from envscaler.server.sessions import CallOutcome, SessionService


def call_request(value: Any) -> CallRequest:
    """``value`` (a decoded request) as a tool call by `CallRequest`'s rules; 422
    ``InvalidRequest`` naming the field otherwise."""
    try:
        return CallRequest.model_validate(value)
    except ValidationError as exc:
        raise invalid_request_from(exc.errors()) from None


async def answer_call(sessions: SessionService, caller: Principal, session_id: str,
                      call: CallRequest) -> FastJSONResponse:
    """The answer to a tool call: its `CallResult`, or an `ApiError` (504 on a deadline)."""
    outcome = await sessions.call(caller, session_id, call.name, call.arguments, call.call_id,
                                  call.seq)
    return FastJSONResponse(checked(outcome).body())


def checked(outcome: CallOutcome) -> CallOutcome:
    """A tool call's outcome, its deadline raised as the `ApiError` 504 ``Timeout`` (the call
    stays recorded): what every door that answers a call over HTTP answers."""
    if outcome.status == 504:
        raise timeout(outcome.entry["error"]["message"])
    return outcome
