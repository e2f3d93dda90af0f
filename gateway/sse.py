"""Server-sent events: a response writer, and a keepalive wrapper for slow event sources."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from aiohttp import web

T = TypeVar("T")


class Keepalive:
    """Yielded by `with_keepalive` when the source stayed silent for one interval."""


KEEPALIVE = Keepalive()


async def with_keepalive(source: AsyncIterator[T], interval: float) -> AsyncIterator[T | Keepalive]:
    """Yield the source's items, and KEEPALIVE after every `interval` seconds without one.

    The pending `__anext__` is never cancelled by a timeout (that would tear the source down);
    it is cancelled, and the source closed, only when the consumer stops.
    """
    iterator = aiter(source)
    pending: asyncio.Future[Any] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(iterator))
            done, _ = await asyncio.wait({pending}, timeout=interval)
            if not done:
                yield KEEPALIVE
                continue
            try:
                item = pending.result()
            except StopAsyncIteration:
                return
            finally:
                pending = None
            yield item
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        closer = getattr(iterator, "aclose", None)
        if closer is not None:
            await closer()


class SSEWriter:
    """Writes `data:` frames (optionally with `event:` lines) to a prepared StreamResponse."""

    def __init__(self, request: web.Request, *, headers: dict[str, str] | None = None) -> None:
        self.request = request
        self.response = web.StreamResponse(
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
            await self.response.write("".join(f"data: {p}\n\n" for p in payloads).encode("utf-8"))

    async def comment(self, text: str = "keepalive") -> None:
        await self.start()
        await self.response.write(f": {text}\n\n".encode())

    async def finish(self) -> web.StreamResponse:
        await self.start()
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.response.write_eof()
        return self.response
