"""A thin wrapper timing each store operation for the metrics, whatever the backend.

It knows no metrics library: `observe(operation, outcome, seconds)` is called once per operation,
with the operation's method name and `ok` or `error` (the exception still propagates). Outside the
store's internals, so a backend can change (aiosqlite, PostgreSQL) without touching it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from gateway.store.api import ResponseStore, StoredResponse

T = TypeVar("T")
Observe = Callable[[str, str, float], None]


class ObservedStore(ResponseStore):
    def __init__(self, inner: ResponseStore, observe: Observe) -> None:
        self.inner = inner
        self._observe = observe

    async def _timed(self, operation: str, work: Awaitable[T]) -> T:
        started = time.perf_counter()
        outcome = "error"
        try:
            result = await work
            outcome = "ok"
            return result
        finally:
            self._observe(operation, outcome, time.perf_counter() - started)

    async def open(self) -> None:
        await self._timed("open", self.inner.open())

    async def close(self) -> None:
        await self.inner.close()

    async def put(self, record: StoredResponse) -> None:
        await self._timed("put", self.inner.put(record))

    async def get(self, response_id: str, *, touch: bool = True) -> StoredResponse | None:
        return await self._timed("get", self.inner.get(response_id, touch=touch))

    async def delete(self, response_id: str) -> bool:
        return await self._timed("delete", self.inner.delete(response_id))

    async def conversation_head(self, name: str, *, touch: bool = True) -> StoredResponse | None:
        return await self._timed("conversation_head", self.inner.conversation_head(name, touch=touch))

    async def check(self) -> None:
        await self._timed("check", self.inner.check())

    async def count(self) -> int:
        return await self._timed("count", self.inner.count())
