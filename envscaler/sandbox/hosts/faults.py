"""Sandbox-layer errors across the wire: a host sends what went wrong by name, and the gateway
raises the same exception the local path raises, so the session layer handles both alike."""

from __future__ import annotations

from typing import Any

from envscaler.sandbox.backends.base import InvalidHandle
from envscaler.sandbox.errors import (
    CallTimeout,
    CapacityExhausted,
    RuntimeFault,
    SandboxCounterfeit,
    SandboxError,
    SandboxGone,
    SandboxStale,
    SandboxUnavailable,
)

_BY_NAME: dict[str, type[Exception]] = {cls.__name__: cls for cls in (
    SandboxGone, SandboxCounterfeit, SandboxUnavailable, SandboxStale, SandboxError,
    InvalidHandle)}


class BadHostRequest(Exception):
    """A request the host does not serve (unknown op, missing field)."""


def to_wire(exc: Exception) -> dict[str, Any]:
    """The error of a reply; an exception of no known kind travels as ``SandboxError``."""
    if isinstance(exc, RuntimeFault):
        return {"type": "RuntimeFault", "kind": exc.kind, "message": exc.message}
    if isinstance(exc, CapacityExhausted):
        return {"type": "CapacityExhausted", "message": str(exc), "retry_after": exc.retry_after,
                "full": exc.full}
    if isinstance(exc, CallTimeout):
        return {"type": "CallTimeout", "message": str(exc), "timeout": exc.timeout}
    if isinstance(exc, BadHostRequest):
        return {"type": "BadRequest", "message": str(exc)}
    name = next((cls.__name__ for cls in type(exc).__mro__ if cls.__name__ in _BY_NAME),
                "SandboxError")
    return {"type": name, "message": str(exc)}


def from_wire(error: object) -> Exception:
    """The exception a host's error names (``SandboxError`` for anything unexpected)."""
    if not isinstance(error, dict):
        return SandboxError(f"the host answered a malformed error: {error!r:.200}")
    kind, message = error.get("type"), str(error.get("message", ""))
    if kind == "RuntimeFault":
        return RuntimeFault(str(error.get("kind", "RuntimeError")), message)
    if kind == "CapacityExhausted":
        return CapacityExhausted(message, float(error.get("retry_after") or 1.0),
                                 full=error.get("full") is True)
    if kind == "CallTimeout":
        return CallTimeout(message, float(error.get("timeout") or 0.0))
    if kind == "BadRequest":
        return BadHostRequest(message)
    return _BY_NAME.get(str(kind), SandboxError)(message)
