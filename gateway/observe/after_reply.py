"""`AfterReply`: the bookkeeping a reply leaves behind (its access line, its metrics), run when the
gateway would otherwise wait, not between a reply and the next request on the same connection.

Scheduled with `call_soon`, that work ran right after the reply's task step, before the event loop
next read its sockets (uvloop runs the ready callbacks before it polls): a keep-alive client that
sent its next request at once (a benchmark at concurrency 1, an SDK's next call) waited for all of
it. Here it is queued and run
- when the next request is under way: for an agent run, as its model call is sent
  (`model_call_starts`, from the observer), else as it starts (`request_started`, from the front
  door); two loop turns later, so that the task step and what it started run first (the upstream
  request leaves: aiohttp's client on Python 3.11 writes the body in a task of its own, a turn
  later) and the work overlaps the wait for the model, or
- when no request has started for `delay` seconds (a timer: the last request of a burst), or
- at once when `max_pending` items are queued (a bound under steady load), or
- before anything that reads what it records (`run()`: the metrics scrape).

Each item runs in the context it was queued in (the request's id and key for the access line), as
`call_soon` ran it. An item that raises is logged and the rest still run.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from typing import TypeVarTuple, Unpack

log = logging.getLogger("agent_gateway")

Ts = TypeVarTuple("Ts")

#: Seconds without a new request after which queued work runs anyway: the access log's own batching
#: delay (observe/batched_log.py), so a line is written at most twice that after its reply; long
#: enough that a client's next request (tens of microseconds away, or milliseconds under a profiler)
#: comes first.
DELAY = 0.05
#: Items queued at most before they run regardless.
MAX_PENDING = 256


class AfterReply:
    __slots__ = ("delay", "max_pending", "_pending", "_loop", "_timer", "_starts", "_armed_at", "_soon")

    def __init__(self, *, delay: float = DELAY, max_pending: int = MAX_PENDING) -> None:
        self.delay = delay
        self.max_pending = max_pending
        self._pending: list[tuple[contextvars.Context | None, Callable[..., None], tuple[object, ...]]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._starts = 0  # requests started so far (request_started calls)
        self._armed_at = 0  # _starts when the timer was set
        self._soon = False  # a run is scheduled with call_soon

    def add(self, record: Callable[[Unpack[Ts]], None], *args: *Ts) -> None:
        """Queue `record(*args)`, to run in the current context later. At once when no loop runs
        (an agent generator closed at interpreter exit)."""
        try:
            loop = self._loop = asyncio.get_running_loop()
        except RuntimeError:
            record(*args)
            return
        self._queue(loop, contextvars.copy_context(), record, args)

    def add_figures(self, record: Callable[[Unpack[Ts]], None], *args: *Ts) -> None:
        """As `add`, for work that reads no context variable (a metric from its arguments): run
        as it is, without a copy of the context to run it in."""
        try:
            loop = self._loop = asyncio.get_running_loop()
        except RuntimeError:
            record(*args)
            return
        self._queue(loop, None, record, args)

    def _queue(self, loop: asyncio.AbstractEventLoop, context: contextvars.Context | None,
               record: Callable[..., None], args: tuple[object, ...]) -> None:
        pending = self._pending
        pending.append((context, record, args))
        if len(pending) >= self.max_pending:
            self._run_soon(loop)
        elif self._timer is None:
            self._armed_at = self._starts
            self._timer = loop.call_later(self.delay, self._on_timer)

    def request_started(self, *, run_queued: bool = True) -> None:
        """A request has come in: what is queued runs once its task waits, unless `run_queued` is
        false (an agent run: its model call is the moment, `model_call_starts`)."""
        self._starts += 1
        if run_queued:
            self.model_call_starts()

    def model_call_starts(self) -> None:
        """The caller is about to send a request and wait for the reply: what is queued runs then."""
        if self._pending and not self._soon and self._loop is not None:
            self._run_soon(self._loop)

    def _run_soon(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._soon:
            self._soon = True
            loop.call_soon(self._next_turn, loop)

    def _next_turn(self, loop: asyncio.AbstractEventLoop) -> None:
        # callbacks scheduled in the same turn as this one (a task the request's step created) come
        # before the one scheduled here: the run waits for them
        loop.call_soon(self._run_scheduled)

    def _run_scheduled(self) -> None:
        self._soon = False
        self.run()

    def _on_timer(self) -> None:
        self._timer = None
        if not self._pending:
            return
        if self._starts != self._armed_at and self._loop is not None:
            # a request came in meanwhile (and ran what was queued then): wait for a quiet spell again
            self._armed_at = self._starts
            self._timer = self._loop.call_later(self.delay, self._on_timer)
            return
        self.run()

    def run(self) -> None:
        """Run everything queued, now."""
        while self._pending:
            pending, self._pending = self._pending, []
            for context, record, args in pending:
                try:
                    if context is None:
                        record(*args)
                    else:
                        context.run(record, *args)
                except Exception:  # one figure's bug must not lose the others
                    log.exception("bookkeeping after a reply failed")
