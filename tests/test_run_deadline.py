"""runs.Deadline: the run timeout's semantics are asyncio.timeout's."""

from __future__ import annotations

import asyncio

import pytest

from gateway.http.runs import Deadline


async def test_a_body_past_its_deadline_leaves_as_timeout_error():
    with pytest.raises(TimeoutError):
        async with Deadline(0.01):
            await asyncio.sleep(5)
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await asyncio.sleep(0)  # no cancellation left pending for the next await


async def test_a_body_that_ends_in_time_is_never_cancelled_later():
    async with Deadline(0.02):
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)


async def test_a_cancellation_from_outside_stays_a_cancellation():
    async def body() -> None:
        async with Deadline(5):
            await asyncio.sleep(5)

    task = asyncio.create_task(body())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_deadlines_nest_and_the_inner_one_fires():
    async with Deadline(5):
        with pytest.raises(TimeoutError):
            async with Deadline(0.01):
                await asyncio.sleep(5)
        await asyncio.sleep(0)
