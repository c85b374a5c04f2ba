"""The session paths, defined and matched in one place.

The routes serve them (`envscaler.server.routes.sessions`, the MCP door), and the ASGI layers in
front of the routing recognise them without it: the tool call's fast path
(`envscaler.server.fastcall`), the body limits (`envscaler.server.limits`) and the MCP door's error
framing (`envscaler.server.doors.mcp.McpErrors`).
"""

from __future__ import annotations

SESSIONS = "/v1/sessions"
CALLS = "calls"
MCP = "mcp"
RESET = "reset"
MAX_SESSION_ID_CHARS = 100  # the routes' session id (longer ones answer 422)


def session_path(operation: str) -> str:
    """The route of a session's ``operation``: ``/v1/sessions/{session_id}/<operation>``."""
    return f"{SESSIONS}/{{session_id}}/{operation}"


def session_of(path: str, operation: str) -> str | None:
    """The session id of ``path`` when it is ``/v1/sessions/<id>/<operation>`` (``<id>``: one
    non-empty segment), else None."""
    prefix, suffix = SESSIONS + "/", "/" + operation
    if not (path.startswith(prefix) and path.endswith(suffix)):
        return None
    session_id = path[len(prefix):-len(suffix)]
    return session_id if session_id and "/" not in session_id else None
