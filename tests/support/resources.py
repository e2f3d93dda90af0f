"""Counting what a request leaves behind: asyncio tasks and open file descriptors of this process.

    async with no_leaks():
        ... make requests that fail in interesting ways ...

On exit it waits (briefly) for every task created inside the block to finish, and for the fd count
to come back near where it was. Tasks that serve an idle keep-alive connection
(`RequestHandler.start`) are not counted as leaks: they belong to a connection, not to a request,
and the fd count catches connections that pile up.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from gateway.http import appkeys


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _is_connection_task(task: asyncio.Task) -> bool:
    return getattr(task.get_coro(), "__qualname__", "") == "RequestHandler.start"


def _describe(task: asyncio.Task) -> str:
    coro = task.get_coro()
    return f"{task.get_name()}: {getattr(coro, '__qualname__', coro)!r}"


async def extra_tasks(baseline: set[asyncio.Task], timeout: float = 2.0) -> list[str]:
    """Tasks alive now that were not in `baseline`, after waiting up to `timeout` for them to end."""
    deadline = time.monotonic() + timeout
    while True:
        me = asyncio.current_task()
        extra = [t for t in asyncio.all_tasks()
                 if t not in baseline and t is not me and not t.done() and not _is_connection_task(t)]
        if not extra or time.monotonic() > deadline:
            return [_describe(t) for t in extra]
        await asyncio.sleep(0.02)


async def settled_fds(limit: int, timeout: float = 2.0) -> int:
    """The fd count once it is at most `limit`, or whatever it is after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        count = open_fds()
        if count <= limit or time.monotonic() > deadline:
            return count
        await asyncio.sleep(0.02)


@asynccontextmanager
async def no_leaks(*, fd_slack: int = 2, timeout: float = 2.0) -> AsyncIterator[None]:
    """Assert that the block leaves no task running and at most `fd_slack` more open fds
    (room for keep-alive connections that a pool may legitimately hold)."""
    baseline_tasks = set(asyncio.all_tasks())
    baseline_fds = open_fds()
    yield
    leftovers = await extra_tasks(baseline_tasks, timeout)
    assert not leftovers, f"tasks left running: {leftovers}"
    fds = await settled_fds(baseline_fds + fd_slack, timeout)
    assert fds <= baseline_fds + fd_slack, f"open fds grew from {baseline_fds} to {fds}"


async def close_idle_pools(app: web.Application) -> None:
    """Drop the gateway's pooled idle upstream connections (keep-alive is not a leak), by reopening
    its upstream client. Only call it with no request in flight."""
    upstream = app[appkeys.UPSTREAM]
    await upstream.close()
    await upstream.start()
