"""A thin wrapper timing each store operation for the metrics, whatever the backend.

It knows no metrics library: `observe(operation, outcome, seconds)` is called once per operation,
with the operation's method name and `ok`, `refused` (a 4xx the store raised: an unknown
conversation, a conflict; the client's doing, nothing to alert on) or `error` (a fault; the
exception still propagates). Outside the
store's internals, so a backend can change (aiosqlite, PostgreSQL) without touching it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection
from typing import TypeVar

from gateway.errors import InvalidRequestError
from gateway.store.api import (
    Chain,
    Conversation,
    ConversationItem,
    ItemPage,
    ItemTail,
    ResponseStore,
    StoredResponse,
)
from gateway.store.files import FileStore
from gateway.store.runs import RunStore

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
        except InvalidRequestError:
            outcome = "refused"
            raise
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

    async def chain(self, response_id: str, *, max_bytes: int, touch: bool = True) -> Chain | None:
        return await self._timed("chain", self.inner.chain(response_id, max_bytes=max_bytes, touch=touch))

    async def delete(self, response_id: str) -> bool:
        return await self._timed("delete", self.inner.delete(response_id))

    async def conversation_head(self, name: str, *, touch: bool = True) -> StoredResponse | None:
        return await self._timed("conversation_head", self.inner.conversation_head(name, touch=touch))

    async def create_conversation(self, conversation: Conversation, items: list[ConversationItem]) -> None:
        await self._timed("create_conversation", self.inner.create_conversation(conversation, items))

    async def get_conversation(self, conversation_id: str) -> Conversation:
        return await self._timed("get_conversation", self.inner.get_conversation(conversation_id))

    async def update_conversation(self, conversation_id: str, metadata: dict[str, str]) -> Conversation:
        return await self._timed("update_conversation", self.inner.update_conversation(conversation_id, metadata))

    async def delete_conversation(self, conversation_id: str) -> None:
        await self._timed("delete_conversation", self.inner.delete_conversation(conversation_id))

    async def append_items(self, conversation_id: str, items: list[ConversationItem], *,
                           expected_last: str | None = None, response: StoredResponse | None = None) -> None:
        await self._timed("append_items", self.inner.append_items(
            conversation_id, items, expected_last=expected_last, response=response))

    async def conversation_items(self, conversation_id: str) -> list[ConversationItem]:
        return await self._timed("conversation_items", self.inner.conversation_items(conversation_id))

    async def conversation_tail(self, conversation_id: str, *, max_bytes: int,
                                check_ids: Collection[str] = ()) -> ItemTail:
        return await self._timed("conversation_tail", self.inner.conversation_tail(
            conversation_id, max_bytes=max_bytes, check_ids=check_ids))

    async def list_items(self, conversation_id: str, *, limit: int, order: str = "desc",
                         after: str | None = None) -> ItemPage:
        return await self._timed("list_items", self.inner.list_items(
            conversation_id, limit=limit, order=order, after=after))

    async def get_item(self, conversation_id: str, item_id: str) -> ConversationItem:
        return await self._timed("get_item", self.inner.get_item(conversation_id, item_id))

    async def delete_item(self, conversation_id: str, item_id: str) -> Conversation:
        return await self._timed("delete_item", self.inner.delete_item(conversation_id, item_id))

    @property
    def runs(self) -> RunStore:
        # the inner store's: not timed here: each run store's operations are few and its waits long by design
        return self.inner.runs

    @property
    def files(self) -> FileStore:
        return self.inner.files  # not timed: uploads and their reads are few and sized by the client

    async def check(self) -> None:
        await self._timed("check", self.inner.check())

    async def count(self) -> int:
        return await self._timed("count", self.inner.count())

    async def size(self) -> int:
        return await self._timed("size", self.inner.size())
