"""Every wait of a benchmark run is bounded, and one that runs out says what it waited for.

A run on a busy machine (other gateways' containers, an engine slow to answer) must stop with a
reason rather than wait at 0% CPU for ever; `envscaler.bench.run` then removes what the run started.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class WaitExpired(RuntimeError):
    """A wait of the run passed its bound; the message names the wait and the bound."""


async def within(seconds: float, what: str, awaitable: Awaitable[T]) -> T:
    """``awaitable``'s result, or `WaitExpired` ("<what>: not done within N s") after
    ``seconds``."""
    bound = asyncio.timeout(seconds)
    try:
        async with bound:
            return await awaitable
    except TimeoutError:
        if bound.expired():  # not a timeout of the awaitable's own
            raise WaitExpired(f"{what}: not done within {seconds:g} s") from None
        raise
