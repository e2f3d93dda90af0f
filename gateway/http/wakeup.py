"""`Wakeup`: the one-waiter, timed wake-up the SSE batcher waits on once per batch.

A stand-in for `asyncio.Event` + `asyncio.timeout`, kept because it is measurably cheaper on the
streaming hot path (`bench/waits.py`, figures in `bench/README.md`) and because its semantics are
the narrower ones the batcher needs:
- one waiter at a time, and `set()` wakes only a waiter already waiting: there is no flag to
  latch and `clear()` (the batcher checks its queue before it waits, so a lost `set()` is harmless);
- the timeout is an answer (`False`), not an exception: nothing is cancelled when a keepalive
  interval passes, so no task cancellation and `uncancel()` bookkeeping per quiet interval.
Each wait is one bare future and at most one timer handle; an idle `Wakeup` holds no waiter deque.
"""

from __future__ import annotations

import asyncio


class Wakeup:
    __slots__ = ("_loop", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiter: asyncio.Future[bool] | None = None

    def set(self) -> None:
        """Wake the waiter, if one is waiting (otherwise nothing: there is no flag to set)."""
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
