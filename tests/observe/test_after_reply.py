"""A reply's bookkeeping waits for the next request to be under way (or a quiet spell), not the
other way round: gateway/observe/after_reply.py, on a running event loop."""

from __future__ import annotations

import asyncio
import contextvars
import logging

from gateway.observe.after_reply import AfterReply

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="-")


async def turns(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def test_work_does_not_run_on_the_next_loop_turns_but_once_the_next_request_waits():
    after = AfterReply(delay=60.0)
    done: list[str] = []
    after.add(done.append, "first reply")
    await turns(5)  # where call_soon would have run it, ahead of whatever the loop reads next
    assert done == []

    async def upstream_body() -> None:  # what aiohttp's client starts to write a request body
        done.append("upstream request sent")

    async def next_request() -> None:
        after.request_started()
        assert done == []  # not inside the request's own step
        asyncio.get_running_loop().create_task(upstream_body())
        await asyncio.sleep(0)  # the request waits (for its upstream) ...
        done.append("next request resumed")

    await next_request()
    await turns(2)
    # ... and the queued work ran after what the request's step started, not before it
    assert done == ["upstream request sent", "next request resumed", "first reply"]


async def test_an_agent_run_leaves_the_work_to_its_model_call():
    after = AfterReply(delay=60.0)
    done: list[str] = []
    after.add(done.append, "first reply")
    after.request_started(run_queued=False)  # an agent run: it reads its body, builds its model call ...
    await turns(5)
    assert done == []
    after.model_call_starts()  # ... and sends it
    await turns(2)
    assert done == ["first reply"]


async def test_the_last_reply_of_a_burst_is_recorded_after_a_quiet_spell():
    after = AfterReply(delay=0.02)
    done: list[str] = []
    after.add(done.append, "last reply of a burst")
    for _ in range(100):  # no request follows: the timer runs it
        if done:
            break
        await asyncio.sleep(0.01)
    assert done == ["last reply of a burst"]


async def test_each_item_runs_in_the_context_it_was_queued_in():
    after = AfterReply(delay=60.0)
    seen: list[str] = []

    async def request(name: str) -> None:
        WHO.set(name)
        after.add(lambda: seen.append(WHO.get()))

    await asyncio.gather(asyncio.create_task(request("a")), asyncio.create_task(request("b")))
    after.run()
    assert sorted(seen) == ["a", "b"]


async def test_a_full_queue_runs_without_waiting_and_a_failing_item_spares_the_rest(caplog):
    after = AfterReply(delay=60.0, max_pending=3)
    done: list[int] = []

    def fail() -> None:
        raise RuntimeError("a bug in one figure")

    after.add(done.append, 1)
    after.add(fail)
    after.add(done.append, 3)  # the third: runs once this step ends
    with caplog.at_level(logging.ERROR):
        await turns(2)
    assert done == [1, 3]
    assert "bookkeeping after a reply failed" in caplog.text


def test_without_a_running_loop_work_runs_at_once():
    done: list[str] = []
    AfterReply().add(done.append, "at exit")
    assert done == ["at exit"]
