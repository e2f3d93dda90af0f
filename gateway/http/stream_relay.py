"""A streamed reply's relay: the agent's events to SSE writes, and keepalives while it is silent.

The events are read, encoded and written by one task of their own (`StreamRelay._relay`), each as
it comes: an upstream frame costs one task wake-up (its bytes arriving) between the socket and the
client's write. The handler's task only waits for that task's end, waking after `interval` seconds
without an event to write a keepalive comment (`: keepalive`), which keeps proxies and clients
from timing out a quiet stream (a tool round, a report being written). A keepalive never cancels
or interrupts the event source: the source is cancelled, and closed, only when the relay stops
(the client gone, the run timeout, the handler cancelled).

The stream's first bytes (`opening`: the reply's opening frames) go with its first write of any
kind. The last event, `Finished`, is not written: its frames wait in `tail` to leave with the
closing frames and the end of the body in one write (`run_streamed`). Back-pressure: the relay
awaits each write, so a client that reads slowly holds the upstream's reading with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Callable, Iterable

from gateway.agent.events import AgentEvent, Finished, Progress, ToolCallStarted
from gateway.http.sse import KEEPALIVE_FRAME, SSEWriter
from gateway.observe.metrics import FIRST_BYTE_AT


def did_work(events: Iterable[AgentEvent]) -> bool:
    """The one rule for "a retry would repeat work": one of the agent's own tools was called.

    A retry always repeats the model call; that is what a retry is for, and what a client that
    retries pays for knowingly. What it must not repeat is what the gateway did on the client's
    behalf: a web search or extract costs money, counts against the provider's rate limit and is
    seen by third parties. So a failure after a `ToolCallStarted` says `x-should-retry: false`.

    Text the model wrote is not work in this sense: in a whole reply the client never saw it (the
    error replaces it), and in a stream it is already on the wire, past the status line, where no
    header can be sent any more and the SDK does not retry anyway; there the failure is the error
    frame. A call to a client tool runs nothing here: it ends the turn.
    """
    return any(isinstance(event, ToolCallStarted) for event in events)


class StreamRelay:
    """`await run()`: relay `source` through `encode` to `sse` until it ends, raising what it raised
    (a failed write's ConnectionError included). Afterwards: `worked` (a `ToolCallStarted` came
    before the first byte went out: a retry would repeat work), `finished` (the `Finished` event,
    if one came) and `tail` (its frames, not yet written)."""

    __slots__ = ("sse", "_source", "_encode", "_opening", "_interval", "_loop", "_heard",
                 "worked", "finished", "tail")

    def __init__(self, sse: SSEWriter, source: AsyncIterator[AgentEvent],
                 encode: Callable[[list[AgentEvent]], bytes], opening: Callable[[], bytes],
                 interval: float) -> None:
        self.sse = sse
        self._source = source
        self._encode = encode
        self._opening = opening  # the stream's opening frames the first time, b"" after
        self._interval = interval
        self._loop = asyncio.get_running_loop()
        self._heard = self._loop.time()  # the last event (or keepalive): the silence's start
        self.worked = False
        self.finished: Finished | None = None
        self.tail = b""

    async def run(self) -> None:
        # The relay's task has a context of its own; the response is usually prepared there, and
        # the metrics' mark of a prepared stream (FIRST_BYTE_AT, set by the prepare hook) is read
        # by the front door in this task afterwards: carried back below, else a stream counts as a
        # whole reply and its open-streams gauge never comes down.
        context = contextvars.copy_context()
        relaying = self._loop.create_task(self._relay(), context=context)
        try:
            await self._keep_alive(relaying)
            relaying.result()  # its failure, raised here
        finally:
            first_byte = context.get(FIRST_BYTE_AT)
            if first_byte is not None and FIRST_BYTE_AT.get() is None:
                FIRST_BYTE_AT.set(first_byte)
            if not relaying.done():
                relaying.cancel()
                with contextlib.suppress(BaseException):
                    await relaying
            elif not relaying.cancelled():
                relaying.exception()  # retrieved: the handler is already leaving with its own error
            closer = getattr(self._source, "aclose", None)
            if closer is not None:
                await closer()

    async def _relay(self) -> None:
        sse, encode, opening, loop = self.sse, self._encode, self._opening, self._loop
        async for event in self._source:
            self._heard = loop.time()
            if not self.worked and not sse.started:  # read only while no byte is on the wire
                self.worked = did_work((event,))
            if isinstance(event, Finished):  # always the run's last event: it leaves with the end
                self.finished = event
                self.tail = opening() + encode([event])
                continue
            body = opening() + encode([event])
            if not body and type(event) is Progress:
                body = KEEPALIVE_FRAME  # progress the wire format has no event for: a sign of life all the same
            if body:
                await sse.send(body)

    async def _keep_alive(self, relaying: asyncio.Task[None]) -> None:
        """Until `relaying` ends: a keepalive after each `interval` without an event. One wake-up
        per interval at most, none per event (the relay only notes the time of each)."""
        loop = self._loop
        while not relaying.done():
            left = self._heard + self._interval - loop.time()
            if left > 0:
                await asyncio.wait((relaying,), timeout=left)
                continue
            self._heard = loop.time()
            await self.sse.send(self._opening() + KEEPALIVE_FRAME)
