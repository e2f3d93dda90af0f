"""The standard library against the gateway's stand-ins, in one process: `python -m bench.waits`.

1. The run timeout, entered once per agent run: `asyncio.timeout` against one bare
   `loop.call_later` handle (the floor a home-made deadline could reach).
2. The SSE batcher's wake-up, waited on once per batch of every stream: `Wakeup`
   (below: the batcher's stand-in until the stream relay of branch `streams` replaced the batcher)
   against `asyncio.Event` + `asyncio.timeout` (clear, wait under a timeout), in the same
   producer/consumer hand-off the batcher does.
Each pair runs alternately, several rounds, under asyncio and uvloop (when installed); compare the
ratios of one run (the machine may be shared), not absolute figures across runs.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable


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


N = 50_000
ROUNDS = 5


async def timeout_stdlib() -> None:
    for _ in range(N):
        async with asyncio.timeout(60):
            pass


async def timeout_handle() -> None:
    loop = asyncio.get_running_loop()
    for _ in range(N):
        loop.call_later(60, _noop).cancel()


def _noop() -> None:
    pass


async def handoff_wakeup() -> None:
    loop = asyncio.get_running_loop()
    wake = Wakeup(loop)
    box: list[int] = []

    async def producer() -> None:
        for i in range(N):
            box.append(i)
            wake.set()
            await asyncio.sleep(0)

    task = loop.create_task(producer())
    taken = 0
    while taken < N:
        if not box:
            await wake.wait(10.0)
        taken += len(box)
        box.clear()
    await task


async def handoff_event() -> None:
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    box: list[int] = []

    async def producer() -> None:
        for i in range(N):
            box.append(i)
            wake.set()
            await asyncio.sleep(0)

    task = loop.create_task(producer())
    taken = 0
    while taken < N:
        if not box:
            wake.clear()
            try:
                async with asyncio.timeout(10.0):
                    await wake.wait()
            except TimeoutError:
                pass
        taken += len(box)
        box.clear()
    await task


async def per_op_us(body: Callable[[], Awaitable[None]]) -> float:
    start = time.perf_counter()
    await body()
    return (time.perf_counter() - start) / N * 1e6


async def compare(name: str, stdlib: Callable[[], Awaitable[None]], ours: Callable[[], Awaitable[None]]) -> None:
    pairs = [(await per_op_us(stdlib), await per_op_us(ours)) for _ in range(ROUNDS)]
    std = statistics.median(p[0] for p in pairs)
    own = statistics.median(p[1] for p in pairs)
    print(f"  {name:<34} stdlib {std:6.2f} us  stand-in {own:6.2f} us  stdlib/stand-in {std / own:4.2f}"
          f"  (stdlib costs {std - own:+.2f} us per use)")


async def main() -> None:
    await compare("run timeout (once per run)", timeout_stdlib, timeout_handle)
    await compare("batch wake-up (once per batch)", handoff_event, handoff_wakeup)


if __name__ == "__main__":
    print("asyncio")
    asyncio.run(main())
    try:
        import uvloop
    except ImportError:
        sys.exit(0)
    print("uvloop")
    uvloop.run(main())
