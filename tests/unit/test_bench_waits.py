"""`envscaler.bench.waits.within`: a wait of the benchmark that runs out says what it waited for and how
long; a timeout of the awaited work itself is not mistaken for it."""

from __future__ import annotations

import asyncio

import pytest

from envscaler.bench.waits import WaitExpired, within


async def test_a_wait_that_runs_out_names_itself_and_its_bound() -> None:
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    with pytest.raises(WaitExpired, match=r"^sandbox hosts: 3 live: not done within 0.05 s$"):
        await within(0.05, "sandbox hosts: 3 live", never)
    assert never.cancelled()  # nothing is left waiting


async def test_the_result_and_the_work_s_own_errors_pass_through() -> None:
    async def answer() -> int:
        return 42

    async def own_timeout() -> None:
        raise TimeoutError("the call's own deadline")

    assert await within(10, "an answer", answer()) == 42
    with pytest.raises(TimeoutError, match="the call's own deadline"):  # not a WaitExpired
        await within(10, "a call", own_timeout())
