"""Server-sent events: a response writer, and a keepalive wrapper for slow event sources."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TypeVar

from aiohttp import web

T = TypeVar("T")


class Keepalive:
    """Yielded by the keepalive wrappers when the source stayed silent for one interval."""


KEEPALIVE = Keepalive()


class LastBatch(list[T]):
    """The source's final items (it has ended cleanly): nothing follows, so a writer can send them
    with the end of the body in one write."""


#: Most items the source may run ahead of the consumer (back-pressure for a slow client).
MAX_BATCH = 64


class _Wakeup:
    """One waiter at a time, woken by `set()` or by its timeout. A bare future and one timer per
    wait: `asyncio.Event` plus `asyncio.timeout` (a Timeout object, a task-cancel on expiry) cost
    several times that, and a stream waits once per batch."""

    __slots__ = ("_loop", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiter: asyncio.Future[bool] | None = None

    def set(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    async def wait(self, timeout: float | None) -> bool:
        """True when woken by `set()`, False when `timeout` seconds (if any) passed first."""
        waiter = self._waiter = self._loop.create_future()
        timer = self._loop.call_later(timeout, _expire, waiter) if timeout is not None else None
        try:
            return await waiter
        finally:
            if timer is not None:
                timer.cancel()
            self._waiter = None


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


async def batched_with_keepalive(
    source: AsyncIterator[T], interval: float, *, max_batch: int = MAX_BATCH, first_alone: bool = False
) -> AsyncGenerator[list[T] | Keepalive, None]:
    """Yield the source's items in lists (all it has produced since the last list, so that a
    burst, e.g. an upstream's buffered chunks, can leave in one write), and KEEPALIVE after every
    `interval` seconds without one. A list never waits for more items once it holds one. The
    list that holds the source's last items (when it ended without an error) is a `LastBatch`.

    `first_alone`: the first item leaves in a list of its own, before the source goes on with
    the rest of its burst. The time to the first byte is then that of one upstream chunk, not of
    the whole burst (at concurrency 1 a 50-chunk burst took ~0.5 ms to parse, relay and encode).

    The source runs in one task for the whole stream, never cancelled by a keepalive timeout (that
    would tear it down); it is cancelled, and the source closed, only when the consumer stops.
    One task per stream rather than one per item: the per-item task and `asyncio.wait` were a
    sixth of the gateway's CPU on a 50-chunk stream.
    """
    loop = asyncio.get_running_loop()
    items: list[T] = []
    ended: list[BaseException | None] = []  # [None] at the source's end, [exc] when it raised
    wake = _Wakeup(loop)  # set by the producer: there is something to take
    # set by the consumer: the producer may run ahead again (rarely waited on). Not an
    # asyncio.Event: its waiter deque alone is ~0.7 KB, held by every open stream.
    room = _Wakeup(loop)

    async def produce() -> None:
        try:
            if first_alone:
                async for item in source:
                    items.append(item)
                    wake.set()
                    # one loop turn: the consumer takes this item before the source goes on
                    await asyncio.sleep(0)
                    break
            async for item in source:
                items.append(item)
                wake.set()
                if len(items) >= max_batch:
                    await room.wait(None)
        except BaseException as exc:
            ended.append(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            ended.append(None)
        finally:
            wake.set()

    producer = loop.create_task(produce())
    try:
        while True:
            if not items and not ended and not await wake.wait(interval):
                yield KEEPALIVE
                continue
            if items:
                batch = LastBatch(items) if ended and ended[0] is None else items[:]
                items.clear()
                room.set()
                yield batch
            elif ended:
                if ended[0] is not None:
                    raise ended[0]
                return
    finally:
        if not producer.done():
            producer.cancel()
            with contextlib.suppress(BaseException):
                await producer
        closer = getattr(source, "aclose", None)
        if closer is not None:
            await closer()


class _EventStreamResponse(web.StreamResponse):
    """A StreamResponse whose headers leave with the first body write instead of a write of their
    own at `prepare()` (what aiohttp's `web.Response` does; on versions without the switch the
    headers simply go out at `prepare()` as before). The writer only prepares right before it
    writes, so nothing is held back: one syscall fewer per stream."""

    _send_headers_immediately = False


def _frames(payloads: list[str] | tuple[str, ...]) -> bytes:
    # one join instead of a formatted string per frame; payloads hold no newline (JSON, one line)
    return ("data: " + "\n\ndata: ".join(payloads) + "\n\n").encode("utf-8")


def _named_frames(events: list[tuple[str, str]]) -> bytes:
    """`event:` + `data:` frames for (event name, payload) pairs, in one string."""
    return "".join([f"event: {name}\ndata: {payload}\n\n" for name, payload in events]).encode("utf-8")


class SSEWriter:
    """Writes `data:` frames (optionally with `event:` lines) to a prepared StreamResponse."""

    def __init__(self, request: web.Request, *, headers: dict[str, str] | None = None) -> None:
        self.request = request
        self.response = _EventStreamResponse(
            status=200,
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
                **(headers or {}),
            },
        )
        self.started = False

    async def start(self) -> None:
        if not self.started:
            self.started = True
            await self.response.prepare(self.request)

    async def data(self, payload: str, event: str | None = None) -> None:
        await self.start()
        frame = f"event: {event}\ndata: {payload}\n\n" if event else f"data: {payload}\n\n"
        await self.response.write(frame.encode("utf-8"))

    async def data_many(self, payloads: list[str]) -> None:
        if payloads:
            await self.start()
            await self.response.write(_frames(payloads))

    async def events_many(self, events: list[tuple[str, str]]) -> None:
        """Frames with `event:` lines, (name, payload) pairs, in one write."""
        if events:
            await self.start()
            await self.response.write(_named_frames(events))

    async def comment(self, text: str = "keepalive") -> None:
        await self.start()
        await self.response.write(f": {text}\n\n".encode())

    async def finish(self, *payloads: str, events: list[tuple[str, str]] | None = None) -> web.StreamResponse:
        """End the body; `events` (name, payload pairs) and then `payloads` (e.g. the final
        `[DONE]`) leave in the same write as the end of the chunked body. A client gone by then
        raises ConnectionError, as `data()` would."""
        await self.start()
        if payloads or events:
            body = (_named_frames(events) if events else b"") + (_frames(payloads) if payloads else b"")
            await self.response.write_eof(body)
            return self.response
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.response.write_eof()
        return self.response
