"""Ground truths replayed in a sandbox, for importers that check a state a benchmark's ground
truth leaves: the benchmark's code runs there, never in the importing process, and the same way
the gateway will run it, so a scenario's reference solution earns its reward by construction."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AsyncExitStack
from typing import Any

from envscaler.format.models import ToolCall
from envscaler.sandbox.errors import RuntimeFault, SandboxError
from envscaler.sandbox.sandbox import Sandbox
from envscaler.synth.sandboxes import SandboxHub

SEED = 0
TOOL_FAILURES = ("ToolException", "ResultTooLarge")  # a result of the call, as for an agent


class ReplayError(ValueError):
    """A ground truth that does not replay (the environment does not load, a call crashes or
    ends its sandbox)."""


class Replayer:
    """Replays ground truths of one environment in one sandbox of ``hub``, reset between them,
    replaced when a replay ends it (a call past its deadline, a crash)."""

    def __init__(self, hub: SandboxHub, *, source: str, class_name: str, tools: list[str],
                 purpose: str, requirements: list[str] | None = None) -> None:
        self.hub, self.source, self.class_name, self.tools = hub, source, class_name, tools
        self.purpose, self.requirements = purpose, requirements or []
        self.stack = AsyncExitStack()
        self.box: Sandbox | None = None
        self.loaded = False

    async def __aenter__(self) -> Replayer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stack.aclose()

    async def final_state(self, init_config: dict[str, Any] | str, calls: Iterable[ToolCall],
                          init_patch: dict[str, Any] | None = None) -> dict[str, Any]:
        """The state ``calls`` leave from ``init_config`` (a JSON object, or its text, with
        ``init_patch`` merged on top); a tool's failure is a result, not an error."""
        try:
            return await self._replay(init_config, list(calls), init_patch)
        except RuntimeFault as exc:
            self.loaded = False
            raise ReplayError(f"the ground truth does not replay: {exc.kind}: "
                              f"{exc.message}") from None
        except SandboxError as exc:
            await self.stack.aclose()
            self.stack, self.box, self.loaded = AsyncExitStack(), None, False
            raise ReplayError(f"the ground truth ended its sandbox: {exc}") from None

    async def _replay(self, init_config: dict[str, Any] | str, calls: list[ToolCall],
                      init_patch: dict[str, Any] | None) -> dict[str, Any]:
        limits = self.hub.limits
        if self.box is None:
            self.box = await self.stack.enter_async_context(self.hub.sandbox(self.purpose,
                                                                         self.requirements))
        if self.loaded:
            await self.box.reset(init_config=init_config, init_patch=init_patch, seed=SEED,
                                 timeout=limits.load_timeout)
        else:
            await self.box.load(source=self.source, class_name=self.class_name, tools=self.tools,
                                init_config=init_config, init_patch=init_patch, seed=SEED,
                                max_result_bytes=limits.max_result_bytes,
                                timeout=limits.load_timeout)
            self.loaded = True
        for call in calls:
            try:
                await self.box.call(call.name, call.arguments, timeout=limits.call_timeout)
            except RuntimeFault as exc:
                if exc.kind not in TOOL_FAILURES:
                    raise
        state: dict[str, Any] = await self.box.state(timeout=limits.call_timeout)
        return state


__all__ = ["ReplayError", "Replayer"]
