"""Server-sent events: a response writer and the frames it writes (a streamed reply's events are
relayed to it by gateway/http/stream_relay.py, keepalives included).

Back-pressure: aiohttp waits for the connection to take a write (`drain`) once 64 KB are buffered,
so a stream whose client reads slowly waits with it, holding what it passed to the last write. A
streamed reply's writes are one event each (a burst of upstream frames is one event); the
followers of a background run, whose frames may be megabytes each (a `response.*` event repeats
the Response object), write shared frames in FOLLOW_WRITE_BYTES pieces (`send_frames`) and are
dropped when a write stays untaken for their stall bound: the connection aborted, so nothing it
buffered is kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator, Sequence

from aiohttp import web

from gateway.errors import AgentGatewayError


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
        self.started = False  # the headers are committed: no HTTP status can be answered any more
        self._ready = False  # prepared: a write may go straight to the response
        self._preparing: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """Prepare the response once. Two writers may share a stream (its events and its
        keepalives, gateway/http/stream_relay.py): one that comes while the other prepares waits
        for it, rather than writing before the response is prepared."""
        if self._ready:
            return
        if self.started:
            if self._preparing is not None:
                await self._preparing
            if not self._ready:  # the other writer's prepare failed: the connection is gone
                raise ConnectionResetError("the stream's response could not be prepared")
            return
        self.started = True
        preparing = self._preparing = asyncio.get_running_loop().create_future()
        try:
            await self.response.prepare(self.request)
            self._ready = True
        finally:
            self._preparing = None
            if not preparing.done():
                preparing.set_result(None)

    async def send(self, body: bytes | memoryview) -> None:
        """Write frames built by `frames` / `named_frames` (the headers go with the first write)."""
        if body:
            if not self._ready:
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
