"""A live sandbox: its handle, its runtime connection, and the typed operations on it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from sandbox.backends.base import SandboxBackend, SandboxHandle
from sandbox.client import RuntimeClient
from sandbox.errors import CallTimeout, SandboxGone


class Sandbox:
    """Operations of the in-sandbox runtime, each with a deadline.

    A request that misses its deadline leaves code running in an unknown state, so the sandbox is
    killed and ``CallTimeout`` raised; whoever owns the session rebuilds it.
    """

    def __init__(self, handle: SandboxHandle, backend: SandboxBackend,
                 on_destroy: Callable[[Sandbox], None] | None = None) -> None:
        self.handle = handle
        self.backend = backend
        self.client = RuntimeClient(handle.socket_path)
        self.destroyed = False
        self._on_destroy = on_destroy

    @property
    def id(self) -> str:
        return self.handle.id

    async def _request(self, timeout: float, op: str, /, **fields: Any) -> Any:
        # Positional-only: ``check`` sends a field named ``timeout`` (the per-check deadline).
        # ``asyncio.timeout`` rather than ``wait_for``: the same cancellation, without a task per
        # request (a tenth of a tool call's cost in the gateway).
        try:
            async with asyncio.timeout(timeout):
                return await self.client.request({"op": op, **fields})
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

    async def load(self, *, source: str, class_name: str, tools: list[str], init_config: dict[str, Any],
                   seed: int, max_result_bytes: int, timeout: float) -> list[str]:
        result = await self._request(timeout, "load", source=source, class_name=class_name, tools=tools,
                                     init_config=init_config, seed=seed,
                                     max_result_bytes=max_result_bytes)
        return result["tools"]

    async def reset(self, *, init_config: dict[str, Any], seed: int, timeout: float) -> list[str]:
        result = await self._request(timeout, "reset", init_config=init_config, seed=seed)
        return result["tools"]

    # ``executed``: the tool calls the caller recorded since the load or reset; the runtime
    # refuses with ``RuntimeFault("Diverged")`` when it ran another number (protocol.py).

    async def call(self, name: str, arguments: dict[str, Any], *, timeout: float,
                   executed: int | None = None) -> Any:
        return await self._request(timeout, "call", name=name, arguments=arguments,
                                   **_expecting(executed))

    async def state(self, *, timeout: float, executed: int | None = None) -> dict[str, Any]:
        return await self._request(timeout, "state", **_expecting(executed))

    async def check(self, checks: list[str], *, timeout_per_check: float,
                    executed: int | None = None) -> list[dict[str, Any]]:
        budget = timeout_per_check * max(len(checks), 1) + 5.0
        return await self._request(budget, "check", checks=checks, timeout=timeout_per_check,
                                   **_expecting(executed))

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


def _expecting(executed: int | None) -> dict[str, int]:
    return {} if executed is None else {"executed": executed}
