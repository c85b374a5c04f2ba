"""Errors of the sandbox layer. The gateway maps each to one HTTP status."""

from __future__ import annotations


class SandboxError(Exception):
    """Base class: something went wrong with a sandbox, not with the caller's input."""


class SandboxUnavailable(SandboxError):
    """The backend could not create a sandbox (engine down, image missing, start-up failed)."""


class CapacityExhausted(SandboxError):
    """No sandbox (or checker) can be had now; the caller should retry after ``retry_after``
    seconds. ``full``: every sandbox slot is taken by sessions (429), rather than the engine being
    too slow to make one in time (503)."""

    def __init__(self, message: str, retry_after: float, *, full: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.full = full


class SandboxGone(SandboxError):
    """The sandbox died or its socket stopped answering; its state is lost."""


class SandboxCounterfeit(SandboxGone):
    """The peer on a sandbox's socket could not prove the sandbox's secret: it is not the sandbox
    this service created (a forged handle, a swapped socket). Nothing was sent to it; the
    sandbox is treated as lost."""


class CallTimeout(SandboxError):
    """A request exceeded its deadline. The sandbox has been destroyed, since its state is unknown."""

    def __init__(self, message: str, timeout: float) -> None:
        super().__init__(message)
        self.timeout = timeout


class RuntimeFault(SandboxError):
    """The runtime answered with an error (``type`` is the runtime's stable error type)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class SandboxStale(SandboxError):
    """The container was recycled since this handle was taken: it belongs to someone else now."""


class PointMismatch(SandboxError):
    """A sandbox that imported a point holds another state than the one exported: the copy is
    not exact (an object that pickles without all it holds), so it must not be served."""
