"""Many sessions at once, with bounded concurrency: RL rollouts open hundreds together."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from envscaler_client.aio import AsyncEnvClient, AsyncSession

T = TypeVar("T")


@dataclass(frozen=True)
class SessionSpec:
    """The arguments of `AsyncEnvClient.create_session`."""

    env: str
    scenario: str | None = None
    init_config: Mapping[str, Any] | None = None
    seed: int = 0


async def run_sessions(
        client: AsyncEnvClient, specs: Iterable[SessionSpec | Mapping[str, Any]],
        worker: Callable[[AsyncSession], Awaitable[T]], *, concurrency: int = 8,
        on_result: Callable[[int, T | Exception], None] | None = None) -> list[T | Exception]:
    """Open a session per spec, run ``worker`` on it, and close it, with at most ``concurrency``
    sessions open at a time.

    Results come back in the order of ``specs``. A spec whose session could not be opened, or
    whose worker raised, gives its exception in place of a result: one failure never cancels
    the others. ``on_result(index, result)`` is called as each one finishes (a progress bar).
    Cancelling the whole run cancels the workers, and their sessions are still closed.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    semaphore = asyncio.Semaphore(concurrency)

    async def one(index: int, spec: SessionSpec) -> T | Exception:
        async with semaphore:
            result: T | Exception
            try:
                async with client.create_session(spec.env, spec.scenario, spec.init_config,
                                                 spec.seed) as session:
                    result = await worker(session)
            except Exception as exc:  # noqa: BLE001 - the caller gets it in the results
                result = exc
        if on_result is not None:
            on_result(index, result)
        return result

    normalized = [spec if isinstance(spec, SessionSpec) else SessionSpec(**spec) for spec in specs]
    return list(await asyncio.gather(*(one(index, spec) for index, spec in enumerate(normalized))))
