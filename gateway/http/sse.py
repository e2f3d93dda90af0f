"""Server-sent events: a response writer, and a keepalive wrapper for slow event sources.

Back-pressure: aiohttp waits for the connection to take a write (`drain`) once 64 KB are buffered,
so a stream whose client reads slowly waits with it, holding what it passed to the last write. A
streamed reply's writes are one batch of events each; the followers of a background run, whose
frames may be megabytes each (a `response.*` event repeats the Response object), write shared
frames in FOLLOW_WRITE_BYTES pieces (`send_frames`) and are dropped when a write stays untaken
for their stall bound: the connection aborted, so nothing it buffered is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Iterator, Sequence
from typing import TypeVar

from aiohttp import web

from gateway.errors import AgentGatewayError
from gateway.http.wakeup import Wakeup

T = TypeVar("T")


class Keepalive:
    """Yielded by the keepalive wrappers when the source stayed silent for one interval."""


KEEPALIVE = Keepalive()


class LastBatch(list[T]):
    """The source's final items (it has ended cleanly): nothing follows, so a writer can send them
    with the end of the body in one write."""


#: Most items the source may run ahead of the consumer (back-pressure for a slow client).
MAX_BATCH = 64


async def batched_with_keepalive(
    source: AsyncIterator[T], interval: float, *, max_batch: int = MAX_BATCH, first_alone: bool = False
) -> AsyncGenerator[list[T] | Keepalive, None]:
    """Yield the source's items in lists (all it has produced since the last list, so that a
    burst, e.g. an upstream's buffered chunks, can leave in one write), and KEEPALIVE after every
    `interval` seconds without one. A list never waits for more items once it holds one. The
    list that holds the source's last items (when it ended without an error) is a `LastBatch`.

    `first_alone`: the first item leaves in a list of its own, before the source goes on with
    the rest of its burst. The time to the first byte is then that of one upstream chunk, not of
    the whole burst (parsing, relaying and encoding a 50-chunk burst is measurable at concurrency 1;
    bench/README.md).

    The source runs in one task for the whole stream, never cancelled by a keepalive timeout (that
    would tear it down); it is cancelled, and the source closed, only when the consumer stops.
    One task per stream rather than one per item: the per-item task and `asyncio.wait` were a
    sixth of the gateway's CPU on a 50-chunk stream.
    """
    loop = asyncio.get_running_loop()
    items: list[T] = []
    ended: list[BaseException | None] = []  # [None] at the source's end, [exc] when it raised
    wake = Wakeup(loop)  # set by the producer: there is something to take
    # set by the consumer: the producer may run ahead again (rarely waited on)
    room = Wakeup(loop)

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
                # the consumer waits only on an empty list: one wake-up per batch, not per item
                if len(items) == 1:
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


#: A comment line every SSE parser ignores: keeps proxies and clients from timing out a quiet stream.
KEEPALIVE_FRAME = b": keepalive\n\n"


def frames(payloads: list[str]) -> bytes:
    """`data:` frames for `payloads`, in one string (nothing for none)."""
    if not payloads:
        return b""
    # one join instead of a formatted string per frame; payloads hold no newline (JSON, one line)
    return ("data: " + "\n\ndata: ".join(payloads) + "\n\n").encode("utf-8")


def named_frames(events: list[tuple[str, str]]) -> bytes:
    """`event:` + `data:` frames for (event name, payload) pairs, in one string."""
    return "".join([f"event: {name}\ndata: {payload}\n\n" for name, payload in events]).encode("utf-8")


#: the most bytes one write of a follower's stream holds: small frames are joined up to it, a
#: larger one goes in views of itself (aiohttp copies each write once, with its chunk header)
FOLLOW_WRITE_BYTES = 64 * 1024


def writes(frames: Sequence[bytes], limit: int = FOLLOW_WRITE_BYTES) -> Iterator[bytes | memoryview]:
    """`frames` as writes of at most `limit` bytes each (a frame of `limit` or less is never cut)."""
    pending: list[bytes] = []
    size = 0
    for frame in frames:
        if pending and size + len(frame) > limit:
            yield b"".join(pending)
            pending, size = [], 0
        if len(frame) > limit:
            view = memoryview(frame)
            for start in range(0, len(frame), limit):
                yield view[start:start + limit]
        else:
            pending.append(frame)
            size += len(frame)
    if pending:
        yield b"".join(pending)


class StalledClientError(AgentGatewayError, ConnectionError):
    """The client took no write for the stream's stall bound: its connection was aborted."""


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

    async def send(self, body: bytes | memoryview) -> None:
        """Write frames built by `frames` / `named_frames` (the headers go with the first write)."""
        if body:
            await self.start()
            await self.response.write(body)

    async def send_frames(self, frames: Sequence[bytes], *, stall: float) -> None:
        """Write `frames` without copying them whole (FOLLOW_WRITE_BYTES at a time); a client that
        takes no write for `stall` seconds is dropped (StalledClientError)."""
        for body in writes(frames):
            await self._taken(self.send(body), stall)

    async def finish_within(self, stall: float) -> web.StreamResponse:
        """`finish()`, dropping a client that does not take the end within `stall` seconds."""
        await self._taken(self.finish(), stall)
        return self.response

    async def _taken(self, write: Awaitable[object], stall: float) -> None:
        try:
            async with asyncio.timeout(stall):
                await write
        except TimeoutError:
            transport = self.request.transport
            if transport is not None:
                transport.abort()  # not close(): that would wait for the client to read the buffer
            raise StalledClientError(f"the client took no write for {stall:g} s") from None

    async def finish(self, body: bytes = b"") -> web.StreamResponse:
        """End the body; `body` (the closing frames) leaves in the same write as the end of the
        chunked body. A client gone by then raises ConnectionError, as `send()` would."""
        await self.start()
        await self.response.write_eof(body)
        return self.response
