"""The keepalive wrapper around agent events: bursts, silence, failures and early stops."""

from __future__ import annotations

import asyncio

import pytest

from gateway.http.sse import KEEPALIVE, LastBatch, batched_with_keepalive


class Source:
    """An async generator standing in for the agent: scripted items and pauses, records closing."""

    def __init__(self, script):
        self.script = script
        self.closed = False

    async def run(self):
        try:
            for step in self.script:
                if isinstance(step, float):
                    await asyncio.sleep(step)
                elif isinstance(step, Exception):
                    raise step
                else:
                    yield step
        finally:
            self.closed = True


async def collect(iterator):
    return [item async for item in iterator]


async def test_a_burst_of_events_arrives_as_one_batch():
    source = Source(["a", "b", "c", 0.05, "d"])
    batches = await collect(batched_with_keepalive(source.run(), interval=5))
    assert batches == [["a", "b", "c"], ["d"]]


async def test_a_batch_is_capped_so_the_source_cannot_run_far_ahead():
    source = Source(list(range(10)))
    batches = await collect(batched_with_keepalive(source.run(), interval=5, max_batch=4))
    assert [len(b) for b in batches] == [4, 4, 2]
    assert [i for b in batches for i in b] == list(range(10))


async def test_silence_yields_keepalives_without_losing_the_next_item():
    source = Source([0.25, "late"])
    items = await collect(batched_with_keepalive(source.run(), interval=0.1))
    assert items[:2] == [KEEPALIVE, KEEPALIVE]
    assert items[-1] == ["late"]


async def test_a_source_failure_comes_after_the_items_before_it():
    source = Source(["a", 0.02, ValueError("boom")])
    seen = []
    with pytest.raises(ValueError, match="boom"):
        async for batch in batched_with_keepalive(source.run(), interval=5):
            seen.append(batch)
    assert seen == [["a"]]


async def test_stopping_early_closes_the_source():
    source = Source(["a", 10.0, "never"])
    events = batched_with_keepalive(source.run(), interval=5)
    assert await anext(events) == ["a"]
    await events.aclose()
    assert source.closed


async def test_the_last_batch_of_a_clean_end_is_marked_as_last():
    source = Source(["a", 0.02, "b", "c"])
    batches = await collect(batched_with_keepalive(source.run(), interval=5))
    assert batches == [["a"], ["b", "c"]]
    assert [isinstance(b, LastBatch) for b in batches] == [False, True]


async def test_a_failing_source_never_yields_a_last_batch():
    source = Source(["a", 0.02, "b", ValueError("boom")])
    seen = []
    with pytest.raises(ValueError, match="boom"):
        async for batch in batched_with_keepalive(source.run(), interval=5):
            seen.append(batch)
    assert seen == [["a"], ["b"]]
    assert not any(isinstance(b, LastBatch) for b in seen)


async def test_first_alone_hands_out_the_first_item_before_the_rest_of_its_burst():
    source = Source(["a", "b", "c", 0.02, "d"])
    batches = await collect(batched_with_keepalive(source.run(), interval=5, first_alone=True))
    assert batches == [["a"], ["b", "c"], ["d"]]
    assert isinstance(batches[-1], LastBatch)
