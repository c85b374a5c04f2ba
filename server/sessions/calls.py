"""What a tool call takes and gives back: session ids, arguments, the outcome a route renders."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from server import jsonlimits
from server.auth import SESSION_ID_RE
from server.errors import invalid_arguments, not_found
from server.jsonlimits import JsonLimits

TOOL_ERRORS = {
    "ToolException": True,
    "ResultTooLarge": True,
    "ArgumentError": False,
}  # kind -> replay


def new_session_id() -> str:
    """24 URL-safe characters (144 bits), never starting with ``-``: a command line would take
    such an id for an option (``envscaler session call -x...`` is a usage error)."""
    while (session_id := secrets.token_urlsafe(18)).startswith("-"):
        continue
    return session_id


def check_session_id(session_id: str) -> None:
    if not SESSION_ID_RE.match(session_id):
        raise not_found("UnknownSession", "no such session (malformed id)")


def parse_arguments(arguments: dict[str, Any] | str, limits: JsonLimits) -> dict[str, Any]:
    """An object as is (its body was checked against ``limits``); a JSON string decoded and
    checked against them (an empty string is ``{}``)."""
    if isinstance(arguments, dict):
        return arguments
    text = arguments.strip()
    if not text:
        return {}
    try:
        value = jsonlimits.loads(text, limits, "body.arguments")
    except ValueError as exc:
        raise invalid_arguments(f"arguments is not valid JSON: {exc}", field="arguments") from None
    if not isinstance(value, dict):
        raise invalid_arguments(
            f"arguments must be a JSON object, not {type(value).__name__}", field="arguments"
        )
    return value


@dataclass
class CallOutcome:
    entry: dict[str, Any]
    duplicate: bool = False

    @property
    def status(self) -> int:
        error = self.entry.get("error") or {}
        return 504 if not self.entry["ok"] and error.get("type") == "Timeout" else 200

    def body(self) -> dict[str, Any]:
        entry = self.entry
        body: dict[str, Any] = {"ok": entry["ok"]}
        if entry["ok"]:
            body["result"] = entry.get("result")
        else:
            body["error"] = entry.get("error")
        body.update(
            index=entry["index"],
            call_id=entry.get("call_id"),
            duplicate=self.duplicate,
            duration_ms=entry.get("duration_ms", 0.0),
        )
        return body
