"""A live sandbox: its handle, its runtime connection, and the typed operations on it."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from envscaler.sandbox.backends.base import CONTROL_NAME, SandboxBackend, SandboxHandle
from envscaler.sandbox.client import RuntimeClient
from envscaler.sandbox.errors import (
    CallTimeout,
    PointMismatch,
    RuntimeFault,
    SandboxError,
    SandboxGone,
    SandboxStale,
)

if TYPE_CHECKING:
    from envscaler.sandbox.pool import SandboxPool

# A reply carries the result plus a few dozen bytes of envelope.
REPLY_ENVELOPE_BYTES = 4096
DEFAULT_MAX_RESULT_BYTES = 1_048_576
DEFAULT_MAX_STATE_BYTES = 16 * 1_048_576


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """A session's initial and current state as the runtime wrote them (JSON texts): passed on
    to a checker as they are, and parsed only by the checks that judge them."""

    initial: str
    final: str


class Sandbox:
    """Operations of the in-sandbox runtime, each with a deadline.

    A request that misses its deadline leaves code running in an unknown state, so the sandbox is
    killed and ``CallTimeout`` raised; whoever owns the session rebuilds it.
    """

    def __init__(self, handle: SandboxHandle, backend: SandboxBackend,
                 on_destroy: Callable[[Sandbox], None] | None = None,
                 owner: SandboxPool | None = None) -> None:
        """``owner``: the pool that created (or adopted) this sandbox and counts it."""
        self.handle = handle
        self.backend = backend
        self.client = backend.runtime_client(handle)
        self.destroyed = False
        self.owner = owner
        self.idle_since = time.monotonic()  # when it was made or last went back to its pool
        self._on_destroy = on_destroy
        # Set by ``load``; a sandbox attached to by handle keeps the defaults until it is loaded.
        self.max_result_bytes = DEFAULT_MAX_RESULT_BYTES
        self.max_state_bytes = DEFAULT_MAX_STATE_BYTES

    @property
    def id(self) -> str:
        return self.handle.id

    @property
    def pooled(self) -> bool:
        """Whether it came from this process's pool (not attached to by handle)."""
        return self.owner is not None

    async def _request(self, timeout: float, op: str, /, max_reply_bytes: int | None = None,
                       **fields: Any) -> Any:
        # ``asyncio.timeout`` rather than ``wait_for``: the same cancellation, without a task per
        # request (a tenth of a tool call's cost in the gateway).
        try:
            async with asyncio.timeout(timeout):
                return await self.client.request({"op": op, **fields}, max_reply_bytes)
        except TimeoutError:
            await self.destroy()
            raise CallTimeout(f"{op} exceeded its deadline of {timeout:g} s; the sandbox was recycled",
                              timeout) from None
        except SandboxGone as exc:
            reason = await self.backend.diagnose(self.handle)
            await self.destroy()
            raise SandboxGone(f"{exc} ({reason})" if reason else str(exc)) from exc

    async def ping(self, timeout: float = 2.0) -> dict[str, Any]:
        return await self._request(timeout, "ping")

    async def load(self, *, source: str, class_name: str, tools: list[str],
                   init_config: dict[str, Any] | str, seed: int, max_result_bytes: int,
                   timeout: float, max_state_bytes: int = DEFAULT_MAX_STATE_BYTES,
                   clock_start: str | None = None,
                   init_patch: dict[str, Any] | None = None) -> list[str]:
        """``init_config``: an object or its JSON text (cheaper for a large database: the
        runtime parses a fresh copy per build), with ``init_patch`` merged on top when given.
        ``clock_start``: ISO 8601 date-time of the virtual clock's start (runtime default when
        None)."""
        self.max_result_bytes, self.max_state_bytes = max_result_bytes, max_state_bytes
        result = await self._request(timeout, "load", source=source, class_name=class_name,
                                     tools=tools, init_config=init_config, init_patch=init_patch,
                                     seed=seed, max_result_bytes=max_result_bytes,
                                     clock_start=clock_start)
        return result["tools"]

    async def reset(self, *, init_config: dict[str, Any] | str, seed: int, timeout: float,
                    clock_start: str | None = None,
                    init_patch: dict[str, Any] | None = None) -> list[str]:
        """``clock_start`` None keeps the clock start of the load or last reset."""
        result = await self._request(timeout, "reset", init_config=init_config,
                                     init_patch=init_patch, seed=seed, clock_start=clock_start)
        return result["tools"]

    # ``executed``: the tool calls the caller recorded since the load or reset; the runtime
    # refuses with ``RuntimeFault("Diverged")`` when it ran another number (protocol.py).

    # Results and states are capped on this side too, where environment code cannot patch the
    # limit (the runtime's own check runs inside the sandbox).

    async def call(self, name: str, arguments: dict[str, Any], *, timeout: float,
                   executed: int | None = None) -> Any:
        return await self._request(timeout, "call", _reply_limit(self.max_result_bytes),
                                   name=name, arguments=arguments, **_expecting(executed))

    async def state(self, *, timeout: float, executed: int | None = None) -> dict[str, Any]:
        return await self._request(timeout, "state", _reply_limit(self.max_state_bytes),
                                   **_expecting(executed))

    async def snapshot(self, *, timeout: float, executed: int | None = None) -> Snapshot:
        """The states a checker judges (``envscaler.sandbox.checkers``), each within ``max_state_bytes``.
        Escaped inside the reply, a text may take up to twice its length there."""
        reply = await self._request(timeout, "snapshot",
                                    _reply_limit(4 * self.max_state_bytes),
                                    **_expecting(executed))
        if not (isinstance(reply, dict) and isinstance(reply.get("initial"), str)
                and isinstance(reply.get("final"), str)):
            raise SandboxGone("the runtime answered a snapshot that is not two states")
        snapshot = Snapshot(reply["initial"], reply["final"])
        if max(len(snapshot.initial), len(snapshot.final)) > self.max_state_bytes:
            raise RuntimeFault("ResultTooLarge", f"a state exceeds {self.max_state_bytes} "
                               "characters")
        return snapshot

    async def export(self, *, timeout: float, executed: int | None = None) -> Point:
        """The session's point (`import_point` continues from it in a sandbox loaded with the
        same start); ``RuntimeFault("NotExportable")`` when its objects cannot be copied."""
        reply = await self._request(timeout, "export", _reply_limit(4 * self.max_state_bytes),
                                    **_expecting(executed))
        if not (isinstance(reply, dict) and isinstance(reply.get("point"), str)
                and isinstance(reply.get("state_sha256"), str)):
            raise SandboxGone("the runtime answered an export that is not a point")
        return Point(reply["point"], reply["state_sha256"])

    async def import_point(self, point: Point, *, timeout: float) -> None:
        """Continue from ``point``; `PointMismatch` when the state here is not the exporter's."""
        reply = await self._request(timeout, "import_point", point=point.text)
        if not isinstance(reply, dict) or reply.get("state_sha256") != point.state_sha256:
            raise PointMismatch("the imported state differs from the exported one")

    async def check(self, checks: list[str], snapshot: Snapshot, *, cpu_seconds: float,
                    wall_seconds: float, memory_bytes: int, timeout: float) -> Any:
        """A checker's verdicts on two states (``runtime/checker.py``; checker sandboxes only)."""
        return await self._request(timeout, "check", checks=checks,
                                   initial_state=snapshot.initial, final_state=snapshot.final,
                                   cpu_seconds=cpu_seconds, wall_seconds=wall_seconds,
                                   memory_bytes=memory_bytes)

    async def recycle(self, timeout: float) -> None:
        """Have the container's keeper restart the slot's runtime in place (``runtime/keeper.py``), then
        check that a fresh, empty runtime answers. Raises ``SandboxError`` when it does not."""
        self.client.close()
        control = RuntimeClient(str(self.backend.directory(self.handle) / CONTROL_NAME),
                                self.backend.secret(self.handle))
        try:
            async with asyncio.timeout(timeout):
                fresh = await control.request({"op": "recycle", "slot": self.handle.slot,
                                               "generation": self.handle.generation})
                info = await self.client.request({"op": "ping"})
        except TimeoutError:
            raise CallTimeout(f"recycling exceeded {timeout:g} s", timeout) from None
        except RuntimeFault as exc:
            if exc.kind == "Stale":
                raise SandboxStale(exc.message) from None
            raise
        finally:
            control.close()
        if info.get("pid") != fresh.get("runtime_pid") or info.get("loaded") is not False:
            raise SandboxError(f"the recycled runtime is not the fresh one: {info} vs {fresh}")
        self.handle = dataclasses.replace(self.handle, generation=fresh["generation"])

    def abandon(self) -> None:
        """Stop using the sandbox without killing it: it was recycled for someone else."""
        if self.destroyed:
            return
        self.destroyed = True
        self.client.close()
        if self._on_destroy is not None:
            self._on_destroy(self)

    async def destroy(self) -> None:
        """Kill the sandbox; idempotent."""
        if self.destroyed:
            return
        self.destroyed = True
        self.client.close()
        try:
            await self.backend.destroy(self.handle)
        finally:  # whatever the backend says, this sandbox no longer counts against the pool
            if self._on_destroy is not None:
                self._on_destroy(self)


@dataclasses.dataclass(frozen=True)
class Point:
    """A runtime's exported point: an opaque text, and the digest of the state it holds."""

    text: str
    state_sha256: str


def _reply_limit(max_bytes: int) -> int:
    return max_bytes + REPLY_ENVELOPE_BYTES


def _expecting(executed: int | None) -> dict[str, int]:
    return {} if executed is None else {"executed": executed}
