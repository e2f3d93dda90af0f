"""The stream relay (gateway/http/stream_relay.py) over a real aiohttp server: each event leaves
as it comes, keepalives fill silences, failures come after what went before, a client that leaves
closes the source, and the last event leaves with the end of the body."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web

from gateway.agent.events import Finished
from gateway.http.sse import SSEWriter, frames
from gateway.http.stream_relay import StreamRelay
from tests.support.resources import no_leaks


class Source:
    """An async generator standing in for the agent: scripted items, pauses (floats), failures,
    and gates (asyncio.Event: wait until the test sets it); records its closing."""

    def __init__(self, script: list[Any]) -> None:
        self.script = script
        self.closed = asyncio.Event()

    async def run(self) -> Any:
        try:
            for step in self.script:
                if isinstance(step, float):
                    await asyncio.sleep(step)
                elif isinstance(step, asyncio.Event):
                    await step.wait()
                elif isinstance(step, Exception):
                    raise step
                else:
                    yield step
        finally:
            self.closed.set()


def encode(events: list[Any]) -> bytes:
    return frames(["finished" if isinstance(event, Finished) else str(event) for event in events])


async def relay_server(aiohttp_client: Callable[..., Any], source: Source, interval: float = 5.0,
                       prepare_delay: float = 0.0) -> tuple[Any, list[BaseException]]:
    """A server whose one stream relays `source`, then writes `data: end` (or `data: failed`)."""
    failures: list[BaseException] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        sse = SSEWriter(request)
        opened: list[bool] = []

        def opening() -> bytes:
            if opened:
                return b""
            opened.append(True)
            return frames(["open"])

        relay = StreamRelay(sse, source.run(), encode, opening, interval)
        try:
            await relay.run()
        except Exception as exc:  # noqa: BLE001 - recorded for the test, the stream ends like a failure
            failures.append(exc)
            if isinstance(exc, ConnectionError):
                return sse.response
            await sse.finish(relay.tail + frames(["failed"]))
            return sse.response
        await sse.finish(opening() + relay.tail + frames(["end"]))
        return sse.response

    async def slow_prepare(request: web.Request, response: web.StreamResponse) -> None:
        await asyncio.sleep(prepare_delay)

    app = web.Application()
    app.router.add_get("/", handler)
    if prepare_delay:
        app.on_response_prepare.append(slow_prepare)
    return await aiohttp_client(app), failures


def payloads(raw: str) -> list[str]:
    return [block.removeprefix("data: ") for block in raw.split("\n\n") if block]


async def test_each_event_reaches_the_client_before_the_source_goes_on(aiohttp_client):
    gate = asyncio.Event()
    client, _ = await relay_server(aiohttp_client, Source(["a", gate, "b"]))
    async with client.get("/") as resp:
        first = await resp.content.readuntil(b"data: a\n\n")  # would hang if "a" waited for company
        gate.set()
        rest = await resp.text()
    assert payloads(first.decode() + rest) == ["open", "a", "b", "end"]


async def test_silence_is_filled_with_keepalives_and_the_next_event_is_not_lost(aiohttp_client):
    client, _ = await relay_server(aiohttp_client, Source(["a", 0.35, "late"]), interval=0.1)
    raw = await (await client.get("/")).text()
    got = payloads(raw)
    assert got[:2] == ["open", "a"] and got[-2:] == ["late", "end"]
    assert got.count(": keepalive") >= 2 and set(got[2:-2]) == {": keepalive"}


async def test_a_keepalive_before_any_event_opens_the_stream(aiohttp_client):
    client, _ = await relay_server(aiohttp_client, Source([0.25, "a"]), interval=0.1)
    got = payloads(await (await client.get("/")).text())
    assert got[:2] == ["open", ": keepalive"] and got[-2:] == ["a", "end"]


async def test_a_source_failure_comes_after_the_events_before_it(aiohttp_client):
    client, failures = await relay_server(aiohttp_client, Source(["a", 0.02, ValueError("boom")]))
    got = payloads(await (await client.get("/")).text())
    assert got == ["open", "a", "failed"]
    assert [str(exc) for exc in failures] == ["boom"]


async def test_the_finished_event_leaves_with_the_end_of_the_body(aiohttp_client):
    gate = asyncio.Event()
    client, _ = await relay_server(aiohttp_client, Source(["a", Finished("stop", ()), gate]))
    async with client.get("/") as resp:
        first = await resp.content.readuntil(b"data: a\n\n")
        # the finished frame is held back while the source still runs: it leaves with the end
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(resp.content.readany(), 0.2)
        gate.set()
        rest = await resp.text()
    assert payloads(first.decode() + rest) == ["open", "a", "finished", "end"]


async def test_a_client_that_leaves_closes_the_source(aiohttp_client):
    source = Source(["a", 30.0, "never"])
    client, _ = await relay_server(aiohttp_client, source, interval=0.05)
    async with client.get("/") as resp:
        await resp.content.readuntil(b"data: a\n\n")
        resp.close()  # the client leaves mid-stream: the next keepalive's write fails
    await asyncio.wait_for(source.closed.wait(), 5)


async def test_a_keepalive_and_the_first_event_during_a_slow_prepare_both_arrive_in_order(aiohttp_client):
    # the keepalive starts preparing the response (slowed down by a prepare hook), the first event
    # comes meanwhile: it waits for the prepare instead of writing before it
    client, failures = await relay_server(aiohttp_client, Source([0.12, "a"]), interval=0.1, prepare_delay=0.2)
    got = payloads(await (await client.get("/")).text())
    assert got[:2] == ["open", ": keepalive"] and got[-2:] == ["a", "end"]
    assert set(got[2:-2]) <= {": keepalive"}  # another may go while "a" waited for the prepare
    assert failures == []


async def test_a_stream_that_ends_cleanly_leaves_no_task_behind(aiohttp_client):
    source = Source(["a", "b"])
    client, _ = await relay_server(aiohttp_client, source)
    async with no_leaks(fd_slack=4):
        assert payloads(await (await client.get("/")).text()) == ["open", "a", "b", "end"]
    assert source.closed.is_set()
