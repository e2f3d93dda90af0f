"""AGENT_RUN_TIMEOUT for whole runs from one shared timer (gateway/runs/deadlines.py): what a
run sees must be what `asyncio.timeout` gives it."""

from __future__ import annotations

import asyncio

import pytest

from gateway.runs.deadlines import RunDeadlines


async def run_for(deadlines: RunDeadlines, seconds: float) -> str:
    """As gateway/http/run_loop.py run_whole uses it: 'done', or TimeoutError past the deadline."""
    run = deadlines.enter()
    try:
        await asyncio.sleep(seconds)
    except BaseException as exc:
        if deadlines.leave(run, exc):
            raise TimeoutError from exc
        raise
    deadlines.leave(run)
    return "done"


async def test_a_run_past_its_deadline_times_out_and_its_task_is_not_left_cancelling():
    deadlines = RunDeadlines(0.05)

    async def outer() -> tuple[str, int]:
        try:
            await run_for(deadlines, 5)
        except TimeoutError:
            return "timed out", asyncio.current_task().cancelling()  # type: ignore[union-attr]
        return "done", -1

    assert await asyncio.wait_for(outer(), 2) == ("timed out", 0)


async def test_runs_started_one_after_another_each_end_at_their_own_deadline():
    deadlines = RunDeadlines(0.2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    ended: dict[str, float] = {}

    async def one(name: str, delay: float, length: float) -> str:
        await asyncio.sleep(delay)
        try:
            return await run_for(deadlines, length)
        except TimeoutError:
            ended[name] = loop.time() - started
            return "timed out"

    results = await asyncio.gather(one("a", 0, 5), one("quick", 0.02, 0.01), one("b", 0.1, 5), one("c", 0.15, 0.1))
    assert results == ["timed out", "done", "timed out", "done"]
    assert 0.19 <= ended["a"] < 0.29 and 0.29 <= ended["b"] < 0.4  # each its own 0.2 s, none cut early


async def test_a_run_that_ended_is_never_cancelled_later():
    deadlines = RunDeadlines(0.05)
    assert await run_for(deadlines, 0) == "done"
    await asyncio.sleep(0.1)  # its deadline passes while the task goes on with other work
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_cancellation_from_elsewhere_stays_a_cancellation():
    deadlines = RunDeadlines(5)
    task = asyncio.create_task(run_for(deadlines, 5))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_run_cancelled_from_elsewhere_as_its_deadline_passes_stays_cancelled():
    deadlines = RunDeadlines(0.05)
    task = asyncio.create_task(run_for(deadlines, 5))
    await asyncio.sleep(0.045)
    task.cancel()  # the client left at about the deadline: both asked for the task's cancellation
    with pytest.raises(asyncio.CancelledError):
        await task
